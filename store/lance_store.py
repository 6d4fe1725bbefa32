"""The Lance implementation of the store: tables `documents` and `chunks` (with a BM25 index on chunk text) under
one data directory (or on object storage, with a local cache dir), the FAISS index kept in step (`faiss_lifecycle`),
and when compaction is due."""

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from lodex.store import base, lance_bridge
from lodex.store.ann_policy import AnnPolicy
from lodex.store.base import DocRecord
from lodex.store.chunk_owners import ChunkOwners, version_keys
from lodex.store.compactor import Compactor
from lodex.store.errors import StoreError
from lodex.store.faiss_lifecycle import FaissLifecycle
from lodex.store.heap import release_freed
from lodex.store.keyword_delta import KeywordDelta
from lodex.store.lance_commits import LanceCommits
from lodex.store.lance_keywords import LanceKeywordSearch
from lodex.store.lance_reads import LanceTableReads
from lodex.store.lance_sql import in_lists
from lodex.store.lancedb_import import import_lancedb
from lodex.store.manifest import IndexManifest
from lodex.store.object_store import ACCESS_FIX, ObjectStore
from lodex.store.origin import settle_origin
from lodex.store.schema import chunks_schema, documents_schema, vectors_of
from lodex.store.vector_index import VectorIndex
from lodex.store.version_marks import IntervalMarks, VersionMarks
from lodex.store.writer_memory import KeptRecords, StaleChunks

__all__ = ["AnnPolicy", "ChunkOwners", "DocRecord", "LanceStore", "vectors_of", "version_keys"]

# Chunk rows added since the last optimize from which one is due: until then the full-text index lacks them and lodex
# scores them itself beside it (`keyword_delta`, up to its MAX_ROWS; above, Lance scans them at ~17 µs a row and query).
OPTIMIZE_ROWS = 500


