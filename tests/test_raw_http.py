"""Malformed HTTP against a real uvicorn server running lodex's JsonErrorsProtocol, over raw sockets: every answer is
an HTTP response in the one JSON error shape (or a normal JSON answer), never plain text nor a 5xx, and the server
keeps answering (stalled bodies, duplicate Host headers included)."""

import json
import socket
from collections.abc import Iterator

import pytest
import uvicorn

from lodex.api.application import Application
from lodex.api.http.app import create_app
from lodex.api.http.errors import JsonErrorsProtocol
from tests.live_server import StartingServer
from tests.test_api import _service
from tests.test_request_fuzz import _shape


class ThreadServer:
    """uvicorn with lodex's JsonErrorsProtocol on a free loopback port, in a background thread of this process."""

    def __init__(self, service: Application) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        config = uvicorn.Config(create_app(service), host="127.0.0.1", port=self.port, http=JsonErrorsProtocol, log_level="warning", access_log=False)
        self.server = StartingServer(config)

    def start(self) -> "ThreadServer":
        self.thread = self.server.run_in_thread("fuzz-uvicorn")
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)

    @property
    def host(self) -> bytes:
        return f"127.0.0.1:{self.port}".encode()

    def connect(self, timeout: float = 5.0) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=timeout)

    def exchange(self, data: bytes, timeout: float = 5.0) -> bytes:
        """Send `data` and read until the server closes, or `timeout` passes without a byte."""
        with self.connect(timeout) as sock:
            try:
                sock.sendall(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server refused before reading it all; its answer may still be there
            return _read_all(sock)


def _read_all(sock: socket.socket) -> bytes:
    chunks = []
    while True:
        try:
            chunk = sock.recv(65536)
        except (TimeoutError, ConnectionResetError):
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _responses(data: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """The HTTP responses in `data`, in order: (status, headers, body); the body read by content-length or chunks."""
    out = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        assert sep, f"not an HTTP response: {data[:300]!r}"
        lines = head.decode("latin-1").split("\r\n")
        version, status, *_ = lines[0].split(" ", 2)
        assert version.startswith("HTTP/1."), lines[0]
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size_line, _, rest = rest.partition(b"\r\n")
                size = int(size_line.split(b";")[0], 16)
                body, rest = body + rest[:size], rest[size + 2 :]
                if size == 0:
                    break
        else:
            length = int(headers.get("content-length", len(rest)))
            body, rest = rest[:length], rest[length:]
        out.append((int(status), headers, body))
        data = rest
    return out


def _check_answer(data: bytes) -> list[int]:
    """Every response in `data` is JSON (an error in the one shape), none a 5xx; their statuses."""
    statuses = []
    for status, headers, body in _responses(data):
        assert status < 500, (status, body[:500])
        assert headers.get("content-type", "").startswith("application/json"), (status, headers, body[:300])
        parsed = json.loads(body)
        if status >= 400:
            _shape(parsed)
        statuses.append(status)
    return statuses


def _alive(server: ThreadServer) -> None:
    data = server.exchange(b"GET /health HTTP/1.1\r\nHost: " + server.host + b"\r\nConnection: close\r\n\r\n")
    assert _responses(data)[0][0] == 200 and json.loads(_responses(data)[0][2]) == {"status": "ok"}, data[:300]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadServer]:
    svc = _service(tmp_path_factory.mktemp("fuzz-server"))
    srv = ThreadServer(svc).start()
    try:
        yield srv
    finally:
        srv.stop()
        svc.close()


def _request(server: ThreadServer, head: str, body: bytes = b"", host: bytes | None = None) -> bytes:
    """`head` (request line and extra header lines, '\\r\\n'-separated, without Host) as a request with Host and
    Connection: close."""
    lines = head.encode("latin-1").split(b"\r\n")
    return b"\r\n".join([lines[0], b"Host: " + (host or server.host), *lines[1:], b"Connection: close"]) + b"\r\n\r\n" + body


def _post(server: ThreadServer, body: bytes, path: str = "/search") -> bytes:
    return _request(server, f"POST {path} HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {len(body)}", body)


RAW_CASES = {
    "long-url-search": lambda s: _request(s, "GET /search?q=" + "a" * 100_000 + " HTTP/1.1"),
    "long-url-health": lambda s: _request(s, "GET /health?pad=" + "a" * 100_000 + " HTTP/1.1"),
    "long-header-line": lambda s: _request(s, "GET /health HTTP/1.1\r\nX-Big: " + "b" * 100_000),
    "many-headers": lambda s: _request(s, "GET /health HTTP/1.1\r\n" + "\r\n".join(f"X-Fuzz-{i}: {i}" for i in range(200))),
    "garbage-line": lambda s: b"GARBAGE\r\n\r\n",
    "garbage-bytes": lambda s: b"\x00\xff\xfe\x16\x03\x01 binary\r\n\r\n",
    "tls-hello": lambda s: bytes.fromhex("160301002001000010030300000000000000000000000000"),
    "bad-version": lambda s: _request(s, "GET /health HTTP/9.9"),
    "header-without-colon": lambda s: _request(s, "GET /health HTTP/1.1\r\nNoColonHere"),
    "raw-byte-in-target": lambda s: _request(s, "GET /search?q=wings\xff HTTP/1.1"),
    "surrogate-percent-escape": lambda s: _request(s, "GET /search?q=wings%ED%A0%80 HTTP/1.1"),
    "non-ascii-host": lambda s: _request(s, "GET /documents HTTP/1.1", host=b"\xff\xfe.example"),
    "content-length-text": lambda s: _request(s, "POST /search HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: ten", b'{"q": "wings"}'),
    "content-length-negative": lambda s: _request(
        s, "POST /search HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: -5", b'{"q": "wings"}'
    ),
    "content-length-huge": lambda s: _request(
        s, "POST /search HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 99999999999999999999999", b'{"q": "wings"}'
    ),
    "content-length-twice": lambda s: _request(
        s, "POST /search HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 14\r\nContent-Length: 3", b'{"q": "wings"}'
    ),
    "content-length-short": lambda s: _request(s, "POST /search HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 5", b'{"q": "wings"}'),
    "content-length-short-keepalive": lambda s: (
        b"POST /search HTTP/1.1\r\nHost: " + s.host + b"\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\n" + b'{"q": "wings"}'
    ),
    "chunked-bad-size": lambda s: _request(
        s, "POST /search HTTP/1.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked", b"zz\r\n{}\r\n0\r\n\r\n"
    ),
    "chunked-and-length": lambda s: _request(
        s, "POST /search HTTP/1.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nContent-Length: 14", b'{"q": "wings"}'
    ),
    "surrogate-body": lambda s: _post(s, b'{"q": "flow \\ud800 x"}'),
    "surrogate-document": lambda s: _post(s, b'{"name": "m", "text": "t", "metadata": {"k\\ud800": 1}}', "/documents"),
    "invalid-utf8-body": lambda s: _post(s, b'{"q": "wi\xff\xfegs"}'),
    "deep-body": lambda s: _post(s, b"[" * 10_000),
    "over-body-limit": lambda s: _post(s, b'{"q": "' + b"x" * 20_000 + b'"}'),
    "foreign-host": lambda s: _request(s, "GET /documents HTTP/1.1", host=b"rebind.attacker.example"),
}


@pytest.mark.parametrize("case", list(RAW_CASES))
def test_raw_request_answers_json(server: ThreadServer, case: str) -> None:
    data = server.exchange(RAW_CASES[case](server))
    if data:  # closing without an answer is allowed; an answer is JSON, never plain text nor a 5xx
        _check_answer(data)
    _alive(server)


def test_raw_normal_request_still_json(server: ThreadServer) -> None:
    """The baseline the raw cases compare against: a well-formed request on the same server."""
    data = server.exchange(_request(server, "GET /search?q=swept%20wings&k=1 HTTP/1.1"))
    assert _check_answer(data) == [200]
    assert json.loads(_responses(data)[0][2])["results"][0]["path"] == "wings.md"


def test_content_length_longer_than_the_body_does_not_hang(server: ThreadServer) -> None:
    body = b'{"q": "wings"}'
    request = (
        b"POST /search HTTP/1.1\r\nHost: " + server.host + b"\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000\r\nConnection: close\r\n\r\n" + body
    )
    with server.connect(timeout=1.0) as waiting:
        waiting.sendall(request)
        _alive(server)  # while that request waits for the rest of its body, others are answered
        assert _read_all(waiting) == b""  # nothing answered yet: the body is not complete
        waiting.settimeout(5.0)
        waiting.shutdown(socket.SHUT_WR)  # the client gives up on sending the rest
        data = _read_all(waiting)
        if data:
            _check_answer(data)
    _alive(server)
    many = [server.connect(timeout=5.0) for _ in range(20)]  # many such stalled requests at once
    try:
        for sock in many:
            sock.sendall(request)
        _alive(server)
    finally:
        for sock in many:
            sock.close()
    _alive(server)


def test_every_host_header_is_checked(server: ThreadServer) -> None:
    """Two Host headers, an evil one first: refused (a proxy may read the first, the app the last)."""
    for first, second in ((b"evil.example", server.host), (server.host, b"evil.example")):
        data = server.exchange(b"GET /documents HTTP/1.1\r\nHost: " + first + b"\r\nHost: " + second + b"\r\nConnection: close\r\n\r\n")
        assert _check_answer(data) == [403]
