"""The durable record: Lance tables `documents` and `chunks`, with the FAISS index kept in step."""

import asyncio
import re
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lodex.store.ann_policy import AnnPolicy
from lodex.store.chunk_owners import ChunkOwners, version_keys
from lodex.store.errors import StoreError
from lodex.store.heap import release_freed
from lodex.store.origin import ORIGIN_FILE, check_origin, read_origin, write_json_atomic
from lodex.store.schema import DOCUMENT_COLUMNS, chunks_schema, documents_schema, vectors_of
from lodex.store.vector_index import VectorIndex, ivf_lists, train_stride
from lodex.store.version_marks import VersionMarks

__all__ = ["AnnPolicy", "ChunkOwners", "DocRecord", "Store", "vectors_of", "version_keys"]

_IN_BATCH = 2_000  # ids per `IN (...)` predicate
_SCAN_BATCH = 16_384  # chunk rows per batch when streaming vectors out of Lance
# Vectors the writer adds to its in-memory FAISS index between saves. A run that adds more lets the index go
# and the next save rebuilds (or catches up) the index from Lance a batch at a time, in the kind its size calls
# for: memory stays at one index of the final kind, never a float32 copy of every new vector on top of it.
HOLD_ROWS = 65_536
# Chunk rows added since the last optimize from which one is due: until then keyword search scans them one by one
# (about 20 µs per row and query at 100k chunks, against ~4 ms for a query the full-text index covers).
OPTIMIZE_ROWS = 500


@dataclass(frozen=True)
class DocRecord:
    """What the store knows of one indexed file (no vectors)."""

    id: str
    path: str
    content_hash: str
    size: int
    mtime: float
    format: str
    title: str
    chunk_count: int
    token_count: int
    indexed_at: float
    metadata: str = "{}"


def _async(table: Any) -> Any:
    """The async table behind a lancedb sync table handle (at the same checked-out version): queries through it
    skip the sync builder's schema look-ups, and several can be awaited together."""
    return table._table


def _run(coroutine: Any) -> Any:
    """Run a coroutine on lancedb's background event loop and wait for its result."""
    from lancedb.background_loop import LOOP

    return LOOP.run(coroutine)


def _start(coroutine: Any) -> "Future[Any]":
    """Start a coroutine on lancedb's background event loop; its result comes through the returned future."""
    from lancedb.background_loop import LOOP

    return asyncio.run_coroutine_threadsafe(coroutine, LOOP.loop)


def _sql_list(values: list) -> str:
    return ", ".join(f"'{v}'" if isinstance(v, str) else str(int(v)) for v in values)


def _ensure_text_index(table: Any) -> None:
    """Give the chunk text a BM25 full-text index (stemmed, stop words out) unless it has one. Rows added
    later are searched too (Lance scans what the index does not cover yet) until `optimize` folds them in."""
    from lancedb.index import FTS

    if any(ix.columns == ["text"] for ix in table.list_indices()):
        return
    try:
        table.create_index("text", config=FTS(with_position=False))
    except Exception as exc:  # another process created it at the same moment
        if not any(ix.columns == ["text"] for ix in table.list_indices()):
            raise StoreError(f"cannot build the keyword index: {exc}", "check the data directory's free space and permissions") from None


def _open_or_create(db: Any, name: str, schema: pa.Schema) -> Any:
    if name in db.list_tables().tables:
        return db.open_table(name)
    return db.create_table(name, schema=schema)


