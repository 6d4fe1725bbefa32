"""The HTTP API and search page of `lodex serve`, built by a factory around a running LodexService."""

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future
from contextlib import asynccontextmanager
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any, TypeVar

from fastapi import FastAPI, HTTPException, Query, Response
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from lodex.api.forward import CHALLENGE_PATTERN, Identity
from lodex.api.http_errors import LimitsAndAuth, install_error_handlers, is_loopback
from lodex.api.metrics import Metrics, Timing
from lodex.api.models import (DeletedOut, DocumentDetailOut, DocumentListOut, DocumentOut, ErrorOut, FailedOut, HealthOut, IdentityOut,
                        IndexStatus, PushIn, PushOut, QueuedOut, ReadyOut, RunOut, StatsOut, TextOut)
from lodex.api.read_side import ServedReads
from lodex.api.reading import MAX_PAGE, document_out, document_row, list_documents as documents_page
from lodex.api.request import MAX_GLOB_CHARS, Limits, SearchRequest, check_document_text, check_extensions, search_request
from lodex.api.service import LodexService
from lodex.indexer.paths import PUSHED_PREFIX
from lodex.indexer.pipeline import Interrupted
from lodex.search.names import Mode
from lodex.search.results import SearchFilters, SearchResponse
from lodex.store.schema import LOCATION_COLUMNS

T = TypeVar("T")
PAGE = Path(__file__).parent / "static" / "index.html"
ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorOut} for code in (400, 401, 403, 404, 409, 413, 422, 429, 503)}


def _version() -> str:
    try:
        return metadata.version("lodex")
    except metadata.PackageNotFoundError:
        return "dev"


async def writer_result(done: "Future[T]") -> T:
    """The result of a request queued on the writer; one cancelled because lodex is stopping answers 503."""
    try:  # shielded: a client that goes away does not cancel the write it asked for
        return await asyncio.shield(asyncio.wrap_future(done))
    except asyncio.CancelledError:
        if done.cancelled():
            raise Interrupted() from None  # the writer dropped it; the request itself was not cancelled
        raise


def _mcp_app(service: LodexService) -> Any:
    """The MCP server over this service's reads (and its writer, with mcp.allow_writes), as a streamable HTTP app at
    /mcp, its sessions bounded; the SDK's own Host check is off: LimitsAndAuth applies the JSON API's."""
    from lodex.api.mcp_http import mcp_http_app
    from lodex.api.mcp_server import add_write_tools, build_mcp

    settings = service.settings
    server = build_mcp(ServedReads(service), Limits.of(settings), _version())
    if settings.mcp.allow_writes and not service.read_only:
        add_write_tools(server, service)
    return mcp_http_app(server, settings.api.max_body_kb * 1024, settings.mcp.max_sessions, settings.mcp.session_idle_s)


