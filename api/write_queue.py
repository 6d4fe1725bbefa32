"""The API's one hand-off to the writer: pushes, deletes and reindexing wait here in order and never block the caller,
however full the writer's own queue is (an event loop that waited there stalled every endpoint, /health included);
one thread hands them on, waiting for room. A queue at its bound refuses with BusyError (429, Retry-After)."""

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from functools import partial
from typing import Any, TypeVar

from lodex.indexer.errors import Interrupted
from lodex.indexer.pipeline import Indexer
from lodex.indexer.run_state import RunSummary
from lodex.indexer.writer import IndexWriter
from lodex.store.errors import BusyError

T = TypeVar("T")


def _settle(outer: "Future[Any]", inner: "Future[Any]") -> None:
    """Give `outer` what `inner` came to (a result, an error, or a cancellation by a stopping writer)."""
    try:
        if inner.cancelled():
            outer.cancel()
        elif (exc := inner.exception()) is not None:
            outer.set_exception(exc)
        else:
            outer.set_result(inner.result())
    except InvalidStateError:
        pass  # the waiting side gave up on it (a client that went away): the write itself was applied


class WriteQueue:
    """Requests for the one writer, in arrival order, at most `max_waiting` at once (requests already kept on disk,
    re-queued at a start, are never refused)."""

    def __init__(self, writer: IndexWriter, max_waiting: int, retry_after: float = 5.0) -> None:
        self.writer, self.max_waiting, self.retry_after = writer, max_waiting, retry_after
        self._items: deque[tuple[Callable[[Indexer], Any], Future[Any]]] = deque()
        self._cond = threading.Condition()
        self._halted = False
        self._reindex: Future[RunSummary] | None = None  # a reindex waiting here: later ones join it
        self._thread = threading.Thread(target=self._feed, name="lodex-api-writes", daemon=True)
        self._thread.start()

    @property
    def depth(self) -> int:
        """Requests waiting here, not yet handed to the writer."""
        return len(self._items)

    def submit(self, job: Callable[[Indexer], T], bounded: bool = True) -> "Future[T]":
        """Queue a job without blocking; its future gives the result. Raises BusyError when `bounded` and the queue
        is full; once halted, the future fails at once with Interrupted."""
        future: Future[T] = Future()
        with self._cond:
            if self._halted:
                future.set_exception(Interrupted())
                return future
            if bounded and len(self._items) >= self.max_waiting:
                raise BusyError(
                    f"{len(self._items):,} writes wait for the index already, the most this server queues",
                    "send it again after the time in Retry-After",
                    retry_after=self.retry_after,
                )
            self._items.append((job, future))
            self._cond.notify()
        return future

    def reindex(self, job: Callable[[Indexer], RunSummary]) -> "Future[RunSummary]":
        """Queue a reconciliation, or join the one that waits here already (one run answers both)."""
        with self._cond:
            if self._reindex is not None and not self._reindex.done():
                return self._reindex
            self._reindex = self.submit(job)
            return self._reindex

    def _feed(self) -> None:
        while True:
            with self._cond:
                while not self._items and not self._halted:
                    self._cond.wait()
                if self._halted:
                    return
                job, future = self._items.popleft()
                if future is self._reindex:
                    self._reindex = None  # handed on: a later reindex sees the folder as it is then
            inner = self.writer.submit(job)  # waits while the writer's queue is full: only this thread waits
            inner.add_done_callback(partial(_settle, future))

    def halt(self) -> None:
        """Stop handing on: what waits here is cancelled (pushes stay on disk for the next start)."""
        with self._cond:
            self._halted = True
            left = list(self._items)
            self._items.clear()
            self._cond.notify_all()
        for _, future in left:
            future.cancel()
