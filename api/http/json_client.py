"""lodex's one HTTP client of its own API, standard library only (the CLI's short way to a running server imports
nothing heavy): JSON requests over `http.client` connections, and the one reading of lodex's error shape
{"error": {"code", "message"}} — used by `lodex.Client` (api/http/client.py) and the CLI's forward (api/http/forward.py)."""

import http.client
import json
import threading
from typing import Any
from urllib.parse import urlencode, urlsplit

# a kept-alive connection the server closed meanwhile fails at once with these: asked again on a new one
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


def error_of(data: bytes) -> tuple[str, str] | None:
    """(code, message) of an answer in lodex's error shape, the message on one line; None for anything else."""
    try:
        error = json.loads(data)["error"]
        code, message = str(error["code"]), error["message"]
    except (ValueError, KeyError, TypeError):
        return None
    return code, " ".join(str(message).split())[:500]  # one line, however the answer came


def connection(host: str, port: int | None, timeout: float, secure: bool = False) -> http.client.HTTPConnection:
    """A connection (not opened yet) to a lodex server."""
    kind = http.client.HTTPSConnection if secure else http.client.HTTPConnection
    return kind(host, port, timeout=timeout)


class JsonClient:
    """JSON requests to the lodex server at `url` (http or https, with a path prefix if it has one), `headers` on each;
    one kept-alive connection per thread, opened again when the server closed it between two requests."""

    def __init__(self, url: str, headers: dict[str, str], timeout: float) -> None:
        parts = urlsplit(url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{url!r} is not an http:// or https:// address")
        self.url, self._parts, self._prefix = url.rstrip("/"), parts, parts.path
        self._headers = {"Accept": "application/json", **headers}
        self._timeout = timeout
        self._local = threading.local()
        self._opened: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def request(self, method: str, path: str, params: dict[str, Any] | None = None, body: Any = None) -> tuple[int, bytes]:
        """(status, body) of one request; `params` (None values left out, lists repeated) in the query string, `body`
        sent as JSON. OSError or http.client.HTTPException when the server cannot be reached."""
        query = urlencode({k: v for k, v in (params or {}).items() if v is not None}, doseq=True)
        target = self._prefix + path + (f"?{query}" if query else "")
        headers = dict(self._headers)
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn, reused = self._connection()
        try:
            return self._exchange(conn, method, target, payload, headers)
        except _STALE:
            if not reused:
                raise
            conn.close()  # closed by the server while idle: once more, on a new connection
            return self._exchange(conn, method, target, payload, headers)

    @staticmethod
    def _exchange(conn: http.client.HTTPConnection, method: str, target: str, payload: bytes | None, headers: dict[str, str]) -> tuple[int, bytes]:
        try:
            conn.request(method, target, payload, headers)
            response = conn.getresponse()
            return response.status, response.read()
        except BaseException:
            conn.close()
            raise

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's connection, and whether it served a request before."""
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn, conn.sock is not None
        conn = self._local.conn = connection(self._parts.hostname or "", self._parts.port, self._timeout, self._parts.scheme == "https")
        with self._lock:
            self._opened.append(conn)
        return conn, False

    def close(self) -> None:
        """Close every thread's connection."""
        with self._lock:
            for conn in self._opened:
                conn.close()
            self._opened.clear()
