"""The application object: one index opened in a read, write or serve role by the composition root (api/factory.py's
`open_app`), owning what that role needs — encoder, store, job log, searcher, indexer, write lock and, serving, the
writer and snapshots (api/serving.py) — and answering the one method list (`LodexAPI`) for every door."""

import json
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar

from lodex.api.index_files import read_job_log
from lodex.api.models import DeletedOut, DocumentListOut, DocumentOut, IndexStatus, PushOut, RunOut, TextOut, valid_name
from lodex.api.reading import document_out, document_row, index_status, list_documents, read_text
from lodex.api.request import Limits, Search, check_document_text, check_extensions, check_search
from lodex.api.serving import Serving
from lodex.api.settings import Settings
from lodex.encoders.encoder import Encoder
from lodex.indexer.identity import document_id
from lodex.indexer.paths import PUSHED_PREFIX
from lodex.indexer.pipeline import Indexer
from lodex.indexer.run_state import RunSummary
from lodex.search.context import MAX_WINDOW_CHARS
from lodex.search.names import Mode
from lodex.search.results import SearchFilters, SearchResponse
from lodex.search.searcher import Searcher
from lodex.store.base import Store
from lodex.store.errors import ConfigError, LodexError, ReadOnlyError
from lodex.store.job_log import FileRecord, JobLog
from lodex.store.write_lock import WriteLock

Role = Literal["read", "write", "serve"]
T = TypeVar("T")


class FolderDocumentError(LodexError):
    """A delete asked of a file of the watched folder: only pushed documents are deleted through lodex."""

    code = "conflict"


