"""The per-file read budget: every file read whole is extracted in a worker process (read_worker.py) under a wall-clock
deadline, a memory ceiling of its own and, when set, a ceiling on lodex and all its reading processes together; a worker
that passes any is killed and replaced, and the file fails with the reason."""

import os
import select
import signal
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any, cast

from lodex.indexer.errors import ReadError
from lodex.indexer.readers.document import ReadLimits
from lodex.indexer.readers.read_worker import receive, send_file
from lodex.indexer.readers.readers import Extracted

_MIB = 1024 * 1024
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_WATCH_S = 0.02  # how often a reading worker's resident memory is looked at
_START_S = 60.0  # a worker not ready by then (an overloaded machine) is a failure to read, not a hang
# RLIMIT_AS, the hard ceiling behind the watch of resident memory (which a fast allocation could outrun between two
# looks): the worker's address space at start plus this many times the memory budget. Address space runs ahead of
# resident memory (allocator arenas, mapped but untouched pages), so the ceiling sits above the budget the watch keeps.
_ADDRESS_FACTOR = 2


@dataclass(frozen=True)
class ReadBudget:
    """What reading one file may take: `seconds` of wall-clock time and `memory_mb` of memory above an idle worker's
    (the file's bytes, the parser's structures and the text); and `tree_mb`, when not 0, the resident memory of this
    process and all its reading processes together; see index.max_seconds_per_file, max_memory_mb_per_file,
    max_memory_mb."""

    seconds: float = 120.0
    memory_mb: int = 1024
    tree_mb: int = 0

    def too_slow(self) -> ReadError:
        return ReadError(
            f"took longer than {self.seconds:g} s to read (index.max_seconds_per_file)", "raise index.max_seconds_per_file, or exclude the file"
        )

    def too_big(self) -> ReadError:
        return ReadError(
            f"needed more than {self.memory_mb:,} MB to read (index.max_memory_mb_per_file)",
            "raise index.max_memory_mb_per_file, or exclude the file",
        )

    def tree_full(self) -> ReadError:
        own = _resident(os.getpid()) // _MIB
        return ReadError(
            f"needed more memory than lodex had left under index.max_memory_mb ({self.tree_mb:,} MB for lodex "
            f"and its reading processes together; lodex itself held {own:,} MB)",
            "raise index.max_memory_mb, or exclude the file",
        )

    def tree_over(self) -> bool:
        """Whether this process and its reading processes hold more than `tree_mb` (never, when it is 0)."""
        return bool(self.tree_mb) and tree_resident() > self.tree_mb * _MIB


def _resident(pid: int) -> int:
    """Resident memory of process `pid` in bytes (0 when it cannot be read: gone, or no /proc)."""
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


_LIVE: "weakref.WeakSet[_Worker]" = weakref.WeakSet()  # every reading process of this process, of every pool


def tree_resident() -> int:
    """Resident memory of this process and of all its reading processes, in bytes."""
    return _resident(os.getpid()) + sum(worker.rss() for worker in list(_LIVE))


