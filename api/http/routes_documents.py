"""The /documents routes: list, one document with its chunks, a window of its text, push a text, delete a pushed one."""

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query, Response
from fastapi.responses import JSONResponse

from lodex.api.http.route_helpers import ERRORS, App, Served, on_query_thread, writer_result
from lodex.api.models import DeletedOut, DocumentDetailOut, DocumentListOut, FailedOut, PushIn, PushOut, TextOut
from lodex.api.reading import MAX_PAGE, document_out, document_row
from lodex.api.request import MAX_GLOB_CHARS, check_extensions
from lodex.indexer.paths import PUSHED_PREFIX
from lodex.search.results import SearchFilters
from lodex.store.schema import LOCATION_COLUMNS

router = APIRouter(tags=["documents"])


@router.get("/documents", response_model=DocumentListOut, responses=ERRORS)
async def list_documents(
    app: App,
    serving: Served,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    status: Annotated[str, Query(pattern="^(indexed|failed|all)$", description="indexed, failed or all")] = "indexed",
    path_glob: Annotated[str | None, Query(description="Only documents whose relative path matches this glob.", max_length=MAX_GLOB_CHARS)] = None,
    path: Annotated[str | None, Query(description="path_glob's former name.", max_length=MAX_GLOB_CHARS, deprecated=True)] = None,
    ext: Annotated[list[str] | None, Query(description="Only these file extensions (repeatable).")] = None,
) -> DocumentListOut:
    """Indexed documents, by path, paged (and filtered by path glob and extension); and (status=failed or all)
    the files that failed."""
    check_extensions(ext)
    filters = SearchFilters(path if path_glob is None else path_glob, tuple(ext or ()))
    total, docs = await on_query_thread(serving, lambda: app.list_documents(offset, limit, filters)) if status != "failed" else (0, [])
    with app.job_log() as jobs:
        failed = [FailedOut(path=p, reason=f["reason"], attempts=f["attempts"]) for p, f in jobs.failed().items()] if status != "indexed" else []
    return DocumentListOut(total=total, offset=offset, limit=limit, documents=docs, failed=failed)


@router.get(
    "/documents/{doc_id}",
    response_model=DocumentDetailOut,
    responses={**ERRORS, 202: {"model": PushOut, "description": "A pushed document still queued for indexing."}},
)
async def get_document(app: App, serving: Served, doc_id: str) -> Response | DocumentDetailOut:
    """A document's metadata and its chunks, in order; a pushed document still queued answers 202 (status queued)."""
    queued = app.queued_push(doc_id)
    if queued is not None:
        return JSONResponse(PushOut(id=doc_id, path=queued, status="queued", chunks=0).model_dump(), 202)

    def read() -> DocumentDetailOut:
        store = serving.reader()
        row = document_row(store, doc_id)
        chunks = (
            store.chunks_of(doc_id, row["content_hash"], ["ordinal", "char_start", "char_end", "token_count", "text", *LOCATION_COLUMNS])
            .sort_by("ordinal")
            .to_pylist()
        )
        return DocumentDetailOut(**document_out(row).model_dump(), chunks=chunks)

    return await on_query_thread(serving, read)


@router.get("/documents/{doc_id}/text", response_model=TextOut, responses=ERRORS)
async def document_text(
    app: App,
    serving: Served,
    doc_id: str,
    start: Annotated[int, Query(ge=0, le=1 << 40, description="First character (offset in the extracted text).")] = 0,
    end: Annotated[int | None, Query(ge=0, le=1 << 40, description="Character after the last (default: start + max_chars).")] = None,
    page: Annotated[int | None, Query(ge=0, le=1 << 31, description="A page (PDF page, slide) instead of offsets.")] = None,
    max_chars: Annotated[int, Query(ge=1, le=20_000, description="The most characters to return.")] = 2000,
) -> TextOut:
    """A window of a document's extracted text (offsets as in passages, or a page), to read a passage in context,
    with the page and section where it starts."""
    return await on_query_thread(serving, lambda: app.read(doc_id, start, end, page=page, max_chars=max_chars))


@router.post(
    "/documents",
    response_model=PushOut,
    status_code=202,
    responses={**ERRORS, 201: {"model": PushOut, "description": "With wait=true: the document is indexed."}},
)
async def push_document(
    app: App,
    serving: Served,
    body: PushIn,
    wait: Annotated[bool, Query(description="Answer once the document is indexed (201) instead of once it is queued (202).")] = False,
) -> Response:
    """Index a text document sent by a tool, through the same write path as files; same name replaces. Answers
    once the document is queued (202; GET /documents/{id} says 202 while it waits, 200 once indexed), or with
    wait=true once it is indexed (201)."""
    name = body.name  # checked by PushIn: printable, relative, no '.' or '..' segment
    loop = asyncio.get_running_loop()  # kept on disk (fsync) off the event loop; queued without waiting for the writer
    doc_id, done = await loop.run_in_executor(serving.writes, app.queue_push, name, body.text, body.title, body.metadata)
    if not wait:
        return JSONResponse(PushOut(id=doc_id, path=PUSHED_PREFIX + name, status="queued", chunks=0).model_dump(), 202)
    record = await writer_result(done)
    status = "unchanged" if record.status == "unchanged" else "indexed"
    return JSONResponse(PushOut(id=doc_id, path=PUSHED_PREFIX + name, status=status, chunks=record.chunks).model_dump(), 201)


@router.delete("/documents/{doc_id}", response_model=DeletedOut, responses=ERRORS)
async def delete_document(app: App, serving: Served, doc_id: str) -> DeletedOut:
    """Delete a pushed document (files of the folder are removed by deleting the file; 409); one still queued is
    deleted once its push is applied."""
    serving.require_door()  # a read-only replica refuses before looking the document up
    await writer_result(await on_query_thread(serving, app.queue_delete, doc_id))
    return DeletedOut(deleted=doc_id)
