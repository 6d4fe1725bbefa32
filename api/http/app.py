"""The HTTP API and search page of `lodex serve`, built by a factory around the application object opened to serve."""

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from lodex.api.application import Application
from lodex.api.http.errors import LimitsAndAuth, install_error_handlers, is_loopback
from lodex.api.http.metrics import Metrics, Timing
from lodex.api.http.route_helpers import lodex_version
from lodex.api.http.routes_admin import router as admin_routes
from lodex.api.http.routes_documents import router as document_routes
from lodex.api.http.routes_search import router as search_routes
from lodex.api.http.server_record import Identity

PAGE = Path(__file__).parent / "static" / "index.html"


def _mcp_app(lodex: Application) -> Any:
    """The MCP server over the application (and its writer, with mcp.allow_writes), as a streamable HTTP app at /mcp,
    its sessions bounded; the SDK's own Host check is off: LimitsAndAuth applies the JSON API's."""
    from lodex.api.mcp.server import add_write_tools, build_mcp
    from lodex.api.mcp.streamable import mcp_http_app

    settings = lodex.settings
    server = build_mcp(lodex, lodex.limits, lodex_version())
    if settings.mcp.allow_writes and lodex.served.writer is not None:
        add_write_tools(server, lodex)
    return mcp_http_app(server, settings.api.max_body_kb * 1024, settings.mcp.max_sessions, settings.mcp.session_idle_s)


def _failed(lodex: Application) -> int:
    """Files that failed, as the job log says now."""
    with lodex.job_log() as jobs:
        return len(jobs.failed())


def _metrics(lodex: Application) -> Metrics:
    """The app's metrics, their gauges read from the serving application when asked."""
    serving = lodex.served
    return Metrics(
        lambda: {
            **serving.reader().counts(),
            "failed_files": _failed(lodex),
            "queue_depth": serving.queue_depth,
            "encode_tokens_per_second": serving.encode_tokens_per_s,
            "encoded_tokens": serving.encoded_tokens,
        }
    )


def _add_docs(app: FastAPI) -> None:
    """The API docs at /docs: Swagger UI from the bundled copy under /static/swagger."""
    from swagger_ui_bundle import swagger_ui_path

    app.mount("/static/swagger", StaticFiles(directory=swagger_ui_path), name="swagger")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="lodex API",
            swagger_js_url="/static/swagger/swagger-ui-bundle.js",
            swagger_css_url="/static/swagger/swagger-ui.css",
            swagger_favicon_url="/static/swagger/favicon-32x32.png",
        )


def create_app(
    lodex: Application, on_shutdown: Callable[[], None] | None = None, host: str | None = None, identity: Identity | None = None
) -> FastAPI:
    """A FastAPI app serving `lodex`, an application opened to serve (started by the caller); `on_shutdown` runs when the server stops; `host`, the
    address it is served on (default api.host): on a loopback address only loopback Host names (and
    api.allowed_hosts) are answered; `identity`, what GET /identity proves (the one `lodex serve` records in
    server.json; default: a new one)."""
    identity = identity or Identity.new()
    limits = lodex.settings.api
    mcp_app = _mcp_app(lodex)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with mcp_app.router.lifespan_context(mcp_app):  # the MCP sessions' task group
            yield
        if on_shutdown:
            await asyncio.get_running_loop().run_in_executor(None, on_shutdown)

    app = FastAPI(
        title="lodex",
        version=lodex_version(),
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
        description='Local semantic search for folders of long documents. Errors: {"error": {"code", "message"}}.',
    )
    metrics = _metrics(lodex)
    install_error_handlers(app)
    if limits.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=limits.cors_origins, allow_methods=["*"], allow_headers=["*"])
    allowed = list(limits.allowed_hosts) if is_loopback(host or limits.host) else None
    app.add_middleware(LimitsAndAuth, api_key=limits.api_key, max_body_bytes=limits.max_body_kb * 1024, allowed_hosts=allowed)
    app.add_middleware(Timing, metrics=metrics)  # outermost: rejected requests are timed too

    app.state.lodex, app.state.identity, app.state.metrics = lodex, identity, metrics
    for router in (search_routes, document_routes, admin_routes):  # their routes take these from app.state
        app.include_router(router)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> HTMLResponse:
        return HTMLResponse(PAGE.read_text(encoding="utf-8"))

    from lodex.api.http.embeddings import embeddings_router

    app.include_router(embeddings_router(lodex))
    app.router.routes.extend(mcp_app.routes)  # /mcp, behind the same key and Host checks
    _add_docs(app)
    return app
