"""The plain reads of the Lance tables (documents by id, chunk rows by document, id, row id or after a row id): a
mixin of `LanceStore`, which opens the two tables it reads (`documents`, `chunks`)."""

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lodex.store import lance_bridge
from lodex.store.chunk_owners import ChunkOwners
from lodex.store.lance_sql import equals, is_hex, version_of
from lodex.store.schema import DOCUMENT_COLUMNS

# Row ids read at once after a snapshot's last one, looking for the rows a later version added (`chunk_rows_following`).
FOLLOWING_WINDOW = 1024


class LanceTableReads:
    """Reads of the `documents` and `chunks` tables at the handle's checked-out version; the owning store sets
    `documents`, `chunks`, `_owners`, `_owners_version` and `_stable_ids`."""

    documents: Any
    chunks: Any
    _owners: ChunkOwners | None
    _owners_version: int
    _stable_ids: bool

    def scan_documents(self, columns: list[str] = DOCUMENT_COLUMNS) -> pa.Table:
        """Every document's metadata (these columns; by default all but the vector)."""
        return lance_bridge.run(lance_bridge.async_of(self.documents).query().select(columns).to_arrow())

    def document_rows(self, doc_ids: list[str], columns: list[str]) -> pa.Table:
        """These documents' rows (any order; ids not found are left out)."""
        return lance_bridge.select_in(self.documents, "id", doc_ids, columns)

    def document_row(self, doc_id: str) -> dict[str, Any] | None:
        """One document's metadata by id (ids are hex), or None."""
        if not is_hex(doc_id):
            return None
        rows = self.documents.search().where(equals("id", doc_id)).select(DOCUMENT_COLUMNS).limit(None).to_arrow().to_pylist()
        return rows[0] if rows else None

    def chunks_of(self, doc_id: str, content_hash: str, columns: list[str]) -> pa.Table:
        """The chunk rows of one document version (any order)."""
        return lance_bridge.select(self.chunks, version_of(doc_id, content_hash), columns)

    def chunk_batches_of(self, doc_id: str, content_hash: str, columns: list[str], batch_rows: int) -> Iterator[pa.RecordBatch]:
        """The chunk rows of one document version, streamed in batches of up to `batch_rows` (read as they are
        asked for)."""
        yield from self.chunks.search().where(version_of(doc_id, content_hash)).select(columns).to_batches(batch_rows)

    def chunks_by_id(self, ids: list[int], columns: list[str]) -> pa.Table:
        """Chunk rows for the given ids (any order)."""
        return lance_bridge.select_in(self.chunks, "id", ids, columns)

    def chunks_at_rows(self, row_ids: np.ndarray, columns: list[str]) -> pa.Table:
        """Chunk rows by Lance row id at this handle's version (`ChunkOwners.row_ids`), any order: a direct read,
        no predicate to plan."""
        if not len(row_ids):
            return pa.table({c: [] for c in columns})
        return lance_bridge.run(lance_bridge.async_of(self.chunks).take_row_ids(np.asarray(row_ids).tolist()).select(columns).to_arrow())

    def chunks_of_documents(self, doc_ids: list[str], columns: list[str]) -> pa.Table:
        """Chunk rows (current and not yet collected) of the given documents."""
        return lance_bridge.select_in(self.chunks, "document_id", doc_ids, columns)

    def chunk_owners(self, version: int | None = None) -> ChunkOwners:
        """Which document version each chunk belongs to, for the current chunks version (cached; `version` as
        for vector_index)."""
        version = self.chunks.version if version is None else version
        if self._owners is None or self._owners_version != version:
            table = self.chunks.search().select(["id", "document_id", "content_hash"]).with_row_id(True).limit(None).to_arrow()
            self._owners, self._owners_version = ChunkOwners(table), version
        return self._owners

    def chunk_rows_after(self, row_id: int, columns: list[str]) -> pa.Table:
        """These columns and `_rowid` of the chunk rows after this Lance row id, at the refreshed version: a later
        version's new rows all come after the rows of an earlier one (fragments and stable row ids only grow)."""
        query = lance_bridge.async_of(self.chunks).query()
        if row_id >= 0:
            query = query.where(f"_rowid > {int(row_id)}")
        return lance_bridge.run(query.select(columns).with_row_id().to_arrow())

    def chunk_rows_following(self, row_id: int, columns: list[str], at_least: int = 0) -> pa.Table | None:
        """These columns and `_rowid` of the chunk rows whose row ids follow this one, by direct reads (no scan), in
        row id order; None for a table without stable row ids (its new rows are not numbered on from the last). A
        table with them numbers new rows on from the last row id: windows of the ids after it are read until one
        holds none (the first `at_least` ids and more). Rows past a run of missing ids wider than the window so far
        (rows added and deleted again since) are not found: a caller that counts rows falls back to `chunk_rows_after`."""
        table = lance_bridge.async_of(self.chunks)
        if row_id < 0 or not self._stable_row_ids(row_id):
            return None
        parts, low, size = [], int(row_id) + 1, max(FOLLOWING_WINDOW, 2 * int(at_least))
        while True:
            got = lance_bridge.run(table.take_row_ids(list(range(low, low + size))).select(columns).with_row_id().to_arrow())
            if not got.num_rows:
                break
            parts.append(got)
            low, size = low + size, size * 2
        if not parts:
            return got
        rows = pa.concat_tables(parts)
        return rows.take(pc.sort_indices(rows["_rowid"]))

    def _stable_row_ids(self, row_id: int) -> bool:
        """Whether the chunks table has stable row ids, seen once for good: a row's id is not its address (fragment
        and offset) there, once a table has more than one fragment; elsewhere they are the same (no answer yet)."""
        if not self._stable_ids:
            take = lance_bridge.async_of(self.chunks).take_row_ids([int(row_id)]).select(["_rowaddr"]).with_row_id()
            got = lance_bridge.run(take.to_arrow())
            self._stable_ids = bool(got.num_rows) and got["_rowaddr"][0].as_py() != got["_rowid"][0].as_py()
        return self._stable_ids

    def chunk_row_ids(self) -> np.ndarray:
        """Every chunk's Lance row id at the refreshed version (one column read)."""
        return lance_bridge.row_ids(lance_bridge.run(lance_bridge.async_of(self.chunks).query().select([]).with_row_id().to_arrow()))

    def existing_chunk_rows(self, row_ids: np.ndarray) -> np.ndarray:
        """Which of these Lance row ids the refreshed version still has (a direct read of those rows)."""
        if not len(row_ids):
            return np.zeros(0, np.uint64)
        take = lance_bridge.async_of(self.chunks).take_row_ids(np.asarray(row_ids).tolist())
        return lance_bridge.row_ids(lance_bridge.run(take.select([]).with_row_id().to_arrow()))

    def chunk_count(self) -> int:
        """Chunk rows at the refreshed version."""
        return int(self.chunks.count_rows())
