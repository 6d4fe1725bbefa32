"""What every door reads from an index besides searches, over one store handle: documents (paged, filtered), one
document, a window of its text (by offsets or by page), and the index's status; the JSON API, the Python API and the
MCP server all answer from these."""

import json
from pathlib import Path
from typing import Any

from lodex.api.models import DocumentOut, IndexStatus, TextOut, valid_metadata
from lodex.indexer.paths import PUSHED_PREFIX
from lodex.indexer.source_text import source_text
from lodex.search.context import MAX_WINDOW_CHARS, text_window
from lodex.search.results import SearchFilters
from lodex.store.base import Store
from lodex.store.errors import ConfigError, NotFoundError
from lodex.store.job_log import JobLog
from lodex.store.schema import DOCUMENT_COLUMNS

MAX_PAGE = 500  # documents in one listing


def document_out(row: dict[str, Any]) -> DocumentOut:
    """A stored document row as the API shows it."""
    source = "api" if row["path"].startswith(PUSHED_PREFIX) else "folder"
    try:  # stored before metadata was checked at the door, a bad one must not make its document unreadable
        meta = valid_metadata(json.loads(row.get("metadata") or "{}"))
    except (ValueError, RecursionError):
        meta = {"_unreadable": "this metadata was stored before lodex checked it; push the document again"}
    return DocumentOut(
        **{k: row[k] for k in DOCUMENT_COLUMNS if k not in ("content_hash", "metadata")}, status="indexed", source=source, metadata=meta
    )


def list_documents(store: Store, offset: int = 0, limit: int = 50, filters: SearchFilters = SearchFilters()) -> tuple[int, list[DocumentOut]]:
    """(how many documents pass `filters`, the `limit` of them from `offset`), ordered by path."""
    if not 1 <= limit <= MAX_PAGE or offset < 0:
        raise ConfigError(f"limit must be between 1 and {MAX_PAGE} and offset at least 0", "ask for a smaller page")
    table = store.scan_documents().sort_by("path")
    if filters.active:
        keep = [filters.allows(path, mtime) for path, mtime in zip(table.column("path").to_pylist(), table.column("mtime").to_pylist())]
        table = table.filter(keep)
    return table.num_rows, [document_out(r) for r in table.slice(offset, limit).to_pylist()]


def document_row(store: Store, doc_id: str) -> dict[str, Any]:
    """The stored row of document `doc_id`, or NotFoundError."""
    if not (len(doc_id) == 16 and all(c in "0123456789abcdef" for c in doc_id)):
        raise NotFoundError(f"no document with id {doc_id[:40]!r}", "ids are 16 hex digits, as search results give them")
    row = store.document_row(doc_id)
    if row is None:
        raise NotFoundError(f"no document with id {doc_id!r}", "search again: it may have been deleted or re-indexed under a new id")
    return row


def page_span(store: Store, row: dict[str, Any], page: int) -> tuple[int, int]:
    """Character offsets of page `page` (PDF page, slide) of a document: from its first chunk on the page to its last."""
    chunks = store.chunks_of(row["id"], row["content_hash"], ["char_start", "char_end", "page", "page_end"]).to_pylist()
    on_page = [c for c in chunks if c["page"] is not None and c["page"] <= page <= (c["page_end"] or c["page"])]
    if not on_page:
        pages = sorted({c["page"] for c in chunks if c["page"] is not None})
        fix = (
            f"pages run from {pages[0]} to {max(c['page_end'] or c['page'] for c in chunks if c['page'] is not None)}"
            if pages
            else "this document has no pages: read it by character offsets"
        )
        raise NotFoundError(f"{row['path']} has no page {page}", fix)
    return min(c["char_start"] for c in on_page), max(c["char_end"] for c in on_page)


def read_text(
    store: Store, root: Path | None, doc_id: str, start: int = 0, end: int | None = None, page: int | None = None, max_chars: int = MAX_WINDOW_CHARS
) -> TextOut:
    """A window of document `doc_id`'s extracted text: offsets `start`..`end` (default: `max_chars` from `start`), or
    page `page`; at most `max_chars` (and MAX_WINDOW_CHARS) characters, clamped to the text."""
    if start < 0 or max_chars < 1:
        raise ConfigError(f"bad window: start {start}, max_chars {max_chars}", "give start >= 0 and max_chars >= 1")
    row = document_row(store, doc_id)
    if page is not None:
        start, end = page_span(store, row, page)
    limit = min(max_chars, MAX_WINDOW_CHARS)
    end = start + limit if end is None else min(max(start, end), start + limit)
    text, first, last = text_window(store, row, source_text(row, root), start, end)
    page, section = _where(store, row, first)
    return TextOut(id=doc_id, path=row["path"], start=first, end=last, text=text, page=page, section=section)


def _where(store: Store, row: dict[str, Any], offset: int) -> tuple[int | None, str | None]:
    """The page and section of the chunk that holds character `offset` (None where the format has none)."""
    chunks = store.chunks_of(row["id"], row["content_hash"], ["char_start", "char_end", "page", "section"]).sort_by("char_start").to_pylist()
    holding = [c for c in chunks if c["char_start"] <= offset < c["char_end"]] or chunks[-1:]
    return (holding[0]["page"], holding[0]["section"]) if holding else (None, None)


def index_status(store: Store, jobs: JobLog, model: str, dim: int, data_dir: str) -> IndexStatus:
    """Counts, model, folder, failures, last run, languages and keyword scheme of an index: what every door reports
    (`lodex status`, GET /status and /stats, MCP's status tool, `lodex.open(...).status()`)."""
    counts = store.counts()
    return IndexStatus(
        documents=counts["documents"],
        chunks=counts["chunks"],
        failed=len(jobs.failed()),
        model=model,
        dim=dim,
        data_dir=data_dir,
        root=str(jobs.root or ""),
        last_run=jobs.last_run(),
        languages=store.language_mix(),
        keywords_segmented=store.keyword_scheme.segmented,
    )
