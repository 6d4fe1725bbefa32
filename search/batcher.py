"""Micro-batching of concurrent queries: waiting requests are searched together, one encoder call and one scan."""

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future

from search.results import SearchResponse
from search.searcher import Query, Searcher


class QueryBatcher:
    """Worker threads, each with its own Searcher, that take every waiting query (up to max_batch) at once."""

    def __init__(self, make_searcher: Callable[[], Searcher], workers: int = 1, max_batch: int = 16) -> None:
        self.max_batch = max_batch
        self._queue: queue.Queue = queue.Queue()
        self._threads = [threading.Thread(target=self._serve, args=(make_searcher,), name=f"lodex-query-{i}", daemon=True)
                         for i in range(workers)]
        for thread in self._threads:
            thread.start()

    def submit(self, query: Query) -> "Future[SearchResponse]":
        """Queue one search."""
        future: Future = Future()
        self._queue.put((query, future))
        return future

    def close(self) -> None:
        """Answer what is queued, then stop the workers."""
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join(timeout=30)

    def _serve(self, make_searcher: Callable[[], Searcher]) -> None:
        searcher = make_searcher()
        while (first := self._queue.get()) is not None:
            batch = [first]
            while len(batch) < self.max_batch:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._queue.put(None)  # leave the stop signal for after this batch
                    break
                batch.append(item)
            live = [(q, f) for q, f in batch if f.set_running_or_notify_cancel()]
            try:
                for (_, future), response in zip(live, searcher.search_many([q for q, _ in live])):
                    future.set_result(response)
            except Exception as exc:  # noqa: BLE001 — every waiting caller gets the error
                for _, future in live:
                    if not future.done():
                        future.set_exception(exc)
