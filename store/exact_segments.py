"""The files behind a compressed index's exact vectors: immutable segment files (named by sequence, listed, discarded),
each an open file of float32 rows, and the id-sorted maps from chunk id to a vector's place in them."""

import os
import re
from pathlib import Path
from typing import IO

import numpy as np

_SEGMENT = re.compile(r"^chunks\.exact\.(\d+)\.f32$")


def segment_name(seq: int) -> str:
    return f"chunks.exact.{seq:06d}.f32"


def saved_segments(directory: Path) -> list[tuple[int, Path]]:
    """(sequence number, path) of every published segment in `directory`, oldest first."""
    found = ((int(m.group(1)), p) for p in directory.glob("chunks.exact.*.f32") if (m := _SEGMENT.match(p.name)))
    return sorted(found)


def discard_segments(directory: Path) -> None:
    """Delete every segment file in `directory` (an index that is not compressed needs none; processes still reading
    one keep their open copy)."""
    for _, path in saved_segments(directory):
        path.unlink(missing_ok=True)


class SegmentFile:
    """One file of float32 rows: a published segment (path set, rows fixed) or the private tail (rows appended)."""

    def __init__(self, fd: int, rows: int, offset: int, path: Path | None, handle: IO[bytes] | None = None) -> None:
        self.fd, self.rows, self.offset, self.path, self.handle = fd, rows, offset, path, handle


def latest_entries(ids: np.ndarray, locs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ids, locs) sorted by id, each id once: its last entry."""
    order = np.argsort(ids, kind="stable")
    ids, locs = ids[order], locs[order]
    last = np.append(ids[1:] != ids[:-1], True) if len(ids) else np.zeros(0, bool)
    return ids[last], locs[last]


def merged_entries(ids: np.ndarray, locs: np.ndarray, new_ids: np.ndarray, new_locs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two id-sorted lists made one, sorted and stable (an id's later entries after its earlier ones)."""
    order = np.argsort(new_ids, kind="stable")
    at = np.searchsorted(ids, new_ids[order], side="right")
    return np.insert(ids, at, new_ids[order]), np.insert(locs, at, new_locs[order])


def file_key(fd: int) -> tuple[int, ...]:
    """An open file's identity: device and inode, with size and modification time (an inode is reused once freed)."""
    stat = os.fstat(fd)
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


def close_file(file: SegmentFile) -> None:
    if file.handle is not None:
        file.handle.close()
    elif file.fd >= 0:
        os.close(file.fd)
    file.fd, file.handle = -1, None


def close_files(files: list[SegmentFile]) -> None:
    for file in files:
        close_file(file)
