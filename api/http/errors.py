"""HTTP edges: the one JSON error shape (from uvicorn's parser errors to lodex's), API-key auth, the Host rule of a
loopback server, HEAD requests, and the request-body size limit."""

import hmac
import ipaddress
import json
import re
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from lodex.store.errors import LodexError

CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "too_many_requests",
    500: "internal_error",
    503: "unavailable",
}
# The HTTP status each kind of lodex error (its `code`) answers with: the core's errors name their kind, never a status.
STATUS_OF_KIND = {
    "config_error": 400,
    "bad_request": 400,
    "not_found": 404,
    "origin_mismatch": 409,
    "read_only": 409,
    "conflict": 409,
    "too_large": 413,
    "invalid_request": 422,
    "read_error": 422,
    "busy": 429,
    "store_error": 503,
    "model_error": 503,
    "stopping": 503,
    "cluster_error": 503,
}
OPEN_PATHS = ("/health", "/identity", "/", "/docs", "/openapi.json", "/static/")  # answered without the key (the Host rule still applies)
LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost"})


_HOST = re.compile(r"\[(?P<v6>[0-9a-fA-F:.]+)\]|(?P<name>[A-Za-z0-9._-]+)")
_PORT = re.compile(r":[0-9]{1,5}")


def status_of(exc: LodexError) -> int:
    """The HTTP status a lodex error answers with, by its kind (500 for a kind not listed)."""
    return STATUS_OF_KIND.get(exc.code, 500)


def is_loopback(host: str) -> bool:
    """Whether a host name or address (an address bound, or a Host header's name) is this machine's loopback."""
    host = host.strip().lower().strip("[]")
    host = host[:-1] if host.endswith(".") and not host.endswith("..") else host
    if host in LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or bool(mapped and mapped.is_loopback)


def host_name(header: str) -> str | None:
    """The name part of a Host header ('[::1]:8765' → '::1', 'localhost:8765' → 'localhost'), or None when the header
    is not a plain name or address with an optional port (userinfo, zone ids, spaces and the like)."""
    header = header.strip()
    match = _HOST.match(header)
    if match is None or not (match.end() == len(header) or _PORT.fullmatch(header, match.end())):
        return None
    return match.group("v6") or match.group("name")


