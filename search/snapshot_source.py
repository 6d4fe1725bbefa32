"""The searchers' snapshots of one index: each committed version prepared from the one before by what changed, off
the query path, and swapped in whole; searches take the latest prepared one and never wait for the next."""

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import pyarrow.compute as pc

from lodex.search.shared_index import SharedIndex
from lodex.search.snapshot import DOCUMENT_FIELDS, DocumentView, MeanVectors, Snapshot, VersionMap
from lodex.store.base import Store
from lodex.store.chunk_owners import ChunkOwners
from lodex.store.keyword_delta import MAX_ROWS as MAX_DELTA_ROWS
from lodex.store.keyword_delta import SAMPLE_ROWS, IndexTerms, KeywordDelta
from lodex.store.schema import vectors_of

log = logging.getLogger(__name__)

OWNER_COLUMNS = ["id", "document_id", "content_hash"]
# While the writer of the process applies a request begun less than this long ago, the background thread leaves the
# versions it commits to the writer, which prepares the last one before answering: a small change commits up to
# three versions (chunks added, the documents row, replaced chunks removed), each prepared at O(documents) CPU.
WRITER_GRACE_S = 2.0
# After a save of the index that failed, the background thread tries again at most this often (the writer's next
# request, and closing, try at once).
SAVE_RETRY_S = 30.0


