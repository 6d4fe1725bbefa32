"""index.max_memory_mb: the ceiling on lodex and its reading processes together. A file whose read fits its own budget
(index.max_memory_mb_per_file) but would take the whole process tree past the ceiling fails with the reason, its
reading process is replaced, and the tree (measured from /proc, as tests/test_hostile.py does) stays near the ceiling."""

import os
import threading
from pathlib import Path

import pytest

from lodex.indexer.errors import ReadError
from lodex.indexer.readers.document import ReadLimits
from lodex.indexer.readers.read_budget import ReadBudget, ReadPool, tree_resident
from tests.proc_tree import process_tree

MB = 1 << 20
HEAP = ("heap.md", b"# Heap\n\nheld", ReadLimits())  # tests/budget_readers.py: holds 300 MB a moment, then reads it


def _rss_kb(pid: int) -> int:
    try:
        return next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("VmRSS:"))
    except (OSError, StopIteration, ValueError):
        return 0


def _reading_process(pid: int) -> bool:
    """Whether `pid` runs the reading worker: a child forked but not yet exec'd shares this process's pages (its
    resident memory counts them again) and is not counted."""
    try:
        return b"read_worker" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


class TreePeak:
    """The peak resident memory of this process and the reading processes under it, looked at every 5 ms while in use."""

    def __init__(self) -> None:
        self.kb, self._done = 0, threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._done.wait(0.005):
            readers = [pid for pid in process_tree(os.getpid())[1:] if _reading_process(pid)]
            self.kb = max(self.kb, _rss_kb(os.getpid()) + sum(_rss_kb(pid) for pid in readers))

    def __enter__(self) -> "TreePeak":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


def test_a_read_within_its_own_budget_that_would_take_lodex_past_the_ceiling_fails() -> None:
    ballast = bytearray(200 * MB)  # lodex's own memory (a model, an index): touched, resident
    for page in range(0, len(ballast), 4096):
        ballast[page] = 1
    free = ReadPool(ReadBudget(seconds=30, memory_mb=512), reader="tests.budget_readers:hostile")
    try:
        assert free.extract(*HEAP).title == "Heap"  # 300 MB of its 512 MB budget: read, when no ceiling is set
    finally:
        free.close()
    tree_mb = tree_resident() // MB + 150  # lodex as it is, an idle reading process (~30 MB) and ~120 MB to read with
    pool = ReadPool(ReadBudget(seconds=30, memory_mb=512, tree_mb=tree_mb), reader="tests.budget_readers:hostile")
    try:
        with TreePeak() as peak, pytest.raises(ReadError) as failed:
            pool.extract(*HEAP)
        assert failed.value.message.startswith(
            f"needed more memory than lodex had left under index.max_memory_mb ({tree_mb:,} MB "
            "for lodex and its reading processes together; lodex itself held "
        )
        assert failed.value.fix == "raise index.max_memory_mb, or exclude the file"
        assert pool.extract("fine.md", b"# Herons\n\nThey wade.", ReadLimits()).title == "Herons"  # a new reading process
    finally:
        pool.close()
    assert peak.kb // 1024 <= tree_mb + 96, (peak.kb // 1024, tree_mb)  # a few 16 MB steps past it while it was looked at
    print(f"the tree peaked at {peak.kb // 1024} MB under a ceiling of {tree_mb} MB")
    del ballast


def test_lodex_already_past_the_ceiling_fails_the_file_without_sending_it() -> None:
    pool = ReadPool(ReadBudget(seconds=30, memory_mb=512, tree_mb=1), reader="tests.budget_readers:hostile")
    try:
        with pytest.raises(ReadError, match=r"lodex itself held [\d,]+ MB\)$"):
            pool.extract("fine.md", b"# Herons", ReadLimits())
        assert all(worker.alive() for worker in pool._all)  # idle, not killed: it was never given the file
    finally:
        pool.close()


def test_a_reading_process_that_died_idle_is_dropped_not_counted() -> None:
    """A reading process killed while idle (the OOM killer) is replaced at the next file, and no longer counted in the
    tree's memory nor kept with its pipes (found by review: it stayed in the pool's list and the live set, its pid
    free to be reused by a stranger whose memory lodex would then count)."""
    import signal

    from lodex.indexer.readers import read_budget

    pool = ReadPool(ReadBudget(seconds=30, memory_mb=512))
    try:
        pool.extract("one.md", b"# Herons", ReadLimits())
        (first,) = pool._all
        os.kill(first.proc.pid, signal.SIGKILL)
        first.proc.wait(timeout=10)
        assert "Egrets" in pool.extract("two.md", b"# Egrets", ReadLimits()).text
        assert first not in pool._all and first not in read_budget._LIVE and first.stdout.closed
        assert len(pool._all) == 1 and pool._all[0].alive()
    finally:
        pool.close()
