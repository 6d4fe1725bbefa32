"""`lodex search` and the server search by one request contract: a request the running `lodex serve` refuses (4xx) is
shown as that error (exit 2), never searched around; only a server that cannot be reached or fails (5xx) makes the
CLI search by itself; --modified-after means what the HTTP parameter means. Real sockets on 127.0.0.1."""

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lodex.api.application import Application
from lodex.api.cli import app as cli_app
from lodex.api.http.server_record import Identity, record_server
from tests.live_server import live_server
from tests.test_api import _service
from tests.test_forward_trust import Listener, _read_request

KEY = "sesame-" + "k" * 20


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Application, int]]:
    """A real lodex app (fake encoder, api.max_k 20, api.max_query_chars 200) under uvicorn on 127.0.0.1, recorded in
    its data dir's server.json; the CLI pointed at that data dir with the default limits (max_k 100)."""
    service = _service(tmp_path, api_key=KEY)
    with live_server(service) as (_, port):
        monkeypatch.setenv("LODEX_DATA_DIR", str(service.settings.data_dir))
        monkeypatch.setenv("LODEX_ENCODER__BACKEND", "tests.fakes:fake_encoder")
        monkeypatch.setenv("LODEX_API__API_KEY", KEY)
        yield service, port


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli_app, ["search", *args])
    return result.exit_code, result.stdout, result.stderr


def _error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr and "searching the index here" not in stderr
    return lines[0]


def test_a_request_the_server_refuses_is_shown_as_its_error(served: tuple[Application, int]) -> None:
    _, port = served
    code, out, err = _cli("swept wings", "--json", "-k", "3")
    assert code == 0 and json.loads(out)["results"][0]["path"] == "wings.md", err
    assert "searching the index here" not in err  # answered by the server
    code, out, err = _cli("swept wings", "--json", "-k", "50")  # this config allows 50; the server's api.max_k is 20
    line = _error_line(err)
    assert code == 2 and not out
    assert f"the server on 127.0.0.1:{port} answered 400: k must be between 1 and 20 (api.max_k)" in line
    code, out, err = _cli("wings " * 60)  # 360 characters: this config allows 1000, the server 200
    assert code == 2 and "answered 400: q is longer than 200 characters (api.max_query_chars)" in _error_line(err)


def test_a_wrong_key_is_shown_with_the_fix(served: tuple[Application, int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LODEX_API__API_KEY", "wrong")
    code, out, err = _cli("swept wings", "--json")
    line = _error_line(err)
    assert code == 2 and "answered 401" in line and "api.api_key" in line and "--local" in line
    code, out, err = _cli("swept wings", "--json", "--local")  # asked to, it searches here
    assert code == 0 and json.loads(out)["results"][0]["path"] == "wings.md"


def test_bad_values_are_refused_before_anything_is_asked(served: tuple[Application, int]) -> None:
    for args, expected in (
        (["   "], "q is empty"),
        (["wings", "-k", "0"], "k must be between 1 and 100"),
        (["wings", "--mode", "fuzzy"], "mode: Input should be"),
        (["wings", "--modified-after", "yesterday"], "modified_after:"),
        (["wings", "--lang", "english"], "lang takes at most"),
    ):
        code, _, err = _cli(*args)
        line = _error_line(err)
        assert code == 2 and expected in line and "the server" not in line, (args, line)


def test_modified_after_as_the_http_parameter(served: tuple[Application, int]) -> None:
    for moment, finds in (("2999-01-01", False), ("0001-01-01T00:00:00+14:00", True), ("1", True), ("2999-01-01T00:00:00Z", False)):
        for where in ((), ("--local",)):
            code, out, err = _cli("drag", "--json", "--modified-after", moment, *where)
            assert code == 0, err
            assert bool(json.loads(out)["results"]) is finds, (moment, where)
            assert "searching the index here" not in err


def _failing_server(identity: Identity, status: int) -> "Listener":
    """A listener that proves the identity (it is the recorded server) and answers every other request with `status`."""

    def handler(conn: socket.socket, received: bytearray) -> None:
        while True:
            start = len(received)
            if not _read_request(conn, received):
                return
            head = bytes(received[start:]).split(b"\r\n", 1)[0].decode()
            if " /identity?challenge=" in head:
                challenge = head.split("challenge=", 1)[1].split(" ", 1)[0]
                body = json.dumps({"instance": identity.instance, "proof": identity.proof(challenge)}).encode()
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
                continue
            body = json.dumps({"error": {"code": "internal_error", "message": "it broke"}}).encode()
            conn.sendall(
                b"HTTP/1.1 %d Oops\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s" % (status, len(body), body)
            )
            return

    return Listener(handler)


@pytest.mark.parametrize("status", [500, 503])
def test_a_failing_server_makes_the_cli_search_by_itself(served: tuple[Application, int], status: int) -> None:
    service, _ = served
    identity = Identity.new()
    listener = _failing_server(identity, status)
    try:
        record_server(service.settings.data_dir, "127.0.0.1", listener.port, identity)
        code, out, err = _cli("swept wings", "--json")
        assert code == 0, err
        assert f"answered {status}; searching the index here" in err
        assert json.loads(out)["results"][0]["path"] == "wings.md"
        assert b"POST /search" in listener.received  # it was asked, and failed
    finally:
        listener.close()