class Store:
    """Lance tables plus the FAISS index over chunk vectors, under one data directory."""

    def __init__(self, data_dir: Path, dim: int, ann: AnnPolicy | None = None) -> None:
        import lancedb

        self.data_dir = data_dir
        self.dim = dim
        self.ann = ann or AnnPolicy()
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
            self.db = lancedb.connect(str(data_dir / "lance"))
            self.documents = _open_or_create(self.db, "documents", documents_schema(dim))
            self.chunks = _open_or_create(self.db, "chunks", chunks_schema(dim))
            _ensure_text_index(self.chunks)
        except OSError as exc:
            raise StoreError(f"cannot open the data directory {data_dir}: {exc.strerror or exc}", "check the path and its permissions, or pass --data-dir") from None
        self._index: VectorIndex | None = None
        self._index_version = -1
        self._unsaved = 0  # vectors added to the in-memory index since it was loaded, built or saved
        self._owners: ChunkOwners | None = None
        self._persisted_at = float("-inf")
        self._owners_version = -1
        self._optimized_at = self.chunks.version
        self._optimized_time = time.monotonic()
        self._unoptimized_rows = 0  # chunk rows added since the last optimize (not yet in the full-text index)
        self._text_covered = (-1, False)  # (chunks version, whether the full-text index holds all its rows)
        self._marks = VersionMarks([data_dir / "lance" / f"{name}.lance" / "_versions" for name in ("documents", "chunks")])
        self._versions: tuple[int, int] | None = None  # what the last refresh answered
        self._refreshing = threading.Lock()

    @classmethod
    def open(cls, data_dir: Path, origin: dict[str, Any], create: bool = True, ann: AnnPolicy | None = None) -> "Store":
        """Open the index in data_dir for an encoder with `origin`; create it when allowed and absent."""
        stored = read_origin(data_dir)
        if stored is None:
            if not create:
                raise StoreError(f"no index in {data_dir}", "build one first with `lodex index DIR`")
            data_dir.mkdir(parents=True, exist_ok=True)
            write_json_atomic(data_dir / ORIGIN_FILE, origin)
        else:
            check_origin(stored, origin, data_dir)
        return cls(data_dir, int(origin["dim"]), ann)

    # ---- reading -------------------------------------------------------------------------
    def refresh(self) -> tuple[int, int]:
        """See the latest committed versions of both tables (written by this or another process): their
        (documents, chunks) versions, in one round trip to Lance's runtime, made only when a table's version
        directory changed since the last one (a stat each: `VersionMarks`)."""
        documents, chunks = _async(self.documents), _async(self.chunks)

        async def latest() -> tuple[int, int]:
            await asyncio.gather(documents.checkout_latest(), chunks.checkout_latest())
            return await documents.version(), await chunks.version()

        with self._refreshing:  # the versions and the marks they were read after are kept as a pair
            marks = self._marks.read()
            if self._marks.unchanged(marks) and self._versions is not None:
                return self._versions
            self._versions = _run(latest())
            self._marks.answered(marks)
            return self._versions

    def document_table(self, columns: list[str] = DOCUMENT_COLUMNS) -> pa.Table:
        """Every document's metadata (these columns; by default all but the vector)."""
        return _run(_async(self.documents).query().select(columns).to_arrow())

    def document_rows(self, doc_ids: list[str], columns: list[str]) -> pa.Table:
        """These documents' rows (any order; ids not found are left out)."""
        parts = [_run(_async(self.documents).query().where(f"id IN ({_sql_list(doc_ids[i:i + _IN_BATCH])})").select(columns).to_arrow())
                 for i in range(0, len(doc_ids), _IN_BATCH)]
        return pa.concat_tables(parts) if parts else pa.table({c: [] for c in columns})

    def document_row(self, doc_id: str) -> dict[str, Any] | None:
        """One document's metadata by id (ids are hex), or None."""
        if not re.fullmatch(r"[0-9a-f]{1,64}", doc_id):
            return None
        rows = self.documents.search().where(f"id = '{doc_id}'").select(DOCUMENT_COLUMNS).limit(None).to_arrow().to_pylist()
        return rows[0] if rows else None

    def document_records(self) -> dict[str, DocRecord]:
        """Every document, keyed by its path."""
        return {row["path"]: DocRecord(**row) for row in self.document_table().to_pylist()}

    def counts(self) -> dict[str, int]:
        """Number of documents and of current chunks."""
        docs = self.document_table()
        return {"documents": docs.num_rows, "chunks": int(pc.sum(docs["chunk_count"]).as_py() or 0)}

    def start_keyword_search(self, texts: list[str], limit: int | list[int], version: int | None = None) -> Callable[[], list[tuple[np.ndarray, np.ndarray]]]:
        """Start BM25 over chunk text and return the function that waits for its answer, so that other work
        (encoding the same queries) goes on meanwhile: per text, the Lance row ids and scores of its best `limit`
        chunks (`ChunkOwners.ranked` of this version turns them into chunk ids, best first). The queries run
        concurrently in Lance's runtime at this handle's checked-out version (`version`, when the caller has just
        read it), one round trip for all; row ids spare Lance a read of the id column (a third of its work)."""
        table = _async(self.chunks)
        covered = version is not None and self._text_index_covers(version)
        limits = [limit] * len(texts) if isinstance(limit, int) else limit

        async def one(text: str, n: int) -> pa.Table | None:
            if not text.strip():
                return None
            query = table.query().nearest_to_text(text)
            if covered:  # nothing outside the full-text index: skip planning a scan of unindexed rows (~1 ms a query)
                query = query.fast_search()
            return await query.select(["_score"]).with_row_id().limit(n).to_arrow()

        async def every() -> list[pa.Table | None]:
            return await asyncio.gather(*(one(text, n) for text, n in zip(texts, limits)))

        pending = _start(every())

        def answer() -> list[tuple[np.ndarray, np.ndarray]]:
            return [(np.zeros(0, np.uint64), np.zeros(0, np.float32)) if t is None else
                    (t["_rowid"].to_numpy(), t["_score"].to_numpy().astype(np.float32)) for t in pending.result()]

        return answer

    def _text_index_covers(self, version: int) -> bool:
        """Whether the full-text index holds every chunk row of this version (asked once per version)."""
        if self._text_covered[0] != version:
            table = _async(self.chunks)

            async def unindexed() -> int:
                name = next(ix.name for ix in await table.list_indices() if ix.columns == ["text"])
                return (await table.index_stats(name)).num_unindexed_rows

            self._text_covered = (version, _run(unindexed()) == 0)
        return self._text_covered[1]

    def chunks_where(self, predicate: str, columns: list[str]) -> pa.Table:
        """Chunk rows matching a Lance SQL predicate."""
        return _run(_async(self.chunks).query().where(predicate).select(columns).to_arrow())

    def chunks_by_id(self, ids: list[int], columns: list[str]) -> pa.Table:
        """Chunk rows for the given ids (any order)."""
        parts = [self.chunks_where(f"id IN ({_sql_list(ids[i:i + _IN_BATCH])})", columns) for i in range(0, len(ids), _IN_BATCH)]
        return pa.concat_tables(parts) if parts else pa.table({c: [] for c in columns})

    def chunks_at_rows(self, row_ids: np.ndarray, columns: list[str]) -> pa.Table:
        """Chunk rows by Lance row id at this handle's version (`ChunkOwners.row_ids`), any order: a direct read,
        no predicate to plan."""
        if not len(row_ids):
            return pa.table({c: [] for c in columns})
        return _run(_async(self.chunks).take_row_ids(np.asarray(row_ids).tolist()).select(columns).to_arrow())

    def chunks_of_documents(self, doc_ids: list[str], columns: list[str]) -> pa.Table:
        """Chunk rows (current and not yet collected) of the given documents."""
        parts = [self.chunks_where(f"document_id IN ({_sql_list(doc_ids[i:i + _IN_BATCH])})", columns) for i in range(0, len(doc_ids), _IN_BATCH)]
        return pa.concat_tables(parts) if parts else pa.table({c: [] for c in columns})

    # ---- writing (one writer at a time) --------------------------------------------------
    def commit(self, chunks: pa.Table | None, documents: list[dict[str, Any]], deleted_ids: list[str]) -> None:
        """Add chunk rows, then upsert document rows (the commit point), then drop deleted documents."""
        if chunks is not None and chunks.num_rows:
            self.chunks.add(chunks)
            self._unoptimized_rows += chunks.num_rows
            if self._index is not None:
                self._unsaved += chunks.num_rows
                if self._unsaved > HOLD_ROWS:
                    self._index = None  # a large run: rebuilt from Lance when next needed
                else:
                    self._index.add(chunks["id"].to_numpy(), vectors_of(chunks))
                    self._index_version = self.chunks.version
        if documents:
            rows = pa.Table.from_pylist(documents, schema=documents_schema(self.dim))
            self.documents.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(rows)
        for i in range(0, len(deleted_ids), _IN_BATCH):
            self.documents.delete(f"id IN ({_sql_list(deleted_ids[i:i + _IN_BATCH])})")

    def collect_garbage(self) -> int:
        """Delete chunks that belong to no current document version (replaced, deleted, or left by a crash)."""
        docs = self.documents.search().select(["id", "content_hash"]).limit(None).to_arrow()
        chunks = self.chunks.search().select(["id", "document_id", "content_hash"]).limit(None).to_arrow()
        current = docs.rename_columns(["document_id", "content_hash"])
        orphans = chunks.join(current, keys=["document_id", "content_hash"], join_type="left anti")["id"].to_pylist()
        for i in range(0, len(orphans), _IN_BATCH):
            self.chunks.delete(f"id IN ({_sql_list(orphans[i:i + _IN_BATCH])})")
        if self._index is not None:
            self._index.remove(orphans)
            self._index_version = self.chunks.version
        return len(orphans)

    def maybe_optimize(self, force: bool = False, every: int = 50, min_interval_s: float = 0.0) -> None:
        """Optimize after a full run, or once `every` commits or OPTIMIZE_ROWS new chunk rows have piled up since
        the last time (but not within `min_interval_s` of it)."""
        due = self.chunks.version - self._optimized_at >= every or self._unoptimized_rows >= OPTIMIZE_ROWS
        if force or (due and time.monotonic() - self._optimized_time >= min_interval_s):
            self.optimize()

    def optimize(self) -> None:
        """Compact both tables, keep scalar indexes on the lookup columns, and drop old versions."""
        for table, columns in ((self.chunks, ("id", "document_id")), (self.documents, ("id",))):
            if table.count_rows() == 0:
                continue
            existing = {tuple(ix.columns) for ix in table.list_indices()}
            for column in columns:
                if (column,) not in existing:
                    table.create_scalar_index(column)
            table.optimize(cleanup_older_than=timedelta(minutes=10))
        release_freed()
        self._optimized_at, self._optimized_time, self._unoptimized_rows = self.chunks.version, time.monotonic(), 0
        if self._index is not None:
            self._index_version = self.chunks.version

    # ---- the FAISS index -----------------------------------------------------------------
    def vector_index(self, version: int | None = None, chunk_ids: np.ndarray | None = None) -> VectorIndex:
        """The FAISS index for the current chunks version (`version`, when the caller has just read it): loaded
        if persisted for it, else caught up from the newest persisted one (or the one in memory) by diffing chunk
        ids with Lance (`chunk_ids`: that version's ids, when the caller has them), else built from Lance."""
        version = self.chunks.version if version is None else version
        if self._index is not None and self._index_version == version:
            return self._index
        index = VectorIndex.load(self.data_dir, version, self.dim, self.ann.nprobe)
        if index is None:
            index, self._index = self._index or VectorIndex.load_latest(self.data_dir, self.dim, self.ann.nprobe), None
            if index is None or not self._catch_up(index, chunk_ids):
                index = None  # freed before the new one is built
                index = self._build_index()
        self._index, self._index_version, self._unsaved = index, version, 0
        return index

    def _vector_batches(self, every: int = 1) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(ids, vectors) of every `every`-th chunk of this version, read by row offset a batch at a time
        (a plain scan reads far ahead: hundreds of MB at this size)."""
        n = self.chunks.count_rows()
        step = _SCAN_BATCH * every
        for start in range(0, n, step):
            table = self.chunks.take_offsets(list(range(start, min(n, start + step), every))).select(["id", "vector"]).to_arrow()
            yield table["id"].to_numpy(), vectors_of(table)

    def _catch_up(self, index: VectorIndex, lance_ids: np.ndarray | None = None) -> bool:
        """Make `index` hold exactly the chunk ids of this Lance version (`lance_ids`, read when not given);
        False (index untouched) when more than half of them are missing, for which building afresh is cheaper."""
        if lance_ids is None:
            lance_ids = self.chunks.search().select(["id"]).to_arrow()["id"].to_numpy()
        have = index.ids()
        missing = np.setdiff1d(lance_ids, have, assume_unique=True)
        if len(missing) > len(lance_ids) // 2:
            return False
        index.remove(np.setdiff1d(have, lance_ids, assume_unique=True))
        if len(missing) <= 4 * _IN_BATCH:
            if len(missing):
                table = self.chunks_by_id(missing.tolist(), ["id", "vector"])
                index.add(table["id"].to_numpy(), vectors_of(table))
            return True
        for ids, vectors in self._vector_batches():
            keep = np.isin(ids, missing, assume_unique=True)
            index.add(ids[keep], vectors[keep])
        return True

    def _build_index(self, kind: str | None = None) -> VectorIndex:
        """A new index of `kind` (default: what the policy wants for this size) over every chunk in Lance,
        streamed; an IVF index is first trained on an even sample of them (one more pass)."""
        n = self.chunks.count_rows()
        if (kind or self.ann.kind_for(n)) == "ivf":
            nlist = ivf_lists(n)
            every = train_stride(n, nlist)
            sample, filled = np.empty((len(range(0, n, every)), self.dim), np.float32), 0
            for _, vectors in self._vector_batches(every):
                sample[filled:filled + len(vectors)] = vectors
                filled += len(vectors)
            index = VectorIndex.ivf(self.dim, sample[:filled], nlist, self.ann.nprobe)
            del sample
        else:
            index = VectorIndex(self.dim, self.ann.nprobe)
        for ids, vectors in self._vector_batches():
            index.add(ids, vectors)
        release_freed()
        return index

    def chunk_owners(self, version: int | None = None) -> ChunkOwners:
        """Which document version each chunk belongs to, for the current chunks version (cached; `version` as
        for vector_index)."""
        version = self.chunks.version if version is None else version
        if self._owners is None or self._owners_version != version:
            table = self.chunks.search().select(["id", "document_id", "content_hash"]).with_row_id(True).limit(None).to_arrow()
            self._owners, self._owners_version = ChunkOwners(table), version
        return self._owners

    def persist_index(self, min_interval_s: float = 0.0) -> None:
        """Save the FAISS index as the reflection of the current chunks version; with `min_interval_s`,
        skip it when the last save is more recent (readers catch a stale file up from Lance by chunk id)."""
        if min_interval_s and time.monotonic() - self._persisted_at < min_interval_s:
            return
        index = self.vector_index()
        kind = self.ann.rebuild(index)
        if kind is not None:
            self._index = index = None  # freed before the new one is built
            self._index = index = self._build_index(kind)
            (self.data_dir / f"chunks.v{self.chunks.version}.faiss").unlink(missing_ok=True)
        if not (self.data_dir / f"chunks.v{self.chunks.version}.faiss").exists():
            index.save(self.data_dir, self.chunks.version)
        self._index_version, self._unsaved = self.chunks.version, 0
        self._persisted_at = time.monotonic()

    def track_index(self) -> None:
        """Keep the in-memory FAISS index in step with the writes that follow (writer side)."""
        self.vector_index()
