"""`lodex search` trusts no server.json it cannot verify: only a loopback listener that proves it holds the record's
per-start secret gets the API key, and a hostile or stale record (foreign host, reused pid, fake, trickling, silent or
non-HTTP listener) costs at most a few seconds before the CLI searches by itself. Real sockets on 127.0.0.1."""

import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from lodex.api.application import Application
from lodex.api.cli import app as cli_app
from lodex.api.http import server_record
from lodex.api.http.app import create_app
from lodex.api.http.forward import ask_server
from lodex.api.http.server_record import SERVER_FILE, Identity, read_server, record_server, running_server
from tests.live_server import live_server
from tests.test_api import _service

KEY = "sesame-" + "k" * 20
FAKE = {
    "query": "swept wings",
    "mode": "hybrid",
    "took_ms": 0.1,
    "results": [{"doc_id": "f" * 16, "path": "FAKE-RESULT.md", "title": "planted", "score": 9.9, "passages": []}],
}
Handler = Callable[[socket.socket, bytearray], None]


class Listener:
    """A TCP listener on `host` (port 0) that records every byte it receives and answers as `handler` says."""

    def __init__(self, handler: Handler, host: str = "127.0.0.1") -> None:
        self.handler, self.received, self.closed = handler, bytearray(), threading.Event()
        self.sock = socket.create_server((host, 0))
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            self.handler(conn, self.received)
        except OSError:
            pass

    def close(self) -> None:
        self.closed.set()
        self.sock.close()
        for conn in self.conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()


def _read_request(conn: socket.socket, received: bytearray) -> bool:
    """Read one HTTP request (head and Content-Length body) into `received`; False at end of stream."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return False
        data += chunk
        received += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return False
        body += chunk
        received += chunk
    return True


def fake_lodex(conn: socket.socket, received: bytearray) -> None:
    """Speaks HTTP like lodex and answers every request with planted results (and a made-up identity)."""
    while _read_request(conn, received):
        body = json.dumps(FAKE | {"instance": "0" * 32, "proof": "0" * 64}).encode()
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))


def trickling(conn: socket.socket, received: bytearray) -> None:
    """Starts an answer, then sends one byte of a never-ending header every 50 ms: every read is short."""
    _read_request(conn, received)
    conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
    pace = threading.Event()  # never set: a 50 ms beat, until the client hangs up (then sendall fails)
    while not pace.wait(0.05):
        conn.sendall(b"x")


def silent(conn: socket.socket, received: bytearray) -> None:
    """Accepts and reads, never answers."""
    while chunk := conn.recv(65536):
        received += chunk


def not_http(conn: socket.socket, received: bytearray) -> None:
    """Another protocol's greeting, then it reads whatever comes."""
    conn.sendall(b"SSH-2.0-OpenSSH_9.6 not-lodex\r\n")
    while chunk := conn.recv(65536):
        received += chunk


def _write_record(data: Path, host: str, port: int, pid: int | None = None, mode: int = 0o600, **extra: object) -> None:
    """A record as `lodex serve` writes it, with a secret the listener does not know (written by hand: any lodex reads it)."""
    record = {
        "pid": pid or os.getpid(),
        "host": host,
        "port": port,
        "hostname": socket.gethostname(),
        "started": time.time(),
        "instance": secrets.token_hex(16),
        "secret": secrets.token_hex(32),
        **extra,
    }
    path = data / SERVER_FILE
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "w") as fh:
        fh.write(json.dumps(record))
    os.chmod(path, mode)


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data dir indexed with the fake encoder (two documents), the CLI pointed at it with api key KEY."""
    root, data = tmp_path / "docs", tmp_path / "data"
    root.mkdir()
    (root / "wings.md").write_text("# Wings\n\nSwept wings delay the drag rise at transonic Mach numbers.\n")
    (root / "terns.txt").write_text("Arctic terns migrate from the Arctic to the Antarctic and back every year.\n")
    monkeypatch.setenv("LODEX_DATA_DIR", str(data))
    monkeypatch.setenv("LODEX_ENCODER__BACKEND", "tests.fakes:fake_encoder")
    monkeypatch.setenv("LODEX_API__API_KEY", KEY)
    done = CliRunner().invoke(cli_app, ["index", str(root)])
    assert done.exit_code == 0, done.output
    return data


def _search(limit_s: float = 5.0) -> tuple[float, str, str]:
    """Run `lodex search --json` in this process (on a thread, so that a hang fails the test instead of stalling it):
    (seconds, stdout, stderr)."""
    out: dict[str, object] = {}

    def run() -> None:
        out["result"] = CliRunner().invoke(cli_app, ["search", "swept wings", "--json"])

    started = time.monotonic()
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(limit_s + 5)
    took = time.monotonic() - started
    assert not worker.is_alive(), f"lodex search still running after {took:.1f} s"
    result = out["result"]
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    return took, result.stdout, result.stderr  # type: ignore[attr-defined]


def _own_address() -> str | None:
    """A non-loopback IPv4 address of this machine, or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.123", 9))  # no packet is sent: the kernel only picks the source address
            address = s.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def _fell_back(took: float, stdout: str, listener: Listener) -> None:
    assert took < 5.0, f"took {took:.1f} s"
    assert KEY.encode() not in listener.received and b"authorization" not in bytes(listener.received).lower()
    paths = [hit["path"] for hit in json.loads(stdout)["results"]]
    assert "FAKE-RESULT.md" not in paths and "wings.md" in paths  # the index's own results, searched here


