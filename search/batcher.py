"""Micro-batching of concurrent queries, in two stages: one thread encodes every waiting query at once (their BM25
runs in Lance meanwhile) while the search workers rank the batch encoded before (the encoder and Lance run in native
code, so the stages overlap on two cores). Texts to embed only (the embeddings endpoint) go through the same encoding
thread a slice at a time, between the query batches (search/embed_queue.py)."""

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import numpy as np

from lodex.search.embed_queue import EmbedJob, EmbedQueue
from lodex.search.results import SearchResponse
from lodex.search.searcher import Query, Searcher

__all__ = ["EmbedJob", "EmbedQueue", "QueryBatcher"]

_Batch = list[tuple[Query, "Future[Any]"]]


class QueryBatcher:
    """An encoding thread feeding search workers, each with its own Searcher; each stage takes everything waiting
    for it (up to max_batch queries) at once."""

    def __init__(
        self,
        make_searcher: Callable[[], Searcher],
        encode: Callable[[list[str]], np.ndarray],
        workers: int = 1,
        max_batch: int = 16,
        embeds: EmbedQueue | None = None,
    ) -> None:
        self.max_batch = max_batch
        self._encode = encode
        self.embeds = embeds
        self._queue: queue.Queue[Any] = queue.Queue()
        self._encoded: queue.Queue[Any] = queue.Queue()
        self._encoder = threading.Thread(target=self._encode_batches, args=(make_searcher,), name="lodex-query-encoder", daemon=True)
        self._threads = [threading.Thread(target=self._serve, args=(make_searcher,), name=f"lodex-query-{i}", daemon=True) for i in range(workers)]
        for thread in (self._encoder, *self._threads):
            thread.start()

    def submit(self, query: Query) -> "Future[SearchResponse]":
        """Queue one search."""
        future: Future[Any] = Future()
        self._queue.put((query, future))
        return future

    def submit_embedding(self, job: EmbedJob) -> "Future[tuple[np.ndarray, int]]":
        """Queue texts to embed on the encoding thread; the future gives (vectors, tokens the model read). Raises
        BusyError when as many texts wait already as the queue takes."""
        if self.embeds is None:
            raise RuntimeError("this batcher embeds queries only")
        self.embeds.admit(job)
        future: Future[Any] = Future()
        self._queue.put((job, future))
        return future

    @property
    def waiting(self) -> int:
        """Searches and embedding requests waiting for the encoding thread to take them."""
        return self._queue.qsize()

    def close(self) -> None:
        """Answer what is queued, then stop the threads."""
        self._queue.put(None)
        self._encoder.join(timeout=30)
        for thread in self._threads:
            thread.join(timeout=30)

    def _encode_batches(self, make_searcher: Callable[[], Searcher]) -> None:
        searcher = make_searcher()  # its own store handle, for the BM25 half of each batch
        embeds = self.embeds
        # waiting searches first, then one slice of the embedding jobs, and again: a search waits one slice at most
        while (batch := _take(self._queue, self.max_batch, wait=not (embeds and embeds.pending))) is not None:
            searches = []
            for item, future in batch:
                if isinstance(item, EmbedJob):
                    assert embeds is not None
                    embeds.start(item, future)  # its future stays pending until its last slice
                elif future.set_running_or_notify_cancel():
                    searches.append((item, future))
            if searches:
                self._encode_searches(searcher, searches)
            if embeds and embeds.pending:
                embeds.run_slice()
        while embeds and embeds.pending:  # closing: what was accepted is answered
            embeds.run_slice()
        for _ in self._threads:
            self._encoded.put(None)

    def _encode_searches(self, searcher: Searcher, live: _Batch) -> None:
        started = time.perf_counter()
        try:
            keywords = searcher.start_keyword_search([q for q, _ in live])  # in Lance while the queries are encoded
            vectors = self._encode([q.text for q, _ in live])
        except Exception as exc:  # noqa: BLE001 — one bad query must not fail its neighbours: each alone, once more
            if len(live) == 1:
                _fail(live, exc)
                return
            for pair in live:
                self._encode_alone(searcher, pair, started)
            return
        self._encoded.put((live, vectors, started, keywords))

    def _encode_alone(self, searcher: Searcher, pair: tuple[Query, "Future[Any]"], started: float) -> None:
        try:
            keywords = searcher.start_keyword_search([pair[0]])
            vectors = self._encode([pair[0].text])
        except Exception as exc:  # noqa: BLE001 — this query's own error, for its caller alone
            _fail([pair], exc)
            return
        self._encoded.put(([pair], vectors, started, keywords))

    def _serve(self, make_searcher: Callable[[], Searcher]) -> None:
        searcher = make_searcher()
        while (encoded := _take(self._encoded, self.max_batch)) is not None:  # every batch encoded meanwhile, as one
            live = [pair for batch, _, _, _ in encoded for pair in batch]
            try:
                vectors = np.concatenate([v for _, v, _, _ in encoded])
                waits = [wait for _, _, _, wait in encoded]  # called by the search once its dense half is done
                responses = searcher.search_many(
                    [q for q, _ in live], vectors, min(t for _, _, t, _ in encoded), lambda waits=waits: [hits for wait in waits for hits in wait()]
                )
                for (_, future), response in zip(live, responses):
                    future.set_result(response)
            except Exception as exc:  # noqa: BLE001 — one bad query must not fail its neighbours: each alone, once more
                if len(live) == 1:
                    _fail(live, exc)
                    continue
                for (query, future), vector in zip(live, vectors):
                    try:
                        future.set_result(searcher.search_many([query], vector[None, :], time.perf_counter())[0])
                    except Exception as alone:  # noqa: BLE001
                        _fail([(query, future)], alone)


def _take(source: "queue.Queue[Any]", limit: int, wait: bool = True) -> list[Any] | None:
    """The next item and whatever else is waiting (up to `limit`); None at the stop signal (left for the rest); without
    `wait`, an empty list when nothing waits."""
    try:
        first = source.get() if wait else source.get_nowait()
    except queue.Empty:
        return []
    if first is None:
        return None
    batch = [first]
    while len(batch) < limit:
        try:
            item = source.get_nowait()
        except queue.Empty:
            break
        if item is None:
            source.put(None)  # the stop signal, after this batch
            break
        batch.append(item)
    return batch


def _fail(batch: _Batch, exc: BaseException) -> None:
    for _, future in batch:
        if not future.done():
            future.set_exception(exc)
