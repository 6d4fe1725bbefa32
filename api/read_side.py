"""The read side of an index for the doors that read (the Python API, `lodex mcp`, the CLI's local search): built
once from settings (query encoder, read-only store, searcher, job log), or over a running `lodex serve`'s service."""

import threading
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Protocol

from lodex.api.factory import build_query_encoder, build_searcher, open_store
from lodex.api.index_files import read_job_log, require_index
from lodex.api.models import DocumentOut, IndexStatus, TextOut
from lodex.api.reading import index_status, list_documents, read_text
from lodex.api.settings import Settings
from lodex.indexer.encoders.encoder import Encoder
from lodex.search.context import MAX_WINDOW_CHARS
from lodex.search.names import Mode
from lodex.search.results import SearchFilters, SearchResponse
from lodex.search.snapshot_source import SnapshotSource
from lodex.store.base import Store

if TYPE_CHECKING:
    from lodex.api.service import LodexService


class Reads(Protocol):
    """What a reading door asks of an index, whoever serves it (this process, or `lodex serve`'s query threads)."""

    def search(self, query: str, k: int, filters: SearchFilters = SearchFilters(), mode: Mode | None = None) -> SearchResponse: ...

    def documents(self, offset: int = 0, limit: int = 50, filters: SearchFilters = SearchFilters()) -> tuple[int, list[DocumentOut]]: ...

    def read(self, doc_id: str, start: int = 0, end: int | None = None, page: int | None = None,
             max_chars: int = MAX_WINDOW_CHARS) -> TextOut: ...

    def status(self) -> IndexStatus: ...


class ReadSide:
    """An index opened for reading in this process: the query encoder (the light ONNX one when it exists), a read-only
    store at the latest committed version (refreshed at each call) and a searcher; calls are serialized. The one place
    a searcher is built: `lodex serve` builds one per query thread over its own store handle and the service's shared
    snapshots (`store`, `source`), `lodex eval` one over the store it has just written (`store`)."""

    def __init__(self, settings: Settings, encoder: Encoder | None = None, store: Store | None = None,
                 source: SnapshotSource | None = None) -> None:
        manifest = require_index(settings) if store is None else None  # read once, before the encoder
        self.settings = settings
        self.encoder = encoder or build_query_encoder(settings, manifest)
        self.store = store or open_store(settings, self.encoder, settings.data_dir, create=False, manifest=manifest)
        self.searcher = build_searcher(settings, self.encoder, self.store, source)
        self._lock = threading.Lock()

    def search(self, query: str, k: int, filters: SearchFilters = SearchFilters(), mode: Mode | None = None) -> SearchResponse:
        """The top `k` documents for `query`, with their best passages."""
        with self._lock:
            return self.searcher.search(query, k, filters, mode)

    def documents(self, offset: int = 0, limit: int = 50, filters: SearchFilters = SearchFilters()) -> tuple[int, list[DocumentOut]]:
        """(documents passing `filters`, a page of them by path)."""
        with self._lock:
            self.store.refresh()
            return list_documents(self.store, offset, limit, filters)

    def read(self, doc_id: str, start: int = 0, end: int | None = None, page: int | None = None,
             max_chars: int = MAX_WINDOW_CHARS) -> TextOut:
        """A window of a document's text (offsets, or a page)."""
        with self._lock:
            self.store.refresh()
            return read_text(self.store, self._root(), doc_id, start, end, page, max_chars)

    def status(self) -> IndexStatus:
        """Counts, model, folder, failures, last run."""
        with self._lock:
            self.store.refresh()
            jobs = read_job_log(self.settings)
            try:
                return index_status(self.store, jobs, self.encoder.model_id, self.encoder.dim, str(self.settings.location))
            finally:
                jobs.close()

    def _root(self) -> Path | None:
        jobs = read_job_log(self.settings)
        try:
            return Path(jobs.root) if jobs.root else None
        finally:
            jobs.close()

    def close(self) -> None:
        """Release the store handle."""
        self.store.close()

    def __enter__(self) -> "ReadSide":
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


class ServedReads:
    """The same reads over a running `lodex serve`: searches through its query batcher, the rest on its reading
    threads' store handles (call from a worker thread, never the event loop)."""

    def __init__(self, service: "LodexService") -> None:
        self.service = service

    def search(self, query: str, k: int, filters: SearchFilters = SearchFilters(), mode: Mode | None = None) -> SearchResponse:
        return self.service.search(query, k, filters, mode).result()

    def documents(self, offset: int = 0, limit: int = 50, filters: SearchFilters = SearchFilters()) -> tuple[int, list[DocumentOut]]:
        return list_documents(self.service.reader(), offset, limit, filters)

    def read(self, doc_id: str, start: int = 0, end: int | None = None, page: int | None = None,
             max_chars: int = MAX_WINDOW_CHARS) -> TextOut:
        return read_text(self.service.reader(), self.service.root, doc_id, start, end, page, max_chars)

    def status(self) -> IndexStatus:
        encoder = self.service.encoder
        return index_status(self.service.reader(), self.service.jobs, encoder.model_id, encoder.dim, str(self.service.settings.location))