def error(status: int, message: str, code: str | None = None, headers: dict[str, str] | None = None) -> JSONResponse:
    """A response in the one error shape: {"error": {"code", "message"}}."""
    return JSONResponse({"error": {"code": code or CODES.get(status, "error"), "message": message}}, status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    """Every error, from routing, validation, lodex or a bug, answers in the one shape."""

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error(exc.status_code, str(exc.detail), headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first: dict[str, Any] = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        if first.get("type") == "json_invalid":  # FastAPI's own says "1: JSON decode error"
            at = first.get("loc", ("body", 0))[-1]
            return error(
                422, f"the request body is not valid JSON ({first.get('ctx', {}).get('error', 'unreadable')} at character {at}): send one JSON object"
            )
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "request"
        return error(422, f"{where}: {first.get('msg', 'invalid')}")

    @app.exception_handler(LodexError)
    async def lodex_error(request: Request, exc: LodexError) -> JSONResponse:
        retry = getattr(exc, "retry_after", None)  # a busy writer says when to come back
        headers = {"Retry-After": str(max(1, round(retry)))} if retry is not None else None
        return error(status_of(exc), exc.one_line(), exc.code, headers=headers)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        return error(500, f"unexpected {type(exc).__name__}; see the server log")


class LimitsAndAuth:
    """ASGI middleware: the Host rule (when `allowed_hosts` is given: a server on a loopback address answers only to
    loopback names and those listed, so a web page cannot reach it through DNS rebinding), bearer-key check (when a
    key is set), HEAD answered as GET without a body, and a cap on request bodies."""

    def __init__(self, app: ASGIApp, api_key: str, max_body_bytes: int, allowed_hosts: list[str] | None = None) -> None:
        self.app = app
        self.api_key = api_key.strip().encode()
        self.max_body = max_body_bytes
        self.allowed_hosts = None if allowed_hosts is None else frozenset(h.strip().lower() for h in allowed_hosts)

    def _host_refused(self, scope: Scope) -> str | None:
        """The first Host header this server does not answer to (every one is checked), or None."""
        if self.allowed_hosts is None:
            return None
        for key, value in scope.get("headers", []):
            if key.lower() != b"host":
                continue
            raw = value.decode("latin-1")
            name = host_name(raw)
            if name is None or not (is_loopback(name) or name.lower().rstrip(".") in self.allowed_hosts):
                return str(raw)
        return None

    def _authorized(self, headers: dict[str, bytes]) -> bool:
        scheme, _, token = headers.get("authorization", b"").strip().partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self.api_key)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v for k, v in scope.get("headers", [])}
        refused = self._host_refused(scope)
        if refused is not None:
            response = error(
                403,
                f"Host {refused[:100]!r} is not allowed: a lodex server on a loopback address answers only "
                "to localhost names (this guards against DNS rebinding); add the name to api.allowed_hosts",
            )
            return await response(scope, receive, send)
        if self.api_key and not _open(scope["path"]) and not self._authorized(headers):
            response = error(401, "missing or wrong API key: send 'Authorization: Bearer <key>'", headers={"WWW-Authenticate": "Bearer"})
            return await response(scope, receive, send)
        if scope["method"] == "HEAD":
            return await self.app({**scope, "method": "GET"}, receive, _without_body(send))
        length = headers.get("content-length")
        if length is not None and length.isdigit():
            if int(length) > self.max_body:
                return await self._too_large(scope, receive, send)
            return await self.app(scope, receive, send)
        if scope["method"] in ("GET", "HEAD", "DELETE", "OPTIONS"):
            return await self.app(scope, receive, send)
        messages, seen = [], 0  # a body of unknown length (chunked): read it up to the limit first
        while True:
            message = await receive()
            messages.append(message)
            seen += len(message.get("body", b""))
            if seen > self.max_body:
                return await self._too_large(scope, receive, send)
            if message["type"] != "http.request" or not message.get("more_body"):
                break

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        return await self.app(scope, replay, send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        await error(413, f"request body over {self.max_body // 1024} KiB (api.max_body_kb)")(scope, receive, send)


def _open(path: str) -> bool:
    return path in OPEN_PATHS or path.startswith("/static/")


def _without_body(send: Send) -> Send:
    """A `send` that passes the response's head on and drops its body (the answer to HEAD)."""

    async def head_only(message: Message) -> None:
        if message["type"] == "http.response.body":
            if message.get("more_body"):
                return
            message = {"type": "http.response.body", "body": b""}
        await send(message)

    return head_only


class HaltingServer(uvicorn.Server):
    """uvicorn's server, calling `on_exit` (on its own thread) as soon as SIGINT or SIGTERM arrives, before the server
    waits for open requests: requests waiting on the writer then answer at once instead of past the grace period."""

    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None]) -> None:
        super().__init__(config)
        self.on_exit = on_exit

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        threading.Thread(target=self.on_exit, name="lodex-halt", daemon=True).start()  # not in the signal handler
        super().handle_exit(sig, frame)


class JsonErrorsProtocol(HttpToolsProtocol):
    """uvicorn's HTTP protocol, answering requests its parser rejects (a malformed request line, header or
    Content-Length) in the one JSON error shape instead of plain text."""

    def send_400_response(self, msg: str) -> None:
        body = json.dumps({"error": {"code": "bad_request", "message": f"{msg.rstrip('.')}: the request is not valid HTTP/1.1"}}).encode()
        head = [b"HTTP/1.1 400 Bad Request\r\n"]
        for name, value in self.server_state.default_headers:
            head += [name, b": ", value, b"\r\n"]
        head += [b"content-type: application/json\r\n", b"content-length: " + str(len(body)).encode() + b"\r\n", b"connection: close\r\n\r\n", body]
        self.transport.write(b"".join(head))
        self.transport.close()
