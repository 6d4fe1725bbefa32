"""The FAISS index over chunk vectors through its life: kept in step with the writer's commits in memory, saved
per chunks version, and for a version with no file of its own loaded, caught up from an older one by chunk id, or
built from the vectors in Lance. For an index on object storage the saved files live there too, copied into the local
cache to be loaded."""

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from lodex.store import lance_bridge
from lodex.store.ann_policy import AnnPolicy
from lodex.store.heap import release_freed
from lodex.store.lance_sql import IN_BATCH
from lodex.store.object_store import ObjectStore
from lodex.store.schema import vectors_of
from lodex.store.vector_index import VectorIndex, index_file, ivf_lists, train_stride

_SCAN_BATCH = 16_384  # chunk rows per batch when streaming vectors out of Lance
# Vectors the writer adds to its in-memory FAISS index between saves. A run that adds more lets the index go
# and the next save rebuilds (or catches up) the index from Lance a batch at a time, in the kind its size calls
# for: memory stays at one index of the final kind, never a float32 copy of every new vector on top of it.
HOLD_ROWS = 65_536
# The share of the time routine saves of the index may take: with `min_interval_s`, a save is also skipped until
# 1/SAVE_SHARE times the last one's duration has passed (at 3M chunks a save writes ~1.2 GB, and the writer, whose
# next commit waits for it, would spend seconds of every 30 on it).
SAVE_SHARE = 0.02