class SnapshotSource:
    """Snapshots of the index in `store` (a handle of the source's own once searchers of other threads use it).
    A new version is prepared from the previous snapshot: the chunk rows Lance added after its last row id (their
    vectors added to the one shared index), the rows it no longer has (looked for only when the row count says some
    went), and the documents table (one row per file). Vectors of chunks a version dropped leave the index once no
    search holds an older snapshot. `start` prepares them on a background thread; without it, `snapshot` does."""

    def __init__(self, store: Store, poll_s: float = 0.05) -> None:
        self.store = store
        self.poll_s = poll_s
        self.means = MeanVectors(store)
        self.index_terms = IndexTerms(scheme=store.keyword_scheme)  # the keyword index's figures that scoring the rows it lacks needs
        self._current: Snapshot | None = None
        self._preparing = threading.Lock()  # one refresh at a time
        self._pinning = threading.Lock()  # taking a pin and swapping the current snapshot
        self._retired: list[tuple[Snapshot, np.ndarray]] = []  # older snapshots, and the chunk ids only they hold
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._writer_busy_for: Callable[[], float | None] = lambda: None
        self._keeping_for: Store | None = None  # the writer whose index this source keeps, and saves when it asks
        self._saving = threading.Lock()  # one save of the index at a time
        self._save_failed_at = float("-inf")

    # ---- for searches -------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The latest prepared snapshot (in the foreground, after preparing the latest committed version)."""
        current = self._current
        if self._thread is not None and current is not None:
            return current
        return self.refresh()

    @contextmanager
    def pinned(self) -> Iterator[Snapshot]:
        """The latest prepared snapshot, held for the searches of the block."""
        snap = self.snapshot()
        with self._pinning:
            snap = self._current or snap
            snap.pins += 1
        try:
            yield snap
        finally:
            with self._pinning:
                snap.pins -= 1

    # ---- the one index of a serving process ------------------------------------------------
    def keep_index_for(self, writer: Store) -> None:
        """Be the only in-memory vector index of the process: `writer` (the same index's write side) keeps none, and
        whenever it would save its own it asks for a save instead (`Store.index_save_due`), which this source makes
        after each of its requests (`after_write`), on its background thread, and at the latest when closed."""
        writer.lend_index()
        self._keeping_for = writer

    def follow_writer(self, applying_for: Callable[[], float | None]) -> None:
        """Let the writer of this process (`applying_for`: seconds its current request has run, None when idle), which
        refreshes after each request, prepare the versions of its short requests: the background thread skips them
        for the first WRITER_GRACE_S of a request (a long run's commits it prepares as they come)."""
        self._writer_busy_for = applying_for

    def after_write(self) -> None:
        """The writer of this process applied a request: prepare the version it committed and make the save of the
        index it asked for (if any), on the writer's thread before its requester hears back (a request that ends with
        a save answers once the file is written)."""
        self.refresh()
        self.save_asked_index()

    def save_asked_index(self, retry_after_s: float = 0.0) -> None:
        """Save the index when the writer whose index this source keeps asked for it and the save is not made yet
        (with `retry_after_s`, not within that long of a failed one), and tell it when the save was made."""
        writer = self._keeping_for
        if writer is None or time.monotonic() - self._save_failed_at < retry_after_s:
            return
        with self._saving:
            ticket = writer.index_save_due()
            if ticket is None:
                return
            started = time.monotonic()
            try:
                self._save_index()
            except BaseException:
                self._save_failed_at = time.monotonic()
                raise
            writer.index_saved(ticket, time.monotonic() - started)

    def _save_index(self) -> None:
        """Save the index as the file of the latest committed version: that version prepared first, the vectors only
        older snapshots held removed (once the searches holding them are done), converted first when the ANN policy
        wants another kind for its size (the new index serves the next searches)."""
        self.refresh()
        with self._preparing:
            while self._retired:
                self._release()
                if self._retired:
                    self._stop.wait(0.001)
            snap = self._current
            assert snap is not None and isinstance(snap.index, SharedIndex)
            converted = self.store.converted_vector_index(snap.index.index)
            if converted is not None:
                snap = Snapshot(
                    snap.versions, SharedIndex(converted), snap.docs, snap.versions_map, snap.owners, self.means, snap.keywords, snap.rows_since
                )
                with self._pinning:
                    self._current = snap
            shared = snap.index
            assert isinstance(shared, SharedIndex)  # a source's snapshots hold its shared index
            with shared.reading():
                self.store.save_vector_index(shared.index, snap.version)

    # ---- refreshing ---------------------------------------------------------------------
    def start(self) -> "SnapshotSource":
        """Prepare each new committed version on a background thread (the first one before returning)."""
        self.refresh()
        self._thread = threading.Thread(target=self._follow, name="lodex-snapshots", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop the background thread, then make the save of the index the writer asked for last (a stopping writer
        always asks), if it is not made yet."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.save_asked_index()

    def _follow(self) -> None:
        while not self._stop.wait(self.poll_s):
            busy_for = self._writer_busy_for()
            if busy_for is not None and busy_for < WRITER_GRACE_S:
                continue
            try:
                self.refresh()
            except Exception:  # noqa: BLE001 — searches keep the snapshot they have; the next tick tries again
                log.exception("preparing the next snapshot failed; searches keep the previous version")
                continue
            try:  # a save asked for that the writer's own `after_write` did not make (it failed, or no hook ran it)
                self.save_asked_index(retry_after_s=SAVE_RETRY_S)
            except Exception:  # noqa: BLE001 — the save stays due: tried again later, and when closing
                log.exception("saving the vector index failed; it stays due")

    def refresh(self) -> Snapshot:
        """Prepare the latest committed version when it is new, swap it in, and free what older snapshots alone held."""
        with self._preparing:
            versions = self.store.refresh()
            previous = self._current
            if previous is None or previous.versions != versions:
                snap = self._next(previous, versions)
                with self._pinning:
                    self._current = snap
            self._release()
            assert self._current is not None
            return self._current

    def _next(self, previous: Snapshot | None, versions: tuple[int, int]) -> Snapshot:
        """The snapshot of `versions`, from `previous` by what changed when there is one."""
        store = self.store
        same_docs = previous is not None and previous.versions[0] == versions[0]
        docs = previous.docs if previous is not None and same_docs else DocumentView(store.scan_documents(DOCUMENT_FIELDS))
        if previous is None or previous.version == versions[1]:
            owners, index = (previous.owners, previous.index) if previous is not None else self._full(versions[1])
            rows_since = previous.rows_since if previous is not None else versions[1]
        else:
            owners, index, stable = self._advance(previous, versions[1], docs)
            rows_since = previous.rows_since if stable else versions[1]
        versions_map = previous.versions_map if previous is not None and same_docs and owners is previous.owners else VersionMap(owners, docs)
        if not same_docs:
            self.means.prefetch(docs)  # read here, not by the searches: the vectors of changed documents
        keywords = self._keywords(previous, owners, versions[1])
        return Snapshot(versions, index, docs, versions_map, owners, self.means, keywords, rows_since)

    def _keywords(self, previous: Snapshot | None, owners: ChunkOwners, version: int) -> KeywordDelta | None:
        """The rows of this version the keyword index lacks (the newest ones: the index folds in all rows up to an
        optimize), with their terms, from the previous snapshot's (only rows new to it read); None when there are
        more than keyword_delta.MAX_ROWS (Lance's own plan scans them)."""
        indexed, unindexed = self.store.text_index_rows(version)
        if unindexed > MAX_DELTA_ROWS:
            return None
        terms = self.index_terms
        terms.saw(indexed, unindexed)
        if unindexed and terms.needs_sample():
            terms.measure(list(self.store.chunk_texts_at_rows(owners.sample_rows(SAMPLE_ROWS)).values()))
        held = previous.keywords if previous is not None else None
        return KeywordDelta.build(held, owners.newest_rows(unindexed), self.store.chunk_texts_at_rows, terms)

    def _full(self, version: int) -> tuple[ChunkOwners, SharedIndex]:
        owners = ChunkOwners(self.store.chunk_rows_after(-1, OWNER_COLUMNS))
        return owners, SharedIndex(self.store.detached_vector_index(version, owners.ids))

    def _advance(self, previous: Snapshot, version: int, docs: DocumentView) -> tuple[ChunkOwners, SharedIndex, bool]:
        """Owners and index of a later chunks version: rows added after the previous one's last row id (read by row
        id with stable row ids, else, or when the row count says some were missed, by a scan), and rows gone (looked
        for among those of document versions that are not current, which are all the writer deletes, and in every
        row id when the row count says others went too: a compaction moves every row of a table without stable row
        ids, one an earlier lodex created); and whether the table has stable row ids."""
        store, before = self.store, previous.owners
        count = store.chunk_count()
        added = store.chunk_rows_following(before.last_row_id, OWNER_COLUMNS, count - len(before))  # None: ids not stable
        stable = added is not None
        if added is not None:
            gone = self._stale_gone(before, docs)
            if len(before) - len(gone) + added.num_rows != count:
                added = None  # new rows past a gap in row ids (rows added and deleted again since): a scan finds them
        if added is None:
            added = store.chunk_rows_after(before.last_row_id, OWNER_COLUMNS)
            gone = np.zeros(0, np.uint64) if len(before) + added.num_rows == count else self._stale_gone(before, docs)
            if len(before) - len(gone) + added.num_rows != count:
                gone = np.setdiff1d(before.sorted_row_ids, store.chunk_row_ids(), assume_unique=True)
        owners = before.updated(gone, added)
        new = ~before.has(added["id"].to_numpy())  # not moved by a compaction (no stable row ids): new chunks
        index = previous.index
        if not isinstance(index, SharedIndex) or new.sum() > len(owners) // 2:  # most of it new: loaded or built afresh
            return owners, SharedIndex(store.detached_vector_index(version, owners.ids)), stable
        if new.any():
            rows = store.chunks_at_rows(added["_rowid"].to_numpy()[new], ["id", "vector"])
            index.add(rows["id"].to_numpy(), vectors_of(rows))
        dropped = before.ids_at_rows(gone)
        self._retired.append((previous, dropped[~owners.has(dropped)]))  # not moved by a compaction: gone
        return owners, index, stable

    def _stale_gone(self, before: ChunkOwners, docs: DocumentView) -> np.ndarray:
        """The row ids of `before` that the refreshed version no longer has, among the chunks of document versions
        that are not current (all that lodex's writer deletes)."""
        stale = before.rows_of(~pc.is_in(before.keys, value_set=docs.keys).to_numpy(zero_copy_only=False))
        return np.setdiff1d(stale, self.store.existing_chunk_rows(stale), assume_unique=True)

    def _release(self) -> None:
        """Remove from the index the chunks that only unpinned older snapshots held, oldest first."""
        current = self._current
        while self._retired:
            snap, dropped = self._retired[0]
            with self._pinning:
                if snap.pins:
                    return
            self._retired.pop(0)
            if current is not None and snap.index is current.index and isinstance(current.index, SharedIndex):
                current.index.remove(dropped)
