"""A compressed index's float32 vectors, kept on disk and read back by chunk id to re-score its candidates exactly:
immutable segment files in the data dir that every process reads, plus a private file of the vectors added since."""

import os
import shutil
import tempfile
import threading
import weakref
from pathlib import Path

import numpy as np

from lodex.store.exact_segments import SegmentFile, close_file, close_files, file_key, latest_entries, merged_entries, saved_segments, segment_name
from lodex.store.system_memory import available_bytes

_MAGIC = b"LODEXF32"
_HEADER = 32  # magic, dim (int64), rows (int64), reserved
_FILE_SHIFT = 40  # a vector's locator: its file's number << 40 | its row there
_ROW_MASK = (1 << _FILE_SHIFT) - 1
MAX_SEGMENTS = 8  # segment files before a save merges the newest of them
_COPY_ROWS = 16_384  # rows copied at a time when segments are merged
_EMPTY = np.zeros(0, np.int64)
_PREFETCH_BYTES = 4 << 20  # read into the page cache this much at a time
_READ_AHEAD: set[tuple[int, ...]] = set()  # the segment files this process has read ahead (they never change)


class ExactVectors:
    """The float32 vector of each chunk id, in files under `directory`, none of it held in memory but a sorted id →
    locator map (16 bytes a chunk). The vectors of a chunk id never change, so every version's index can share the
    published segments; the one writer publishes its own additions as a new segment when its index is saved, merges
    the newer, smaller segments when there are MAX_SEGMENTS of them, and rewrites the live vectors into one segment
    when the segments hold twice as many."""

    def __init__(self, directory: Path, dim: int) -> None:
        self.directory, self.dim = directory, dim
        self._row_bytes = 4 * dim
        self._files: list[SegmentFile] = []  # numbered by position, never removed: a locator names one
        self._tail: int | None = None  # which of _files is the private tail, once something was added
        self._tail_ids: list[np.ndarray] = []
        self._retired: list[SegmentFile] = []  # files replaced by a save, closed at the next change (no search reads them then)
        # (ids, locators) sorted by id, one entry each; then those added since, sorted and stable. Replaced whole, so
        # that a search reading while the index is saved sees one map or the other.
        self._map: tuple[np.ndarray, ...] = (_EMPTY, _EMPTY, _EMPTY, _EMPTY)
        self._closer = weakref.finalize(self, close_files, self._files)

    # ---- opening ----------------------------------------------------------------------------
    @classmethod
    def open(cls, directory: Path, dim: int, wanted: np.ndarray) -> "ExactVectors":
        """The vectors of the chunk ids `wanted` that the published segments hold (`missing` tells which others to add;
        a segment deleted or damaged meanwhile is passed over)."""
        out = cls(directory, dim)
        wanted = np.sort(np.asarray(wanted, np.int64))
        ids, locs = [], []
        for _, path in saved_segments(directory):
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue  # merged away by the writer since it was listed
            segment_ids = out._read_segment(fd, path)
            if segment_ids is None:
                os.close(fd)
                continue
            keep = np.flatnonzero(np.isin(segment_ids, wanted))
            ids.append(segment_ids[keep])
            locs.append(keep + ((len(out._files) - 1) << _FILE_SHIFT))
        if ids:
            out._map = (*latest_entries(np.concatenate(ids), np.concatenate(locs)), _EMPTY, _EMPTY)
        out._prefetch()
        return out

    def _prefetch(self) -> None:
        """Read the segments' vectors once from a background thread, so that the page cache holds them, when they fit
        in half of the memory available: the refine step reads ~400 scattered vectors a query, ~0.1 ms each from disk
        (at 3M chunks, ~100 ms a query on a cold cache against ~3 ms warm), so a freshly started server would answer
        its first minutes of queries at disk speed. Sequential reads of 4 MiB into one buffer: nothing is held in this
        process's memory, and the kernel may drop the pages again. (POSIX_FADV_WILLNEED reads only the first ~128 KiB
        of a range on Linux.)"""
        ranges = [
            (f.fd, f.offset, f.rows * self._row_bytes) for f in self._files if f.path is not None and f.rows and file_key(f.fd) not in _READ_AHEAD
        ]  # a later load of the same files reads nothing again
        if not ranges or sum(n for _, _, n in ranges) > available_bytes(0) // 2:
            return
        _READ_AHEAD.update(file_key(fd) for fd, _, _ in ranges)
        fds = [(os.dup(fd), offset, n) for fd, offset, n in ranges]  # its own descriptors: the index may close its files

        def read_ahead() -> None:
            buffer = bytearray(_PREFETCH_BYTES)
            for fd, offset, n in fds:
                try:
                    for at in range(offset, offset + n, _PREFETCH_BYTES):
                        if not os.preadv(fd, [buffer], at):
                            break
                except OSError:
                    pass
                finally:
                    os.close(fd)

        threading.Thread(target=read_ahead, name="lodex-vector-readahead", daemon=True).start()

    def _read_segment(self, fd: int, path: Path) -> np.ndarray | None:
        """Register a segment file; its chunk ids, or None when it is not one of this dimension."""
        header = os.pread(fd, _HEADER, 0)
        if len(header) < _HEADER or header[:8] != _MAGIC:
            return None
        dim, rows = np.frombuffer(header[8:24], np.int64)
        if int(dim) != self.dim or os.fstat(fd).st_size != _HEADER + int(rows) * (self._row_bytes + 8):
            return None
        ids = np.frombuffer(os.pread(fd, int(rows) * 8, _HEADER + int(rows) * self._row_bytes), np.int64)
        self._files.append(SegmentFile(fd, int(rows), _HEADER, path))
        return ids

    # ---- the vectors of chunk ids -------------------------------------------------------------
    def _locate(self, ids: np.ndarray) -> np.ndarray:
        """Each id's locator, -1 for ids without a vector (an id added again: its latest vector)."""
        ids = np.asarray(ids, np.int64)
        out = np.full(len(ids), -1, np.int64)
        base_ids, base_locs, new_ids, new_locs = self._map
        for keys, values in ((base_ids, base_locs), (new_ids, new_locs)):
            if len(keys) and len(ids):
                pos = np.searchsorted(keys, ids, side="right") - 1
                hit = (pos >= 0) & (keys[np.maximum(pos, 0)] == ids)
                out[hit] = values[pos[hit]]
        return out

    def missing(self, ids: np.ndarray) -> np.ndarray:
        """The ids among these that have no vector here."""
        ids = np.asarray(ids, np.int64)
        return ids[self._locate(ids) < 0]

    def read(self, ids: "np.ndarray | list[int]") -> np.ndarray:
        """The vectors of these chunk ids, in their order: one read per run of consecutive rows (a document's chunks
        are stored together), straight into the array (read, not mapped: the page cache holds them, not this process).
        Ids given a document's chunks at a time are read in place; scattered ones in file order, then put in place."""
        locs = self._locate(np.asarray(ids, np.int64))
        if (locs < 0).any():
            raise LookupError(f"{int((locs < 0).sum())} chunk ids have no stored vector")
        out = np.empty((len(locs), self.dim), np.float32)
        if len(locs) >= 4 * (np.count_nonzero(np.diff(locs) != 1) + 1):  # runs of 4 or more on average
            self._read_runs(locs, out)
            return out
        order = np.argsort(locs, kind="stable")
        rows = np.empty_like(out)  # in locator order
        self._read_runs(locs[order], rows)
        out[order] = rows
        return out

    def _read_runs(self, locs: np.ndarray, into: np.ndarray) -> None:
        """Read the vectors at these locators into the rows of `into`, one read per run of consecutive locators."""
        view, size = into.data.cast("B"), self._row_bytes
        bounds = (np.flatnonzero(np.diff(locs) != 1) + 1).tolist()
        for start, end, loc in zip([0, *bounds], [*bounds, len(locs)], locs[[0, *bounds]].tolist() if len(locs) else []):
            file = self._files[loc >> _FILE_SHIFT]
            if os.preadv(file.fd, [view[start * size : end * size]], file.offset + (loc & _ROW_MASK) * size) != (end - start) * size:
                raise OSError(f"{file.path or 'the vectors file'} is shorter than its index says")

    def rescored(self, queries: np.ndarray, candidates: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-n (scores, ids) per query among its candidate ids (-1: none), scored exactly by inner product with the
        stored vectors (each distinct id read once for the batch); rows short of n are padded with -1 ids."""
        valid = candidates >= 0
        unique, inverse = np.unique(candidates[valid], return_inverse=True)
        vectors = self.read(unique)
        scores = np.full(candidates.shape, -np.inf, np.float32)
        rows = np.nonzero(valid)[0]
        scores[valid] = np.einsum("ij,ij->i", vectors[inverse], queries[rows])
        top = np.argsort(-scores, axis=1, kind="stable")[:, :n]
        best, ids = np.take_along_axis(scores, top, 1), np.take_along_axis(candidates, top, 1)
        return np.where(ids >= 0, best, -np.inf).astype(np.float32), ids

    # ---- adding ----------------------------------------------------------------------------
    def append(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Keep these chunks' vectors (in this process's private file until the index is saved). Like any change of
        the index, it must not run while a search reads it."""
        ids = np.asarray(ids, np.int64)
        for file in self._retired:
            close_file(file)
        self._retired = []
        if not len(ids):
            return
        number = self._open_tail()
        tail = self._files[number]
        os.pwrite(tail.fd, np.ascontiguousarray(vectors, dtype=np.float32).tobytes(), tail.rows * self._row_bytes)
        locs = tail.rows + np.arange(len(ids), dtype=np.int64) + (number << _FILE_SHIFT)
        tail.rows += len(ids)
        self._tail_ids.append(ids)
        base_ids, base_locs, new_ids, new_locs = self._map
        new_ids, new_locs = merged_entries(new_ids, new_locs, ids, locs)
        if len(new_ids) > max(4096, len(base_ids) // 8):
            self._map = (*latest_entries(np.concatenate([base_ids, new_ids]), np.concatenate([base_locs, new_locs])), _EMPTY, _EMPTY)
        else:
            self._map = (base_ids, base_locs, new_ids, new_locs)

    def adopt(self, other: "ExactVectors") -> None:
        """Take over the published segments of `other` (a shard's, encoded elsewhere): moved into this directory as the
        newest segments, their vectors read from here from now on; `other`, whose additions must all be saved, is left
        empty. Like any change of the index, it must not run while a search reads it."""
        if other._tail is not None and other._files[other._tail].rows:
            raise ValueError("a shard's vectors must be saved before they are merged")
        base_ids, base_locs, new_ids, new_locs = self._map
        ids, locs = [base_ids, new_ids], [base_locs, new_locs]
        for file in other._files:
            if file.path is None or file.fd < 0 or not file.path.exists():
                continue
            saved = saved_segments(self.directory)
            path = self.directory / segment_name(saved[-1][0] + 1 if saved else 1)
            shutil.move(file.path, path)
            fd = os.open(path, os.O_RDONLY)
            segment_ids = self._read_segment(fd, path)
            if segment_ids is None:
                os.close(fd)
                raise ValueError(f"{path} is not a segment of {self.dim}-dimensional vectors")
            ids.append(segment_ids)
            locs.append(np.arange(len(segment_ids), dtype=np.int64) + ((len(self._files) - 1) << _FILE_SHIFT))
        self._map = (*latest_entries(np.concatenate(ids), np.concatenate(locs)), _EMPTY, _EMPTY)
        close_files(other._files)
        other._files.clear()
        other._tail, other._tail_ids, other._map = None, [], (_EMPTY, _EMPTY, _EMPTY, _EMPTY)

    def _open_tail(self) -> int:
        if self._tail is None:
            try:
                handle = tempfile.TemporaryFile(dir=self.directory, prefix=".chunks.exact.")
            except OSError:  # a read-only data dir: the system's temporary dir
                handle = tempfile.TemporaryFile(prefix="lodex.exact.")
            self._files.append(SegmentFile(handle.fileno(), 0, 0, None, handle))
            self._tail = len(self._files) - 1
        return self._tail

    # ---- saving (the one writer) -------------------------------------------------------------
    def save(self, live: np.ndarray) -> None:
        """Publish the vectors added since the last save as a segment, so that the index saved next finds them in
        any process. With MAX_SEGMENTS segments, merge the newest ones (size-tiered: an older segment that holds more
        than all newer ones together stays as it is, so the big one is not rewritten for a few new vectors); with much
        garbage (vectors of chunks no longer in `live`), rewrite the live vectors into one segment."""
        for stale in self.directory.glob(".chunks.exact.*.part"):
            stale.unlink(missing_ok=True)  # left by a writer that died while saving
        saved = saved_segments(self.directory)
        sizes = [self._rows_of(path) for _, path in saved]
        tail_rows = self._files[self._tail].rows if self._tail is not None else 0
        live = np.asarray(live, np.int64)
        if tail_rows + sum(sizes) > 2 * len(live) + 4096:
            kept = 0
        elif len(saved) < MAX_SEGMENTS:
            if tail_rows and self._tail is not None:
                self._publish(np.concatenate(self._tail_ids), [self._tail], saved)
            return
        else:
            kept = next((i for i in range(len(saved)) if sizes[i] <= sum(sizes[i + 1 :]) + tail_rows), len(saved))
            kept = max(0, min(kept, len(saved) - 2))  # at least two segments become one
        merged_paths = {path for _, path in saved[kept:]}
        merged = [n for n, f in enumerate(self._files) if f.fd >= 0 and (not kept or n == self._tail or f.path in merged_paths)]
        locs = self._locate(live)
        moving = np.isin(locs >> _FILE_SHIFT, merged) & (locs >= 0)
        self._publish(live[moving][np.argsort(locs[moving], kind="stable")], merged, saved)
        for path in merged_paths:
            path.unlink(missing_ok=True)

    def _rows_of(self, path: Path) -> int:
        try:
            return max(0, (path.stat().st_size - _HEADER) // (self._row_bytes + 8))
        except FileNotFoundError:
            return 0

    def _publish(self, ids: np.ndarray, replaced: list[int], saved: list[tuple[int, Path]]) -> None:
        """Write the vectors of `ids` (their order kept) to a new segment and read them from it from now on; the
        files `replaced` are let go at the next change (searches running meanwhile may still read them)."""
        seq = saved[-1][0] + 1 if saved else 1
        path = self.directory / segment_name(seq)
        part = self.directory / f".chunks.exact.{seq:06d}.part"
        with open(part, "wb") as out:
            out.write(_MAGIC + np.array([self.dim, len(ids), 0], np.int64).tobytes())
            for start in range(0, len(ids), _COPY_ROWS):
                out.write(self.read(ids[start : start + _COPY_ROWS]).tobytes())
            out.write(ids.astype(np.int64).tobytes())
            out.flush()
            os.fsync(out.fileno())
        os.replace(part, path)
        self._files.append(SegmentFile(os.open(path, os.O_RDONLY), len(ids), _HEADER, path))
        locs = ((len(self._files) - 1) << _FILE_SHIFT) + np.arange(len(ids), dtype=np.int64)
        base_ids, base_locs, new_ids, new_locs = self._map
        old_ids, old_locs = latest_entries(np.concatenate([base_ids, new_ids]), np.concatenate([base_locs, new_locs]))
        kept = ~np.isin(old_locs >> _FILE_SHIFT, replaced)
        self._map = (*latest_entries(np.concatenate([old_ids[kept], ids]), np.concatenate([old_locs[kept], locs])), _EMPTY, _EMPTY)
        self._retired += [self._files[number] for number in replaced]
        if self._tail in replaced:
            self._tail, self._tail_ids = None, []