@pytest.mark.parametrize("handler", [fake_lodex, trickling, silent, not_http], ids=["fake", "trickling", "silent", "not-http"])
def test_an_unproven_listener_never_gets_the_key(data: Path, handler: Handler) -> None:
    listener = Listener(handler)
    try:
        _write_record(data, "127.0.0.1", listener.port)  # this process's pid: alive, as a server's would be
        took, stdout, stderr = _search()
        _fell_back(took, stdout, listener)
        assert "the key was not sent; searching the index here" in stderr, stderr
    finally:
        listener.close()


def test_a_record_naming_a_foreign_host_is_ignored(data: Path) -> None:
    address = _own_address()
    listener = Listener(fake_lodex, "0.0.0.0")  # reachable on every address of this machine
    try:
        _write_record(data, address or "192.0.2.1", listener.port)
        assert running_server(data) is None
        took, stdout, stderr = _search()
        _fell_back(took, stdout, listener)
        assert "not a loopback address" in stderr and not listener.conns, stderr
    finally:
        listener.close()


def test_a_reused_pid_is_not_the_server(data: Path) -> None:
    other = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    listener = Listener(fake_lodex)
    try:  # a live process of this user, but not the one that wrote the record (it started at another time)
        _write_record(data, "127.0.0.1", listener.port, pid=other.pid, process_start="1")
        assert running_server(data) is None
        took, stdout, _ = _search()
        _fell_back(took, stdout, listener)
    finally:
        listener.close()
        other.communicate(b"", timeout=30)


def test_a_pid_of_another_user_is_not_the_server(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_record(data, "127.0.0.1", 9)

    def not_permitted(pid: int, sig: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(server_record.os, "kill", not_permitted)
    assert running_server(data) is None  # EPERM: alive, but another user's process, so not the server of this record


def test_a_record_others_can_read_or_another_user_owns_is_ignored(data: Path) -> None:
    listener = Listener(fake_lodex)
    try:
        _write_record(data, "127.0.0.1", listener.port, mode=0o644)
        took, stdout, stderr = _search()
        _fell_back(took, stdout, listener)
        assert "other users can read or change it" in stderr and not listener.conns, stderr
    finally:
        listener.close()


def test_a_record_without_a_secret_is_not_trusted(tmp_path: Path) -> None:
    _write_record(tmp_path, "127.0.0.1", 9)
    path = tmp_path / SERVER_FILE
    record = json.loads(path.read_text())
    path.write_text(json.dumps({k: v for k, v in record.items() if k not in ("instance", "secret")}))  # as a server before this wrote it
    found, reason = read_server(tmp_path)
    assert found is None and "an older lodex serve; restart it" in reason


def test_the_record_is_private_and_written_whole(tmp_path: Path) -> None:
    identity = Identity.new()
    path = record_server(tmp_path, "0.0.0.0", 8123, identity)
    assert path.stat().st_mode & 0o777 == 0o600 and not list(tmp_path.glob(".server.json*"))
    found = running_server(tmp_path)
    assert found is not None and (found.host, found.port, found.identity) == ("127.0.0.1", 8123, identity)


# ---- the real server ---------------------------------------------------------------------------------------------
@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Application, Identity, int]]:
    """A real lodex app (fake encoder, api key KEY) under uvicorn on 127.0.0.1, recorded in its data dir's server.json."""
    service = _service(tmp_path, api_key=KEY)
    with live_server(service) as (identity, port):
        yield service, identity, port


def test_the_real_server_proves_itself_and_gets_the_key(served: tuple[Application, Identity, int]) -> None:
    service, _, port = served
    started = time.monotonic()
    answer = ask_server(service.settings.data_dir, KEY, "POST", "/search", {"q": "swept wings lift", "k": 2})
    assert answer.body is not None, answer.reason
    assert answer.body["results"][0]["path"] == "wings.md" and time.monotonic() - started < 5
    refused = ask_server(service.settings.data_dir, "wrong", "GET", "/stats")
    assert refused.body is None and "answered 401 (check api.api_key)" in refused.reason
    stolen = Identity.new()  # a record whose secret is not the server's: the server cannot prove it, and is not asked
    record_server(service.settings.data_dir, "127.0.0.1", port, stolen)
    assert "did not prove" in ask_server(service.settings.data_dir, KEY, "GET", "/stats").reason


def test_the_identity_endpoint(tmp_path: Path) -> None:
    service, identity = _service(tmp_path, api_key=KEY), Identity.new()
    try:
        with TestClient(create_app(service, identity=identity), base_url="http://127.0.0.1:8765") as client:
            challenge = secrets.token_hex(16)
            answer = client.get("/identity", params={"challenge": challenge})  # no key: asked before the key is sent
            assert answer.status_code == 200 and answer.json() == {"instance": identity.instance, "proof": identity.proof(challenge)}
            assert identity.secret not in answer.text
            assert client.get("/identity", params={"challenge": secrets.token_hex(16)}).json()["proof"] != answer.json()["proof"]
            for bad in ("", "short", "G" * 32, "a" * 129, challenge.upper()):
                refused = client.get("/identity", params={"challenge": bad})
                assert refused.status_code == 422 and refused.json()["error"]["code"] == "invalid_request", (bad, refused.text)
            assert client.get("/identity").status_code == 422
            rebound = client.get("/identity", params={"challenge": challenge}, headers={"host": "evil.example"})
            assert rebound.status_code == 403 and set(rebound.json()) == {"error"}  # the Host rule covers it
            schema = client.get("/openapi.json").json()
            assert "/identity" in schema["paths"] and "IdentityOut" in schema["components"]["schemas"]
    finally:
        service.close()