class _Worker:
    """One extraction process: started with only the readers imported, told one file at a time."""

    def __init__(self, budget: ReadBudget) -> None:
        args = [sys.executable, "-m", "lodex.indexer.readers.read_worker", str(budget.memory_mb * _ADDRESS_FACTOR)]
        # subprocess starts it by fork and exec at once: no copy of this process (nor of its torch threads) runs
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        if not self._wait_readable(time.monotonic() + _START_S) or receive(self.stdout) != "ready":
            self.kill()
            raise ReadError("the reading process could not start", "check that the machine has free memory")
        self.baseline = self.rss()
        _LIVE.add(self)

    def rss(self) -> int:
        """Resident memory in bytes (0 when it cannot be read)."""
        return _resident(self.proc.pid)

    def peak(self) -> int:
        """The most resident memory it has held since it started, in bytes (VmHWM: a spike between two looks is seen
        at the next one, even once freed); its resident memory now where the peak cannot be read."""
        try:
            with open(f"/proc/{self.proc.pid}/status") as fh:
                return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmHWM:"))
        except (OSError, ValueError, IndexError, StopIteration):
            return self.rss()

    def _wait_readable(self, deadline: float) -> bool:
        left = deadline - time.monotonic()
        return left > 0 and bool(select.select([self.stdout], [], [], left)[0])

    def read(self, request: tuple[str, bytes, ReadLimits, str], budget: ReadBudget) -> tuple[Any, ...]:
        """The worker's answer to `request`; ReadError (the worker killed) when it breaches `budget`, or left idle when
        lodex and its reading processes are already past `budget.tree_mb`."""
        if budget.tree_over():
            raise budget.tree_full()
        try:
            send_file(self.stdin, request)
        except (BrokenPipeError, OSError) as exc:
            self.kill()
            raise ReadError("the reading process stopped before the file was read", "index the file again") from exc
        deadline = time.monotonic() + budget.seconds
        ceiling = self.baseline + budget.memory_mb * _MIB
        while True:
            if select.select([self.stdout], [], [], _WATCH_S)[0]:
                answer = receive(self.stdout)
                if not isinstance(answer, tuple):
                    break  # the worker died while reading: killed by the ceiling on its address space, or crashed
                if self.peak() > ceiling:  # a spike that came and went between two looks, or before the first
                    self.kill()
                    raise budget.too_big()
                return answer
            if self.peak() > ceiling:
                self.kill()
                raise budget.too_big()
            if budget.tree_over():
                self.kill()
                raise budget.tree_full()
            if time.monotonic() > deadline:
                self.kill()
                raise budget.too_slow()
        code = self.kill()
        if code in (-signal.SIGKILL, -signal.SIGSEGV, -signal.SIGABRT, -signal.SIGBUS, 1):  # an allocation refused
            raise budget.too_big()
        raise ReadError(f"its reader crashed (exit status {code})", "exclude the file, or report it")

    def kill(self) -> int | None:
        """Stop the process at once; its exit status."""
        _LIVE.discard(self)
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return None
        finally:
            for pipe in (self.stdin, self.stdout):
                try:
                    pipe.close()
                except OSError:
                    pass

    def alive(self) -> bool:
        return self.proc.poll() is None


def _stop_all(workers: list[_Worker]) -> None:
    for worker in workers:
        worker.kill()


class ReadPool:
    """Extraction workers shared by the threads of one indexer: at most `size` at once; each file read whole goes to
    an idle one (started when none is); one that breaches the budget is killed and the next file starts a new one."""

    def __init__(self, budget: ReadBudget, size: int = 1, reader: str = "") -> None:
        """`reader`: "module:function" the workers call instead of readers.extract (a test's reader bug)."""
        self.budget = budget
        self.reader = reader
        self._slots = threading.Semaphore(size)
        self._idle: list[_Worker] = []
        self._all: list[_Worker] = []
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _stop_all, self._all)

    def extract(self, path: str, data: bytes, limits: ReadLimits) -> Extracted:
        """`extract(path, data, limits)` of readers.py, in a worker, within the budget."""
        with self._slots:
            with self._lock:
                worker = self._idle.pop() if self._idle else None
            if worker is None or not worker.alive():
                if worker is not None:  # died idle (the OOM killer?): its pipes closed, no longer counted in the tree
                    worker.kill()
                    with self._lock:
                        if worker in self._all:
                            self._all.remove(worker)
                worker = _Worker(self.budget)
                with self._lock:
                    self._all.append(worker)
            try:
                answer = worker.read((path, data, limits, self.reader), self.budget)
            finally:
                with self._lock:
                    if worker.alive():
                        self._idle.append(worker)
                    elif worker in self._all:
                        self._all.remove(worker)
        if answer[0] == "ok":
            return cast(Extracted, answer[1])
        if answer[1] == "memory":
            raise self.budget.too_big()
        raise ReadError(answer[1], answer[2])

    def close(self) -> None:
        """Stop every worker (a later extract starts new ones)."""
        with self._lock:
            workers, self._idle[:] = list(self._all), []
            self._all.clear()
        _stop_all(workers)
