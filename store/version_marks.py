"""Whether Lance tables may have a new version: told by a stat of their version directories (no round trip to Lance), or
for tables on object storage by how long ago Lance was asked."""

import os
import time
from pathlib import Path

FINE_TICK_NS = 20_000_000  # Linux file systems stamp files from a clock that moves in ticks of 1–10 ms
COARSE_TICK_NS = 2_000_000_000  # file systems that keep whole (or even) seconds
MAX_TRUST_S = 1.0  # ask Lance at least this often anyway (a remote file system's clock may be off)

Marks = tuple[tuple[int, int, int], ...]


class VersionMarks:
    """Every commit to a Lance table adds a manifest file to its `_versions` directory, which moves the directory's
    modification time: while the marks read the same, no commit landed since they were read. A directory changed
    within one timestamp tick of now cannot vouch for that (a second commit in the same tick leaves the same time),
    and neither can a missing one: `read` gives None for those, and the caller asks Lance."""

    def __init__(self, directories: list[Path], trust_s: float = MAX_TRUST_S) -> None:
        self.directories = directories
        self.trust_s = trust_s
        self._trusted: tuple[Marks, float] | None = None  # marks read before the last answer from Lance, and when

    def read(self) -> Marks | None:
        """The directories' (mtime, size, inode) now, or None when they cannot vouch for "no new commit"."""
        now = time.time_ns()
        marks = []
        for directory in self.directories:
            try:
                st = os.stat(directory)
            except OSError:
                return None
            tick = FINE_TICK_NS if st.st_mtime_ns % 1_000_000_000 else COARSE_TICK_NS
            if now - st.st_mtime_ns < tick:
                return None
            marks.append((st.st_mtime_ns, st.st_size, st.st_ino))
        return tuple(marks)

    def unchanged(self, marks: Marks | None) -> bool:
        """Whether `marks` (just read) equal those read before the last answer from Lance, recently enough."""
        trusted = self._trusted
        return marks is not None and trusted is not None and trusted[0] == marks and time.monotonic() - trusted[1] < self.trust_s

    def answered(self, marks: Marks | None) -> None:
        """Lance was just asked, after `marks` were read: they stand for what it answered."""
        self._trusted = None if marks is None else (marks, time.monotonic())


_LOCAL_COMMITS: dict[str, int] = {}  # commits this process made, per object-store URI (its readers see them at once)


def committed_here(uri: str) -> None:
    """This process just committed to the tables at `uri`: its readers of them ask Lance at their next refresh."""
    _LOCAL_COMMITS[uri] = _LOCAL_COMMITS.get(uri, 0) + 1


class IntervalMarks(VersionMarks):
    """The marks of tables on object storage, which have no directory to stat: "no new commit" is trusted for
    `interval_s` after Lance last answered (`serve.refresh_s`: how soon a replica sees another host's commits),
    and never past a commit made by this process."""

    def __init__(self, uri: str, interval_s: float) -> None:
        super().__init__([], interval_s)
        self.uri = uri

    def read(self) -> Marks | None:
        """This process's commit count to the tables, as a mark."""
        return ((_LOCAL_COMMITS.get(self.uri, 0), 0, 0),)