def create_app(service: LodexService, on_shutdown: Callable[[], None] | None = None, host: str | None = None,
               identity: Identity | None = None) -> FastAPI:
    """A FastAPI app serving `service` (started by the caller); `on_shutdown` runs when the server stops; `host`, the
    address it is served on (default api.host): on a loopback address only loopback Host names (and
    api.allowed_hosts) are answered; `identity`, what GET /identity proves (the one `lodex serve` records in
    server.json; default: a new one)."""
    settings = service.settings
    identity = identity or Identity.new()
    limits = settings.api
    request_limits = Limits.of(settings)
    reads = ServedReads(service)

    mcp_app = _mcp_app(service)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with mcp_app.router.lifespan_context(mcp_app):  # the MCP sessions' task group
            yield
        if on_shutdown:
            await asyncio.get_running_loop().run_in_executor(None, on_shutdown)

    app = FastAPI(title="lodex", version=_version(), docs_url=None, redoc_url=None, lifespan=lifespan,
                  description="Local semantic search for folders of long documents. Errors: {\"error\": {\"code\", \"message\"}}.")
    metrics = Metrics(lambda: {**service.counts(), "failed_files": len(service.jobs.failed()), "queue_depth": service.queue_depth,
                               "encode_tokens_per_second": service.encode_tokens_per_s, "encoded_tokens": service.encoded_tokens})
    install_error_handlers(app)
    if limits.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=limits.cors_origins, allow_methods=["*"], allow_headers=["*"])
    allowed = list(limits.allowed_hosts) if is_loopback(host or limits.host) else None
    app.add_middleware(LimitsAndAuth, api_key=limits.api_key, max_body_bytes=limits.max_body_kb * 1024, allowed_hosts=allowed)
    app.add_middleware(Timing, metrics=metrics)  # outermost: rejected requests are timed too

    async def on_query_thread(fn, *args):
        return await asyncio.get_running_loop().run_in_executor(service.queries, fn, *args)

    async def run_search(request: SearchRequest) -> Response:
        search = request.checked(request_limits)
        response = await asyncio.wrap_future(service.search(search.query, search.k, search.filters, search.mode))
        return Response(response.to_json(), media_type="application/json")  # already the SearchResponse shape: no second validation

    @app.get("/search", response_model=SearchResponse, responses=ERRORS, tags=["search"])
    async def search_get(
        q: Annotated[str, Query(description="The query, in plain words.", max_length=100_000)],
        k: Annotated[int | None, Query(description="Documents to return.")] = None,
        path: Annotated[str | None, Query(description="Glob on the relative path.")] = None,
        ext: Annotated[list[str] | None, Query(description="File extensions (repeatable).")] = None,
        modified_after: Annotated[datetime | None, Query(description="ISO 8601 time or epoch seconds.")] = None,
        mode: Annotated[Mode | None, Query(description="Retrieval mode (default: search.mode).")] = None,
        lang: Annotated[list[str] | None, Query(description="Only documents in these languages (ISO 639-1, repeatable).")] = None,
    ) -> Response:
        """Rank documents (dense, keyword or hybrid retrieval); return each with its best passages."""
        return await run_search(search_request(q=q, k=k, path=path, ext=ext, modified_after=modified_after, mode=mode, lang=lang))

    @app.post("/search", response_model=SearchResponse, responses=ERRORS, tags=["search"])
    async def search_post(body: SearchRequest) -> Response:
        """Same as GET /search, with a JSON body."""
        return await run_search(body)

    @app.get("/documents", response_model=DocumentListOut, responses=ERRORS, tags=["documents"])
    async def list_documents(
        offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
        status: Annotated[str, Query(pattern="^(indexed|failed|all)$", description="indexed, failed or all")] = "indexed",
        path: Annotated[str | None, Query(description="Only documents whose relative path matches this glob.", max_length=MAX_GLOB_CHARS)] = None,
        ext: Annotated[list[str] | None, Query(description="Only these file extensions (repeatable).")] = None,
    ) -> DocumentListOut:
        """Indexed documents, by path, paged (and filtered by path glob and extension); and (status=failed or all)
        the files that failed."""
        check_extensions(ext)
        filters = SearchFilters(path, tuple(ext or ()))
        total, docs = await on_query_thread(lambda: reads.documents(offset, limit, filters)) if status != "failed" else (0, [])
        failed = [FailedOut(path=p, reason=f["reason"], attempts=f["attempts"]) for p, f in service.jobs.failed().items()] if status != "indexed" else []
        return DocumentListOut(total=total, offset=offset, limit=limit, documents=docs, failed=failed)

    def one_document(doc_id: str) -> dict[str, Any]:
        store = service.reader()
        return {"row": document_row(store, doc_id), "store": store}

    @app.get("/documents/{doc_id}", response_model=DocumentDetailOut, tags=["documents"],
             responses={**ERRORS, 202: {"model": PushOut, "description": "A pushed document still queued for indexing."}})
    async def get_document(doc_id: str) -> Response:
        """A document's metadata and its chunks, in order; a pushed document still queued answers 202 (status queued)."""
        queued = service.queued_push(doc_id)
        if queued is not None:
            return JSONResponse(PushOut(id=doc_id, path=queued, status="queued", chunks=0).model_dump(), 202)

        def read() -> DocumentDetailOut:
            found = one_document(doc_id)
            row, store = found["row"], found["store"]
            chunks = store.chunks_of(doc_id, row["content_hash"],
                                     ["ordinal", "char_start", "char_end", "token_count", "text", *LOCATION_COLUMNS]).sort_by("ordinal").to_pylist()
            return DocumentDetailOut(**document_out(row).model_dump(), chunks=chunks)

        return await on_query_thread(read)

    @app.get("/documents/{doc_id}/text", response_model=TextOut, responses=ERRORS, tags=["documents"])
    async def document_text(
        doc_id: str,
        start: Annotated[int, Query(ge=0, le=1 << 40, description="First character (offset in the extracted text).")] = 0,
        end: Annotated[int | None, Query(ge=0, le=1 << 40, description="Character after the last (default: start + max_chars).")] = None,
        page: Annotated[int | None, Query(ge=0, le=1 << 31, description="A page (PDF page, slide) instead of offsets.")] = None,
        max_chars: Annotated[int, Query(ge=1, le=20_000, description="The most characters to return.")] = 2000,
    ) -> TextOut:
        """A window of a document's extracted text (offsets as in passages, or a page), to read a passage in context,
        with the page and section where it starts."""
        return await on_query_thread(lambda: reads.read(doc_id, start, end, page, max_chars))

    @app.post("/documents", response_model=PushOut, status_code=202, tags=["documents"],
              responses={**ERRORS, 201: {"model": PushOut, "description": "With wait=true: the document is indexed."}})
    async def push_document(
        body: PushIn,
        wait: Annotated[bool, Query(description="Answer once the document is indexed (201) instead of once it is queued (202).")] = False,
    ) -> Response:
        """Index a text document sent by a tool, through the same write path as files; same name replaces. Answers
        once the document is queued (202; GET /documents/{id} says 202 while it waits, 200 once indexed), or with
        wait=true once it is indexed (201)."""
        check_document_text(body.text, limits.max_document_kb)
        name = body.name  # checked by PushIn: printable, relative, no '.' or '..' segment
        loop = asyncio.get_running_loop()  # kept on disk (fsync) off the event loop; queued without waiting for the writer
        doc_id, done = await loop.run_in_executor(service.writes, service.push, name, body.text, body.title, body.metadata)
        if not wait:
            return JSONResponse(PushOut(id=doc_id, path=PUSHED_PREFIX + name, status="queued", chunks=0).model_dump(), 202)
        record = await writer_result(done)
        status = "unchanged" if record.status == "unchanged" else "indexed"
        return JSONResponse(PushOut(id=doc_id, path=PUSHED_PREFIX + name, status=status, chunks=record.chunks).model_dump(), 201)

    @app.delete("/documents/{doc_id}", response_model=DeletedOut, responses=ERRORS, tags=["documents"])
    async def delete_document(doc_id: str) -> DeletedOut:
        """Delete a pushed document (files of the folder are removed by deleting the file); one still queued is
        deleted once its push is applied."""
        service.require_writer()  # a read-only replica refuses before looking the document up
        if service.queued_push(doc_id) is None:
            found = await on_query_thread(one_document, doc_id)
            if not found["row"]["path"].startswith(PUSHED_PREFIX):
                raise HTTPException(409, f"{found['row']['path']} is a file of the watched folder: delete the file instead")
        await writer_result(service.delete(doc_id))
        return DeletedOut(deleted=doc_id)

    @app.post("/reindex", response_model=QueuedOut, status_code=202, tags=["admin"],
              responses={**ERRORS, 200: {"model": RunOut, "description": "With wait=true: the run is done."}})
    async def reindex(
        wait: Annotated[bool, Query(description="Answer once the reconciliation is done (200, with its summary) instead of once it is queued (202).")] = False,
    ) -> Response:
        """Queue a reconciliation of the index with the folder now."""
        done = service.reindex()
        if not wait:
            return JSONResponse(QueuedOut(queued=True, queue_depth=service.queue_depth).model_dump(), 202)
        summary = await writer_result(done)
        return JSONResponse(RunOut(**{k: v for k, v in summary.to_dict().items() if k in RunOut.model_fields}).model_dump())

    @app.get("/health", response_model=HealthOut, tags=["admin"])
    async def health() -> HealthOut:
        """Liveness: the process answers (no auth needed)."""
        return HealthOut(status="ok")

    @app.get("/identity", response_model=IdentityOut, responses=ERRORS, tags=["admin"])
    async def prove_identity(
        challenge: Annotated[str, Query(pattern=CHALLENGE_PATTERN, description="A fresh random nonce: 32 to 128 lowercase hex digits.")],
    ) -> IdentityOut:
        """Proof that this is the server recorded in its data dir's server.json, asked (no key needed) by `lodex
        search` and `lodex status` before they send the API key: HMAC-SHA256 of the challenge under the per-start
        secret only that file (mode 0600) holds."""
        return IdentityOut(instance=identity.instance, proof=identity.proof(challenge))

    @app.get("/ready", response_model=ReadyOut, responses=ERRORS, tags=["admin"])
    async def ready() -> ReadyOut:
        """Readiness: the model is loaded and the index opens; `indexing` says whether changes (the startup
        reconciliation of the folder among them) are still being applied."""
        counts = await on_query_thread(service.counts)
        indexing, left = service.indexing()
        return ReadyOut(ready=True, model=service.encoder.model_id, documents=counts["documents"], indexing=indexing, files_left=left)

    @app.get("/stats", response_model=StatsOut, responses=ERRORS, tags=["admin"])
    async def stats() -> StatsOut:
        """Counts, queue depth, last run, model and version."""
        counts = await on_query_thread(service.counts)
        languages = await on_query_thread(service.language_mix)
        segmented = await on_query_thread(lambda: service.reader().keyword_scheme.segmented)
        return StatsOut(languages=languages, keywords_segmented=segmented, version=_version(), model=service.encoder.model_id, dim=service.encoder.dim, data_dir=str(service.data_dir),
                        root=str(service.root), failed=len(service.jobs.failed()), queue_depth=service.queue_depth,
                        encode_tokens_per_s=round(service.encode_tokens_per_s, 1), uptime_s=round(time.time() - service.started_at, 1),
                        last_run=service.jobs.last_run(), **counts)

    @app.get("/status", response_model=IndexStatus, responses=ERRORS, tags=["admin"])
    async def index_status() -> IndexStatus:
        """What the index holds: counts, model, folder, failures and the last run (what `lodex.Client.status()` gives)."""
        return await on_query_thread(reads.status)

    @app.get("/metrics", response_class=Response, responses=ERRORS, tags=["admin"])
    async def prometheus() -> Response:
        """Prometheus text: request latency histogram, documents, chunks, queue depth, encoder tokens/s."""
        body = await on_query_thread(metrics.render)
        return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> HTMLResponse:
        return HTMLResponse(PAGE.read_text(encoding="utf-8"))

    from lodex.api.embeddings import embeddings_router

    app.include_router(embeddings_router(service))
    app.router.routes.extend(mcp_app.routes)  # /mcp, behind the same key and Host checks

    from swagger_ui_bundle import swagger_ui_path

    app.mount("/static/swagger", StaticFiles(directory=swagger_ui_path), name="swagger")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url="/openapi.json", title="lodex API",
                                   swagger_js_url="/static/swagger/swagger-ui-bundle.js", swagger_css_url="/static/swagger/swagger-ui.css",
                                   swagger_favicon_url="/static/swagger/favicon-32x32.png")

    return app