class LanceStore(LanceCommits, LanceTableReads, base.Store):
    """Lance tables plus the FAISS index over chunk vectors and keyword search of chunk text (`keywords`), under one
    data directory; with `remote`, the tables, the origin record and the persisted FAISS index live on object storage
    and data_dir is their local cache."""

    def __init__(
        self,
        data_dir: Path,
        dim: int,
        ann: AnnPolicy | None = None,
        remote: ObjectStore | None = None,
        persist_every_s: float = base.PERSIST_EVERY_S,
        optimize_nice: int | None = None,
        manifest: IndexManifest | None = None,
    ) -> None:
        """`persist_every_s`: small updates save the vector index at most this often; `optimize_nice` (a serving writer's):
        optimize large tables in a helper process at this CPU priority; `manifest`: the index's record (None: read here)."""
        lancedb = import_lancedb()
        self.data_dir, self.dim, self.remote, self.persist_every_s = data_dir, dim, remote, persist_every_s
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
            uri, options = (remote.lance_uri, remote.options) if remote is not None else (str(data_dir / "lance"), None)
            self.db = lancedb.connect(uri, storage_options=options)
            self._compactor = Compactor(options, optimize_nice)  # optimizes here, or in a helper process at that priority
            self.documents = lance_bridge.open_or_create(self.db, "documents", documents_schema(dim))
            self.chunks = lance_bridge.open_or_create(self.db, "chunks", chunks_schema(dim))
            self.manifest = manifest if manifest is not None else IndexManifest.read(data_dir)
            self.keyword_scheme = lance_bridge.ensure_text_index(self.chunks, self.manifest.terms_version)
            self.keywords = LanceKeywordSearch(self.chunks, self.keyword_scheme)
        except OSError as exc:
            raise StoreError(
                f"cannot open the data directory {data_dir}: {exc.strerror or exc}", "check the path and its permissions, or pass --data-dir"
            ) from exc
        except (RuntimeError, ValueError) as exc:
            if remote is None:
                raise
            detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            raise StoreError(f"cannot open the index in {remote}: {detail}", ACCESS_FIX) from exc
        self._faiss = FaissLifecycle(data_dir, dim, self.chunks, ann or AnnPolicy(), remote)
        self._owners: ChunkOwners | None = None
        self._owners_version = -1
        self._optimized_at = self.chunks.version
        self._optimized_time = time.monotonic()
        self._unoptimized_rows = 0  # chunk rows added since the last optimize (not yet in the full-text index)
        self._stable_ids = False  # whether the chunks table is seen to have stable row ids (`_stable_row_ids`)
        self._marks = (
            IntervalMarks(remote.uri, remote.refresh_s)
            if remote is not None
            else VersionMarks([data_dir / "lance" / f"{name}.lance" / "_versions" for name in ("documents", "chunks")])
        )
        self._versions: tuple[int, int] | None = None  # what the last refresh answered
        self._refreshing = threading.Lock()
        self._stale = StaleChunks()
        self._records = KeptRecords()

    @property
    def ann(self) -> AnnPolicy:
        """Which FAISS index the writer keeps (a new policy applies from the next save)."""
        return self._faiss.ann

    @ann.setter
    def ann(self, policy: AnnPolicy) -> None:
        self._faiss.ann = policy

    @classmethod
    def open(
        cls,
        data_dir: Path,
        origin: dict[str, Any],
        create: bool = True,
        ann: AnnPolicy | None = None,
        remote: ObjectStore | None = None,
        persist_every_s: float = base.PERSIST_EVERY_S,
        optimize_nice: int | None = None,
        manifest: IndexManifest | None = None,
    ) -> "LanceStore":
        """Open the index in data_dir (or in `remote`, data_dir its cache; `manifest`: its record, None: read there) for an
        encoder with `origin`; create it when allowed and absent (`settle_origin`: the record as settled is `manifest`)."""
        settled = settle_origin(data_dir, origin, create, remote, manifest)
        return cls(data_dir, int(origin["dim"]), ann, remote, persist_every_s, optimize_nice, settled)

    # ---- reading -------------------------------------------------------------------------
    def refresh(self) -> tuple[int, int]:
        """See the latest committed versions of both tables (written by this or another process): their
        (documents, chunks) versions, in one round trip to Lance's runtime, made only when a table's version
        directory changed since the last one (a stat each: `VersionMarks`)."""
        documents, chunks = lance_bridge.async_of(self.documents), lance_bridge.async_of(self.chunks)

        async def latest() -> tuple[int, int]:
            await asyncio.gather(documents.checkout_latest(), chunks.checkout_latest())
            return await documents.version(), await chunks.version()

        with self._refreshing:  # the versions and the marks they were read after are kept as a pair
            marks = self._marks.read()
            if self._marks.unchanged(marks) and self._versions is not None:
                return self._versions
            self._versions = lance_bridge.run(latest())
            self._marks.answered(marks)
            return self._versions

    def pin(self, versions: tuple[int, int]) -> None:
        """Read these (documents, chunks) versions (a snapshot prepared by another handle) until the next pin or refresh."""
        if self._versions == versions:
            return
        documents, chunks = lance_bridge.async_of(self.documents), lance_bridge.async_of(self.chunks)

        async def checkout() -> None:
            await asyncio.gather(documents.checkout(versions[0]), chunks.checkout(versions[1]))

        with self._refreshing:
            lance_bridge.run(checkout())
            self._versions = versions
            self._marks.answered(None)  # the next refresh asks Lance again

    def detached_vector_index(self, version: int, chunk_ids: np.ndarray) -> VectorIndex:
        """A vector index of this chunks version (`chunk_ids`: its ids) that the store does not keep: its owner
        (a searchers' snapshot source) keeps it in step itself."""
        return self._faiss.detached(version, chunk_ids)

    def vector_index(self, version: int | None = None, chunk_ids: np.ndarray | None = None) -> VectorIndex:
        """The FAISS index for the current chunks version (`version`, when the caller has just read it): loaded
        if persisted for it, else caught up from the newest persisted one (or the one in memory) by diffing chunk
        ids with Lance (`chunk_ids`: that version's ids, when the caller has them), else built from Lance."""
        return self._faiss.current(version, chunk_ids)

    def start_keyword_search(
        self,
        texts: list[str],
        limit: int | list[int],
        version: int | None = None,
        delta: KeywordDelta | None = None,
        languages: list[str | None] | None = None,
    ) -> Callable[[], list[tuple[np.ndarray, np.ndarray]]]:
        """BM25 over chunk text, started (`LanceKeywordSearch.start`): the function that waits for its answer."""
        return self.keywords.start(texts, limit, version, delta, languages)

    def start_keyword_ceilings(self, texts: list[str], version: int, languages: list[str | None]) -> Callable[[], list[float]]:
        """Each text's keyword ceiling, started (`LanceKeywordSearch.start_ceilings`): the function that waits for it."""
        return self.keywords.start_ceilings(texts, version, languages)

    def text_index_rows(self, version: int) -> tuple[int, int]:
        """(rows the full-text index holds, chunk rows it does not) at this chunks version."""
        return self.keywords.index_rows(version)

    def chunk_texts_at_rows(self, row_ids: np.ndarray) -> dict[int, str]:
        """The keyword-indexed column of the chunk rows at these Lance row ids, by row id (ids not found left out)."""
        return self.keywords.texts_at_rows(row_ids)

    def document_records(self) -> dict[str, DocRecord]:
        """Every document, keyed by its path (kept per documents table version, patched by this handle's commits)."""
        return self._records.get(self.documents.version, super().document_records)

    # ---- upkeep --------------------------------------------------------------------------
    def collect_garbage(self) -> int:
        """Delete chunks that belong to no current document version (replaced, deleted, or left by a crash): at this
        handle's first collection those of every document, then only those of documents its commits touched since."""
        with self._writing("remove replaced chunks"):
            return self._stale.collect(self.documents, self.chunks, self._delete_chunks)

    def _delete_chunks(self, ids: list[int]) -> None:
        for predicate in in_lists("id", ids):
            self.chunks.delete(predicate)
        self._faiss.removed(ids)

    def maybe_optimize(self, force: bool = False, every: int = 50, min_interval_s: float = 0.0) -> None:
        """Optimize after a full run, or once `every` commits or OPTIMIZE_ROWS new chunk rows have piled up since
        the last time (but not within `min_interval_s` of it)."""
        due = self.chunks.version - self._optimized_at >= every or self._unoptimized_rows >= OPTIMIZE_ROWS
        if force or (due and time.monotonic() - self._optimized_time >= min_interval_s):
            self.optimize()

    def optimize(self) -> None:
        """Compact both tables, keep scalar indexes on the lookup columns, and drop old versions."""
        with self._writing("optimize the index"):
            self._optimize()

    def optimize_apart(self, nice: int) -> None:
        """From now on optimize large tables in a helper process at CPU priority `nice` (a serving writer: `compactor`)."""
        self._compactor.nice = nice

    def close(self) -> None:
        """Stop the optimizing helper process, if any."""
        self._compactor.close()

    def _optimize(self) -> None:
        documents_before = self.documents.version
        tables = [(name, table) for name, table in (("chunks", self.chunks), ("documents", self.documents)) if table.count_rows()]
        for _, table in tables:
            lance_bridge.ensure_scalar_indexes(table, ["id", "document_id"] if table is self.chunks else ["id"])
        self._compactor.optimize(tables)
        self._records.moved(documents_before, self.documents.version)
        release_freed()
        self._optimized_at, self._optimized_time, self._unoptimized_rows = self.chunks.version, time.monotonic(), 0
        self._faiss.compacted()

    def persist_index(self, min_interval_s: float = 0.0) -> None:
        """Save the FAISS index as the reflection of the current chunks version; with `min_interval_s`,
        skip it when the last save is more recent (readers catch a stale file up from Lance by chunk id)."""
        with lance_bridge.mapped_errors("save the vector index"):
            self._faiss.persist(min_interval_s)

    def track_index(self) -> None:
        """Keep the in-memory FAISS index in step with the writes that follow (writer side), unless lent."""
        if not self._faiss.lent:
            self.vector_index()

    def lend_index(self) -> None:
        """Keep no FAISS index in memory for this writer: the searchers of the process keep the one index by following
        the commits, and make the saves this store asks for in its place (`index_save_due`, `save_vector_index`)."""
        self._faiss.lend()

    def index_save_due(self) -> int | None:
        """A lent index: the latest save asked for and not made yet (a ticket for `index_saved`), else None."""
        return self._faiss.save_due()

    def index_saved(self, ticket: int, seconds: float) -> None:
        """A lent index: its keeper saved the latest committed version (no older than `ticket`'s) in `seconds`."""
        self._faiss.saved(ticket, seconds)

    def converted_vector_index(self, index: VectorIndex) -> VectorIndex | None:
        """An index of the kind the ANN policy wants for this version in place of `index` (built from Lance at this
        handle's version), or None when `index` suits its size."""
        return self._faiss.converted(index)

    def save_vector_index(self, index: VectorIndex, version: int) -> None:
        """Save `index` as the file of this chunks version (it must hold exactly that version's chunks)."""
        with lance_bridge.mapped_errors("save the vector index"):
            if not (self.data_dir / f"chunks.v{version}.faiss").exists():
                index.save(self.data_dir, version)
