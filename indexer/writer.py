"""The one write path: every change request (watcher, CLI, API) runs in order on one writer thread."""

import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from lodex.indexer.errors import Interrupted
from lodex.indexer.pipeline import Indexer
from lodex.indexer.run_state import Progress, RunSummary
from lodex.store.job_log import FileRecord

T = TypeVar("T")
QUEUE_SIZE = 256  # requests the writer holds; submitting past them blocks (the API's own queue sits in front: api/write_queue.py)
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunHooks:
    """What a long-lived writer's runs report as they go: each file processed, and progress."""

    on_file: Callable[[FileRecord], None] | None = None
    progress: Callable[[Progress], None] | None = None
    applied: Callable[[], None] | None = None  # after each request, before its future resolves (readers catch up)


class PathsJob:
    """An update of some paths (as the index names them) on the writer; paths asked for while it waits join it."""

    def __init__(self, root: Path, paths: list[str], kind: str, hooks: RunHooks) -> None:
        self.root, self.paths, self.kind, self.hooks = root, list(dict.fromkeys(paths)), kind, hooks
        self.future: Future[RunSummary] | None = None
        self._started = False
        self._lock = threading.Lock()

    def join(self, paths: list[str], kind: str) -> bool:
        """Add these paths to the update unless it has started (or is of another kind); whether they were added."""
        with self._lock:
            if self._started or kind != self.kind or self.future is None or self.future.done():
                return False
            known = set(self.paths)
            self.paths += [p for p in dict.fromkeys(paths) if p not in known]
            return True

    def __call__(self, ix: Indexer) -> RunSummary:
        with self._lock:
            self._started = True
        return ix.run(self.root, only=self.paths, kind=self.kind, progress=self.hooks.progress, on_file=self.hooks.on_file)


class IndexWriter:
    """A bounded queue of write requests served by one thread; submitters get a Future of the result. Updates of
    paths queued one after another are applied as one run (a watcher's changes that come while the writer is busy:
    one commit, and one snapshot for the searches, instead of one each)."""

    def __init__(
        self, indexer: Indexer, root: Path, on_error: Callable[[BaseException], None] | None = None, nice: int = 19, hooks: RunHooks = RunHooks()
    ) -> None:
        self.indexer = indexer
        self.nice = nice
        self.root = root
        self.on_error = on_error
        self.hooks = hooks
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=QUEUE_SIZE)
        self._pending = 0  # requests submitted and not finished
        self._count_lock = threading.Lock()
        self._tail_lock = threading.Lock()  # taken around queueing, so that `_tail` is the last request queued
        self._tail: PathsJob | None = None  # the last request queued when it is an update of paths not started yet
        self._applying_since: float | None = None  # when the request being applied began (monotonic)
        self._thread = threading.Thread(target=self._serve, name="lodex-writer", daemon=True)

    @property
    def depth(self) -> int:
        """Requests waiting."""
        return self._queue.qsize()

    @property
    def capacity(self) -> int:
        """Requests the queue holds before a submit blocks."""
        return self._queue.maxsize

    def applying_for(self) -> float | None:
        """Seconds the request being applied has run so far; None when none is."""
        since = self._applying_since
        return None if since is None else time.monotonic() - since

    @property
    def busy(self) -> bool:
        """Whether a request is being applied or waits."""
        return self._pending > 0

    def start(self) -> "IndexWriter":
        """Start the writer thread."""
        self._thread.start()
        return self

    def submit(self, job: Callable[[Indexer], T]) -> "Future[T]":
        """Queue a job (blocks while the queue is full, which slows producers down); once halted, the future fails at
        once with Interrupted."""
        with self._tail_lock:
            self._tail = None
            return self._put(job)

    def _put(self, job: Callable[[Indexer], T]) -> "Future[T]":
        future: Future[Any] = Future()
        if self.indexer.cancel.is_set():
            future.set_exception(Interrupted())
            return future
        with self._count_lock:
            self._pending += 1
        self._queue.put((job, future))
        return future

    def reconcile_job(self, kind: str = "reconcile") -> Callable[[Indexer], RunSummary]:
        """A full comparison of the folder with the index, as a job for this writer."""
        return lambda ix: ix.run(self.root, kind=kind, progress=self.hooks.progress, on_file=self.hooks.on_file)

    def reconcile(self, kind: str = "reconcile") -> "Future[RunSummary]":
        """Queue a full comparison of the folder with the index."""
        return self.submit(self.reconcile_job(kind))

    def paths(self, paths: list[str], kind: str = "watch") -> "Future[RunSummary]":
        """Queue an update of these paths, as the index names them (path_key): files or folders, present or gone.
        When the last request queued is an update of the same kind that has not started, they join it (its future)."""
        with self._tail_lock:
            if self._tail is not None and self._tail.join(paths, kind):
                assert self._tail.future is not None
                return self._tail.future
            job = PathsJob(self.root, paths, kind, self.hooks)
            job.future = self._put(job)
            self._tail = job
            return job.future

    def halt(self) -> None:
        """Begin stopping: the request being applied stops at its next check (what it committed stays), queued ones
        are cancelled (the next start's reconciliation applies what they would have); the thread stays until stop()."""
        self.indexer.cancel.set()
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[1].cancel()
                with self._count_lock:
                    self._pending -= 1

    def stop(self, timeout: float | None = None) -> None:
        """Halt, then stop the thread and save the vector index (a writer never started has neither to stop)."""
        self.halt()
        if self._thread.ident is None:
            return
        self._queue.put(None)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self.indexer.store.persist_index()
            self.indexer.cancel.clear()

    def _serve(self) -> None:
        if self.nice and hasattr(os, "setpriority"):
            try:  # this thread and the encoder threads it starts yield the CPU to queries
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self.nice)
            except OSError:
                pass
        while (item := self._queue.get()) is not None:
            job, future = item
            try:
                if future.set_running_or_notify_cancel():
                    self._applying_since = time.monotonic()
                    self._apply(job, future)
            finally:
                self._applying_since = None
                with self._count_lock:
                    self._pending -= 1

    def _apply(self, job: Callable[[Indexer], Any], future: Future[Any]) -> None:
        try:
            result = job(self.indexer)
        except BaseException as exc:  # noqa: BLE001 — handed to the submitter, the writer goes on
            self._applied()
            future.set_exception(exc)
            if self.on_error:
                self.on_error(exc)
            return
        self._applied()
        future.set_result(result)

    def _applied(self) -> None:
        """Let readers catch up with what the request committed before its submitter hears of it."""
        if self.hooks.applied is not None:
            try:
                self.hooks.applied()
            except Exception:  # noqa: BLE001 — readers catch up on their own a moment later
                log.exception("readers did not catch up with the last write")
