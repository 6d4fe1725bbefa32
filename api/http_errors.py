"""HTTP edges: the one JSON error shape, API-key auth, and the request-body size limit."""

import hmac

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from store.errors import ConfigError, LodexError, ModelError, StoreError

CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
         409: "conflict", 413: "too_large", 415: "unsupported_media_type", 422: "invalid_request",
         429: "too_many_requests", 500: "internal_error", 503: "unavailable"}
OPEN_PATHS = ("/health", "/", "/docs", "/openapi.json", "/static/")


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
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "request"
        return error(422, f"{where}: {first.get('msg', 'invalid')}")

    @app.exception_handler(LodexError)
    async def lodex_error(request: Request, exc: LodexError) -> JSONResponse:
        status = 503 if isinstance(exc, (StoreError, ModelError)) else 400 if isinstance(exc, ConfigError) else 409
        return error(status, exc.one_line(), exc.code)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        return error(500, f"unexpected {type(exc).__name__}; see the server log")


class LimitsAndAuth:
    """ASGI middleware: bearer-key check (when a key is set) and a cap on request bodies."""

    def __init__(self, app: ASGIApp, api_key: str, max_body_bytes: int) -> None:
        self.app = app
        self.api_key = api_key.encode()
        self.max_body = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v for k, v in scope.get("headers", [])}
        if self.api_key and not _open(scope["path"]):
            given = headers.get("authorization", b"")
            if not hmac.compare_digest(given, b"Bearer " + self.api_key):
                response = error(401, "missing or wrong API key: send 'Authorization: Bearer <key>'",
                                 headers={"WWW-Authenticate": "Bearer"})
                return await response(scope, receive, send)
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