class FaissLifecycle:
    """The FAISS index of one Lance chunks table (a lancedb table handle), under the store's data directory (and with
    `remote`, on the object store beside the tables)."""

    def __init__(self, data_dir: Path, dim: int, chunks: Any, ann: AnnPolicy, remote: ObjectStore | None = None) -> None:
        self.data_dir = data_dir
        self.remote = remote
        self.dim = dim
        self.chunks = chunks
        self.ann = ann
        self._index: VectorIndex | None = None
        self._index_version = -1
        self._unsaved = 0  # vectors added to the in-memory index since it was loaded, built or saved
        self._persisted_at = float("-inf")
        self._save_s = 0.0  # how long the last save took
        self.lent = False  # whether the process's searchers keep the one index instead, and make the saves asked of them
        self._asked = self._made = 0  # saves of a lent index asked for, and the last one its keeper made
        self._behind = False  # rows were appended that the index in memory lacks (fragments): caught up when next asked for

    def lend(self) -> None:
        """From now on keep no index in memory: the process's searchers keep the one index (their snapshots follow
        the commits), and a save this lifecycle would make is asked of them instead (`save_due`, `saved`)."""
        self.lent, self._index, self._index_version, self._behind = True, None, -1, False

    def save_due(self) -> int | None:
        """A lent index: the latest save asked for while its keeper has not made it (the ticket to give `saved`), else
        None."""
        return self._asked if self._asked > self._made else None

    def saved(self, ticket: int, seconds: float) -> None:
        """A lent index: its keeper saved the latest committed version (no older than the one of the save `ticket`
        asked for), taking `seconds`."""
        self._made = max(self._made, ticket)
        self._persisted_at, self._save_s = time.monotonic(), seconds

    def converted(self, index: VectorIndex) -> VectorIndex | None:
        """An index of the kind the policy wants in place of `index` (built from Lance), or None when it suits."""
        kind = self.ann.rebuild(index)
        return None if kind is None else self._build(kind)

    # ---- following the writer's commits ----------------------------------------------------
    def added(self, chunks: pa.Table) -> None:
        """Chunk rows were just added to Lance: add their vectors, or let a large run's index go."""
        if self._index is not None:
            self._unsaved += chunks.num_rows
            if self._unsaved > HOLD_ROWS:
                self._index = None  # a large run: rebuilt from Lance when next needed
            else:
                self._index.add(chunks["id"].to_numpy(), vectors_of(chunks))
                self._follow()

    def appended(self) -> None:
        """Chunk rows were just added to Lance by a commit of fragments written elsewhere (their vectors never came
        here): the index in memory is caught up from Lance by chunk id when next asked for (`current`)."""
        if self._index is not None:
            self._behind = True

    def _follow(self) -> None:
        """The index in memory is that of the table's version now, unless rows were appended that it lacks."""
        if not self._behind:
            self._index_version = self.chunks.version

    def removed(self, chunk_ids: list[int]) -> None:
        """These chunk rows were just deleted from Lance."""
        if self._index is not None:
            self._index.remove(chunk_ids)
            self._follow()

    def compacted(self) -> None:
        """Lance just moved to a new version with the same rows (optimize)."""
        if self._index is not None:
            self._follow()

    # ---- the index of a version --------------------------------------------------------------
    def current(self, version: int | None = None, chunk_ids: np.ndarray | None = None) -> VectorIndex:
        """The FAISS index for the current chunks version (`version`, when the caller has just read it): loaded
        if persisted for it, else caught up from the newest persisted one (or the one in memory) by diffing chunk
        ids with Lance (`chunk_ids`: that version's ids, when the caller has them), else built from Lance."""
        version = self.chunks.version if version is None else version
        if self._index is not None and self._index_version == version:
            return self._index
        self._fetch(version)
        index = self._load(version)
        if index is None:
            if self._index is None:
                self._fetch()
            index, self._index = self._index or self._load(), None
            if index is None or not self._catch_up(index, chunk_ids):
                index = None  # freed before the new one is built
                index = self._build()
        self._index, self._index_version, self._unsaved, self._behind = index, version, 0, False
        return index

    def detached(self, version: int, chunk_ids: np.ndarray) -> VectorIndex:
        """An index of this version that this lifecycle does not keep: the file saved for it, else the newest file
        caught up by chunk id, else one built from Lance."""
        index = self._load(version)
        if index is None:
            index = self._load()
            if index is None or not self._catch_up(index, chunk_ids):
                index = None
                index = self._build()
        return index

    def persist(self, min_interval_s: float = 0.0) -> None:
        """Save the index as the reflection of the current chunks version (converted first when the policy wants
        another kind); with `min_interval_s`, skip it when the last save is more recent, or more recent than
        1/SAVE_SHARE times its duration (readers catch a stale file up from Lance by chunk id). A lent index's save
        is asked of its keeper (`save_due`), which says when it made it (`saved`)."""
        if min_interval_s and time.monotonic() - self._persisted_at < max(min_interval_s, self._save_s / SAVE_SHARE):
            return
        started = time.monotonic()
        if self.lent:
            self._asked += 1
            self._persisted_at = started  # the save has begun (its keeper's `saved` tells when it ended)
            return
        self._save()
        self._persisted_at = time.monotonic()
        self._save_s = self._persisted_at - started

    def _save(self) -> None:
        """Save this process's index as the current version's file (converted first when the policy wants another kind)."""
        index = self.current()
        kind = self.ann.rebuild(index)
        if kind is not None:
            self._index = None  # freed before the new one is built
            del index
            self._index = index = self._build(kind)
            (self.data_dir / index_file(self.chunks.version)).unlink(missing_ok=True)
        if not (self.data_dir / index_file(self.chunks.version)).exists():
            index.save(self.data_dir, self.chunks.version)
            self._upload(self.chunks.version)
        self._index_version, self._unsaved = self.chunks.version, 0

    # ---- on object storage -------------------------------------------------------------------
    def _fetch(self, version: int | None = None) -> None:
        """Copy the file saved for `version` (None: the newest saved) from the object store into the local cache,
        unless it is there already."""
        if self.remote is None:
            return
        if version is None:
            saved = sorted(self.remote.names("chunks.v*.faiss"), key=lambda name: int(name.split(".")[1][1:]))
            name = saved[-1] if saved else None
        else:
            name = index_file(version)
        if name is not None and not (self.data_dir / name).exists() and self.remote.pull(name, self.data_dir):
            for older in self.data_dir.glob("chunks.v*.faiss"):
                if older.name != name:
                    older.unlink(missing_ok=True)  # copies of versions gone by

    def _upload(self, version: int) -> None:
        """Put the file just saved for `version` on the object store, then drop the older ones there."""
        if self.remote is None:
            return
        self.remote.push(self.data_dir / index_file(version))
        for name in self.remote.names("chunks.v*.faiss"):
            if name != index_file(version):
                self.remote.delete(name)

    # ---- from Lance ------------------------------------------------------------------------------
    def _vector_batches(self, every: int = 1) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(ids, vectors) of every `every`-th chunk of this version, streamed by one scan a batch at a time (reading by
        row offset instead, to spare the scan's read-ahead, took 50x longer: minutes at 1M chunks)."""
        reader = self.chunks.search().select(["id", "vector"]).limit(None).to_batches(_SCAN_BATCH)
        offset = 0
        for batch in reader:
            first = -offset % every  # the batch's first row whose table offset is a multiple of `every`
            offset += batch.num_rows
            table = pa.Table.from_batches([batch]).slice(first)
            if every > 1:
                table = table.take(pa.array(range(0, table.num_rows, every), pa.int64()))
            if table.num_rows:
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
        for ids, vectors in self._vectors_of(missing):
            index.add(ids, vectors)
        return True

    def _vectors_of(self, wanted: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(ids, vectors) of these chunk ids, from Lance: by id when they are few, else picked out of a scan."""
        if len(wanted) <= 4 * IN_BATCH:
            if len(wanted):
                table = lance_bridge.select_in(self.chunks, "id", wanted.tolist(), ["id", "vector"])
                yield table["id"].to_numpy(), vectors_of(table)
            return
        wanted = np.sort(wanted)
        for ids, vectors in self._vector_batches():
            keep = np.isin(ids, wanted, assume_unique=True)
            yield ids[keep], vectors[keep]

    def _load(self, version: int | None = None) -> VectorIndex | None:
        """The index saved for `version` (None: the newest saved), a compressed one given the float32 vectors its
        segment files lack (another host's index, or files merged away) from Lance."""
        ann, dim = self.ann, self.dim
        if version is None:
            index = VectorIndex.load_latest(self.data_dir, dim, ann.nprobe, ann.refine)
        else:
            index = VectorIndex.load(self.data_dir, version, dim, ann.nprobe, ann.refine)
        if index is not None and index.exact is not None:
            for ids, vectors in self._vectors_of(index.missing_vectors()):
                index.exact.append(ids, vectors)
        return index

    def _build(self, kind: str | None = None) -> VectorIndex:
        """A new index of `kind` (default: what the policy wants for this size) over every chunk in Lance,
        streamed; an IVF index (compressed or not) is first trained on an even sample of them (one more pass)."""
        n, ann = self.chunks.count_rows(), self.ann
        kind = kind or ann.kind_for(n)
        if kind != "flat":
            nlist = ivf_lists(n)
            every = train_stride(n, nlist)
            sample, filled = np.empty((len(range(0, n, every)), self.dim), np.float32), 0
            for _, vectors in self._vector_batches(every):
                sample[filled : filled + len(vectors)] = vectors
                filled += len(vectors)
            index = VectorIndex.ivf(
                self.dim, sample[:filled], nlist, ann.nprobe, ann.refine, self.data_dir if kind == "compressed" else None, ann.codes
            )
            del sample
        else:
            index = VectorIndex(self.dim, ann.nprobe, ann.refine)
        for ids, vectors in self._vector_batches():
            index.add(ids, vectors)
        release_freed()
        return index
