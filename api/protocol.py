"""The one method list of lodex (`LodexAPI`): what every door asks of an index — the in-process `Application` behind
`lodex.open`, the CLI, the HTTP routes and the MCP tools, and `lodex.Client` over HTTP — with one set of parameter
names. mypy checks that each implementation satisfies it (api/protocol_check.py)."""

from datetime import datetime
from typing import Any, Protocol

from lodex.api.models import DeletedOut, DocumentListOut, DocumentOut, IndexStatus, PushOut, RunOut, TextOut
from lodex.search.context import MAX_WINDOW_CHARS
from lodex.search.names import Mode
from lodex.search.results import SearchResponse


class LodexAPI(Protocol):
    """An index to search, read and write, wherever it is served."""

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
        """The `k` documents (default search.k) that best match `query`, each with its best passages; `path_glob`,
        `ext`, `modified_after` (a datetime, epoch seconds or ISO 8601 text) and `lang` restrict them; `mode`: dense, bm25 or hybrid. Checked as every door checks
        a search (api.max_k, api.max_query_chars): a bad one raises a LodexError saying what to fix."""
        ...

    def documents(
        self, offset: int = 0, limit: int = 50, *, path_glob: str | None = None, ext: list[str] | tuple[str, ...] | None = None
    ) -> DocumentListOut:
        """A page of the indexed documents, ordered by path."""
        ...

    def document(self, doc_id: str) -> DocumentOut:
        """One document's record (path, title, format, size, chunks, metadata)."""
        ...

    def read(self, doc_id: str, start: int = 0, end: int | None = None, *, page: int | None = None, max_chars: int = MAX_WINDOW_CHARS) -> TextOut:
        """A window of a document's extracted text: characters `start`..`end` (offsets as in passages), or its page
        `page`; at most `max_chars` characters."""
        ...

    def status(self) -> IndexStatus:
        """Counts, model, folder, failures and the last indexing run."""
        ...

    def push(self, name: str, text: str, *, title: str = "", metadata: dict[str, Any] | None = None) -> PushOut:
        """Add or replace the text document `name` (stored as @api/<name>), through the index's one writer; answers
        once it is indexed. ReadOnlyError where the index is open for reading only."""
        ...

    def delete(self, doc_id: str) -> DeletedOut:
        """Delete a pushed document (a file of the watched folder is removed by deleting the file)."""
        ...

    def reindex(self) -> RunOut:
        """Reconcile the index with its folder now; answers with the run's summary."""
        ...

    def close(self) -> None:
        """Release what the index holds."""
        ...
