"""What a writer's store handle remembers between commits so that its upkeep grows with the change, not the index:
the document records of the last documents version (patched by each commit's rows), and the documents whose chunks
may have gone stale since its last garbage collection."""

from collections.abc import Callable, Iterable
from typing import Any

from lodex.store import lance_bridge
from lodex.store.base import DocRecord
from lodex.store.schema import DOCUMENT_COLUMNS


class KeptRecords:
    """document_records of one documents table version (a writer asks before every run, and building them for tens of
    thousands of documents takes half a second), patched by the rows each commit writes."""

    def __init__(self) -> None:
        self._records: tuple[int, dict[str, DocRecord]] | None = None

    def get(self, version: int, read_all: Callable[[], dict[str, DocRecord]]) -> dict[str, DocRecord]:
        """The records of `version` (read whole by `read_all` when not kept), in a dict of the caller's own."""
        if self._records is None or self._records[0] != version:
            self._records = (version, read_all())
        return dict(self._records[1])

    def moved(self, before: int, after: int) -> None:
        """The documents table went from version `before` to `after` with the same rows (this writer compacted it or
        indexed a column): records kept for `before` are those of `after` (re-reading them took ~0.7 s of CPU at
        41,940 documents, at the first run after each optimize)."""
        if self._records is not None and self._records[0] == before:
            self._records = (after, self._records[1])

    def patch(self, documents: Any, before: int, upserted: list[str], deleted: list[str]) -> None:
        """Bring the records kept for version `before` to the documents table's current version by what a commit just
        wrote there (the upserted rows read back by id); forget them when they were of another version."""
        records = self._records
        if records is None or records[0] != before:
            self._records = None
            return
        changed = set(upserted) | set(deleted)
        by_path = {path: record for path, record in records[1].items() if record.id not in changed}
        if upserted:
            for row in lance_bridge.select_in(documents, "id", upserted, DOCUMENT_COLUMNS).to_pylist():
                by_path[row["path"]] = DocRecord(**row)
        self._records = (documents.version, by_path)


class StaleChunks:
    """The documents whose chunks may have gone stale since the last collection: committed, deleted, or given chunks
    by a commit that may not have finished. Unknown (None) until the handle's first collection, since a crashed process
    may have left chunks of any document, and again after a collection that did not finish."""

    def __init__(self) -> None:
        self._touched: set[str] | None = None

    def note(self, doc_ids: Iterable[str]) -> None:
        """These documents' chunks may be stale by the next collection (noted before a commit writes)."""
        if self._touched is not None:
            self._touched.update(doc_ids)

    def collect(self, documents: Any, chunks: Any, delete: Callable[[list[int]], None]) -> int:
        """Hand the ids of the chunks that belong to no current document version to `delete`: among every document's
        when unknown, else among the noted documents' (a lookup by the scalar indexes, not a scan of both tables)."""
        touched, self._touched = self._touched, set()
        try:
            if touched is None:
                docs = documents.search().select(["id", "content_hash"]).limit(None).to_arrow()
                rows = chunks.search().select(["id", "document_id", "content_hash"]).limit(None).to_arrow()
            elif touched:
                docs = lance_bridge.select_in(documents, "id", sorted(touched), ["id", "content_hash"])
                rows = lance_bridge.select_in(chunks, "document_id", sorted(touched), ["id", "document_id", "content_hash"])
            else:
                return 0
            current = docs.rename_columns(["document_id", "content_hash"])
            orphans = rows.join(current, keys=["document_id", "content_hash"], join_type="left anti")["id"].to_pylist()
            delete(orphans)
            return len(orphans)
        except BaseException:
            self._touched = None  # not finished: the next collection looks at every document
            raise