class Application:
    """An index opened in one role: "read" (query encoder, read-only store, searcher; `lodex.open`, `lodex search`,
    `lodex mcp`), "write" (write lock, job log, encoder, store, indexer; `lodex index`, `retry`, `watch`, `eval`) or
    "serve" (the write side and `serving`, or a read-only replica's reads; `lodex serve`). Reads by other threads than
    the serve role's are serialized; closing it releases what it holds (the lock last)."""

    def __init__(
        self,
        settings: Settings,
        role: Role,
        encoder: Encoder,
        store: Store | None,
        jobs: JobLog | None,
        root: Path | None,
        searcher: Callable[[], Searcher],
        indexer: Indexer | None = None,
        lock: WriteLock | None = None,
    ) -> None:
        self.settings, self.role, self.encoder, self.store, self.jobs, self.root = settings, role, encoder, store, jobs, root
        self.indexer, self.lock = indexer, lock
        self.serving: Serving | None = None
        self.limits = Limits.of(settings)
        self._make_searcher, self._searcher = searcher, None  # type: Callable[[], Searcher], Searcher | None
        self._lock = threading.Lock()
        self._closed = False

    def serve(self, serving: "Serving") -> "Application":
        """Take the serve role's pieces (the composition root builds them over this object's write side)."""
        self.serving = serving
        return self

    @property
    def searcher(self) -> Searcher:
        """The searcher of this process's reads (built on first use; the serve role's query threads have their own)."""
        if self._searcher is None:
            self._searcher = self._make_searcher()
        return self._searcher

    @property
    def served(self) -> Serving:
        """The serve role's pieces (an AssertionError in another role: only `lodex serve`'s doors ask)."""
        assert self.serving is not None, "the application was not opened to serve"
        return self.serving

    # ---- reads -----------------------------------------------------------------------------
    def search(
        self,
        query: str,
        k: int | None = None,
        *,
        path_glob: str | None = None,
        ext: list[str] | tuple[str, ...] | None = None,
        modified_after: datetime | float | str | None = None,
        mode: Mode | None = None,
        lang: list[str] | tuple[str, ...] | None = None,
    ) -> SearchResponse:
        """See LodexAPI.search."""
        return self.run_search(
            check_search(self.limits, q=query, k=k, path_glob=path_glob, ext=ext, modified_after=modified_after, mode=mode, lang=lang)
        )

    def run_search(self, search: Search) -> SearchResponse:
        """A checked search: through the serve role's query batcher, else this process's searcher."""
        if self.serving is not None:
            return self.serving.search(search.query, search.k, search.filters, search.mode).result()
        with self._lock:
            return self.searcher.search(search.query, search.k, search.filters, search.mode)

    def documents(
        self, offset: int = 0, limit: int = 50, *, path_glob: str | None = None, ext: list[str] | tuple[str, ...] | None = None
    ) -> DocumentListOut:
        """See LodexAPI.documents."""
        check_extensions(list(ext) if ext else None)
        total, docs = self.list_documents(offset, limit, SearchFilters(path_glob, tuple(ext or ())))
        return DocumentListOut(total=total, offset=offset, limit=limit, documents=docs, failed=[])

    def list_documents(self, offset: int = 0, limit: int = 50, filters: SearchFilters = SearchFilters()) -> tuple[int, list[DocumentOut]]:
        """(documents passing `filters`, a page of them by path)."""
        with self.reading() as store:
            return list_documents(store, offset, limit, filters)

    def document(self, doc_id: str) -> DocumentOut:
        """See LodexAPI.document."""
        with self.reading() as store:
            return document_out(document_row(store, doc_id))

    def read(self, doc_id: str, start: int = 0, end: int | None = None, *, page: int | None = None, max_chars: int = MAX_WINDOW_CHARS) -> TextOut:
        """See LodexAPI.read."""
        with self.reading() as store:
            return read_text(store, self._root(), doc_id, start, end, page, max_chars)

    def status(self) -> IndexStatus:
        """See LodexAPI.status."""
        with self.reading() as store, self.job_log() as jobs:
            return index_status(store, jobs, self.encoder.model_id, self.encoder.dim, str(self.settings.location))

    @contextmanager
    def reading(self) -> Iterator[Store]:
        """A store handle at the latest committed version for this thread's reads: the serve role's per-thread one,
        else this process's (refreshed when it reads an index another process writes), held for the reads."""
        if self.serving is not None:
            yield self.serving.reader()
            return
        assert self.store is not None
        with self._lock:
            if self.role == "read":
                self.store.refresh()
            yield self.store

    @contextmanager
    def job_log(self) -> Iterator[JobLog]:
        """The index's job log: the one this object holds, else the configured index's, read anew."""
        if self.jobs is not None:
            yield self.jobs
            return
        jobs = read_job_log(self.settings)
        try:
            yield jobs
        finally:
            jobs.close()

    def _root(self) -> Path | None:
        if self.root is not None:
            return self.root
        with self.job_log() as jobs:
            return Path(jobs.root) if jobs.root else None

    # ---- writes ----------------------------------------------------------------------------
    def push(self, name: str, text: str, *, title: str = "", metadata: dict[str, Any] | None = None) -> PushOut:
        """See LodexAPI.push."""
        doc_id, done = self.queue_push(name, text, title, metadata or {})
        record = done.result()
        status = "unchanged" if record.status == "unchanged" else "indexed"
        return PushOut(id=doc_id, path=PUSHED_PREFIX + pushed_name(name), status=status, chunks=record.chunks)

    def queue_push(self, name: str, text: str, title: str = "", metadata: dict[str, Any] | None = None) -> "tuple[str, Future[FileRecord]]":
        """Check a pushed document (name, size) and hand it to the writer without waiting: its id and the future of its
        record. Serving, it is kept on disk first (call it off the event loop)."""
        self._writable()
        clean = pushed_name(name)
        check_document_text(text, self.settings.api.max_document_kb)
        if self.serving is not None:
            return self.serving.require_pushes().push(clean, text, title, metadata or {})
        indexer = self._indexer()
        record = _now(lambda: indexer.index_text(clean, text, title, json.dumps(metadata or {}, sort_keys=True)))
        return document_id(PUSHED_PREFIX + clean), record

    def delete(self, doc_id: str) -> DeletedOut:
        """See LodexAPI.delete."""
        self.queue_delete(doc_id).result()
        return DeletedOut(deleted=doc_id)

    def queue_delete(self, doc_id: str) -> "Future[int]":
        """Delete a pushed document through the writer without waiting (after any push of it queued before); the future
        gives how many documents existed. NotFoundError for no such document, FolderDocumentError for a folder's file."""
        self._writable()
        if self.queued_push(doc_id) is None:
            path = self.document(doc_id).path
            if not path.startswith(PUSHED_PREFIX):
                raise FolderDocumentError(f"{path} is a file of the watched folder", "delete the file instead")
        if self.serving is not None:
            return self.serving.delete(doc_id)
        indexer = self._indexer()
        return _now(lambda: indexer.delete_documents([doc_id]))

    def queued_push(self, doc_id: str) -> str | None:
        """The path of a pushed document still waiting for the writer, or None."""
        return self.serving.queued_push(doc_id) if self.serving is not None else None

    def reindex(self) -> RunOut:
        """See LodexAPI.reindex."""
        summary = self.queue_reindex().result()
        return RunOut(**{k: v for k, v in summary.to_dict().items() if k in RunOut.model_fields})

    def queue_reindex(self) -> "Future[RunSummary]":
        """A reconciliation with the folder (serving: queued, joining one queued already); its future gives the run's summary."""
        self._writable()
        if self.serving is not None:
            return self.serving.reindex()
        indexer, root = self._indexer(), self.root
        assert root is not None
        return _now(lambda: indexer.run(root))

    def _writable(self) -> None:
        """ReadOnlyError unless this object writes the index (a replica's serving says why in its own words)."""
        if self.serving is not None:
            self.serving.require_door()
        elif self.indexer is None:
            raise ReadOnlyError(
                f"the index in {self.settings.location} is open for reading in this process",
                "push, delete and reindex through `lodex serve` (lodex.Client) or the `lodex index` command",
            )

    def _indexer(self) -> Indexer:
        assert self.indexer is not None
        return self.indexer

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> "Application":
        """Start serving: the writer (and the watcher, which queues the startup reconciliation), then kept pushes."""
        if self.serving is not None:
            self.serving.start()
        return self

    def halt(self) -> None:
        """Begin stopping (see Serving.halt)."""
        if self.serving is not None:
            self.serving.halt()

    def close(self) -> None:
        """Stop serving (applying what is queued), close the store and the job log, release the write lock (once)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self.serving is not None:
                self.serving.close()
        finally:
            self.release()

    def release(self) -> None:
        """Close the store and the job log and release the write lock (what the composition root opened)."""
        try:
            if self.store is not None:
                self.store.close()
            if self.jobs is not None:
                self.jobs.close()
        finally:
            if self.lock is not None:
                self.lock.release()

    def __enter__(self) -> "Application":
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def pushed_name(name: str) -> str:
    """A pushed document's name as it is stored (after @api/), or ConfigError saying what a name may be."""
    try:
        return valid_name(name)
    except ValueError as exc:
        raise ConfigError(str(exc), "pick a printable relative name without '.' or '..' segments") from exc


def _now(call: Callable[[], T]) -> "Future[T]":
    """`call` run now, on this thread, as a future (the write role's writes, which no writer thread queues)."""
    done: Future[T] = Future()
    try:
        done.set_result(call())
    except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on it, as a writer thread would
        done.set_exception(exc)
    return done
