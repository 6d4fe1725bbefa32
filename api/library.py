"""The Python API in this process: `lodex.open(data_dir)` gives an `Index` to search and read, with the same result
types as `lodex.Client` (over HTTP) and the same answers as `lodex search --json`."""

from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from lodex.api.models import DocumentListOut, DocumentOut, IndexStatus, TextOut
from lodex.api.read_side import ReadSide
from lodex.api.request import Limits, check_extensions, check_search
from lodex.api.settings import load_settings
from lodex.search.context import MAX_WINDOW_CHARS
from lodex.search.names import Mode
from lodex.search.results import SearchFilters, SearchResponse
from lodex.store.object_store import is_remote


class Index:
    """An index opened for reading in this process (load the query encoder once, then search as often as wanted).
    Close it (or use `with`) to release it."""

    def __init__(self, data_dir: str | Path | None = None, config: str | Path | None = None, **settings: Any) -> None:
        overrides: dict[str, Any] = {name.replace("__", "."): value for name, value in settings.items()}
        if data_dir is not None:
            overrides["index.data_dir"] = str(data_dir) if is_remote(str(data_dir)) else str(Path(data_dir).expanduser().resolve())
        self.settings = load_settings(Path(config) if config else None, overrides)
        self._limits = Limits.of(self.settings)
        self._reads = ReadSide(self.settings)

    def search(self, query: str, k: int | None = None, *, path_glob: str | None = None, ext: list[str] | tuple[str, ...] | None = None,
               modified_after: datetime | float | None = None, mode: Mode | None = None,
               lang: list[str] | tuple[str, ...] | None = None) -> SearchResponse:
        """The `k` documents (default search.k) that best match `query`, each with its best passages (text, score,
        offsets, page, section); `path_glob`, `ext`, `modified_after` and `lang` (the documents' languages, e.g.
        ["zh"]) restrict them; `mode`: dense, bm25 or hybrid. Checked as the HTTP API checks a search (api.max_k,
        api.max_query_chars): a bad one raises a LodexError (BadRequest, InvalidRequest) saying what to fix."""
        search = check_search(self._limits, q=query, k=k, path=path_glob, ext=ext, modified_after=modified_after, mode=mode, lang=lang)
        return self._reads.search(search.query, search.k, search.filters, search.mode)

    def documents(self, offset: int = 0, limit: int = 50, *, path_glob: str | None = None,
                  ext: list[str] | tuple[str, ...] | None = None) -> DocumentListOut:
        """A page of the indexed documents, ordered by path."""
        check_extensions(list(ext) if ext else None)
        total, docs = self._reads.documents(offset, limit, SearchFilters(path_glob, tuple(ext or ())))
        return DocumentListOut(total=total, offset=offset, limit=limit, documents=docs, failed=[])

    def read(self, doc_id: str, start: int = 0, end: int | None = None, *, page: int | None = None,
             max_chars: int = MAX_WINDOW_CHARS) -> TextOut:
        """A window of a document's extracted text: characters `start`..`end` (offsets as in passages), or its page
        `page`; at most `max_chars` characters."""
        return self._reads.read(doc_id, start, end, page, max_chars)

    def document(self, doc_id: str) -> DocumentOut:
        """One document's record (path, title, format, size, chunks, metadata)."""
        from lodex.api.reading import document_out, document_row

        return document_out(document_row(self._reads.store, doc_id))

    def status(self) -> IndexStatus:
        """Counts, model, folder, failures and the last indexing run."""
        return self._reads.status()

    def close(self) -> None:
        """Release the index."""
        self._reads.close()

    def __enter__(self) -> "Index":
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def open(data_dir: str | Path | None = None, config: str | Path | None = None, **settings: Any) -> Index:  # noqa: A001
    """Open the index in `data_dir` (default: index.data_dir of config.toml) for searching and reading in this process;
    `settings`: overrides as section__key=value (e.g. search__mode="hybrid")."""
    return Index(data_dir, config, **settings)
