"""`lodex serve`'s pushed documents between the request and the writer: kept on disk (the spool), queued on the API's
write queue in order, and known by id while they wait (GET /documents/{id} answers 202 for them)."""

import json
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from lodex.api.push_spool import PushSpool
from lodex.api.write_queue import WriteQueue
from lodex.indexer.errors import Interrupted
from lodex.indexer.identity import document_id
from lodex.indexer.paths import PUSHED_PREFIX
from lodex.indexer.pipeline import Indexer
from lodex.store.job_log import FileRecord


class PendingPushes:
    """The spool of accepted pushes and the ids of those still waiting for the writer (id → (path, pushes pending));
    a push that fails is reported to `on_file` as a failed record."""

    def __init__(self, spool: PushSpool, door: WriteQueue, on_file: Callable[[FileRecord], None] | None = None) -> None:
        self.spool, self.door, self._on_file = spool, door, on_file
        self._queued: dict[str, tuple[str, int]] = {}
        self._lock = threading.Lock()
        self.closed = False

    def restart(self) -> None:
        """Queue the pushes kept before a stop or a crash, in order: listed, not read, so that a large spool never delays
        listening; the names of those waiting are learnt in the background."""
        kept = self.spool.pending()
        for path, doc_id in kept:
            self._queue(path, doc_id)
        if kept:
            threading.Thread(target=self._learn_paths, args=(kept,), name="lodex-spool-names", daemon=True).start()

    def _learn_paths(self, kept: list[tuple[Path, str | None]]) -> None:
        for path, doc_id in kept:
            if self.closed:
                return
            with self._lock:
                waiting = doc_id in self._queued and not self._queued[doc_id][0]
            request = self.spool.load(path) if waiting else None
            if request is not None and doc_id is not None:
                with self._lock:
                    if doc_id in self._queued and not self._queued[doc_id][0]:
                        self._queued[doc_id] = (PUSHED_PREFIX + request["name"], self._queued[doc_id][1])

    def push(self, name: str, text: str, title: str, metadata: dict[str, Any]) -> "tuple[str, Future[FileRecord]]":
        """Keep a pushed text document on disk, then queue it for the writer without waiting; returns its id and the
        future of its record (while it waits, `queued` knows it; if lodex stops first, the next start indexes it).
        Blocks on the disk (call it off the event loop); raises BusyError when the spool is full."""
        request = {"name": name, "text": text, "title": title, "metadata": json.dumps(metadata, sort_keys=True)}
        doc_id = document_id(PUSHED_PREFIX + name)
        kept = self.spool.add(request, doc_id)
        with self._lock:
            self._queued[doc_id] = (PUSHED_PREFIX + name, self._queued.get(doc_id, ("", 0))[1])
        return doc_id, self._queue(kept, doc_id)

    def _queue(self, kept: Path, doc_id: str | None) -> "Future[FileRecord]":
        """Queue a kept push on the writer (never refused: it is within the spool's bound already)."""
        if doc_id is not None:
            with self._lock:
                path, waiting = self._queued.get(doc_id, ("", 0))
                self._queued[doc_id] = (path, waiting + 1)

        def apply(ix: Indexer) -> FileRecord:
            request = self.spool.load(kept)  # read here, on the writer: a start lists the spool without reading it
            if request is None:
                self.spool.done(kept)
                raise ValueError(f"the kept push {kept.name} is unreadable; push the document again")
            try:
                record = ix.index_text(request["name"], request["text"], request["title"], request["metadata"])
            except Interrupted:
                raise  # kept on disk: the next start indexes it
            except Exception:
                self.spool.done(kept)  # it can never be indexed: not retried forever
                raise
            self.spool.done(kept)
            return record

        done = self.door.submit(apply, bounded=False)
        if doc_id is not None:
            done.add_done_callback(lambda future: self._pushed(doc_id, future))
        return done

    def _pushed(self, doc_id: str, future: "Future[FileRecord]") -> None:
        with self._lock:
            path, left = self._queued.get(doc_id, ("", 1))
            if left > 1:
                self._queued[doc_id] = (path, left - 1)
            else:
                self._queued.pop(doc_id, None)
        if not future.cancelled() and future.exception() is not None and not isinstance(future.exception(), Interrupted) and self._on_file:
            self._on_file(FileRecord(path or "@api/?", "failed", error=str(future.exception())))

    def queued(self, doc_id: str) -> str | None:
        """The path of a pushed document still waiting to be indexed, or None."""
        with self._lock:
            entry = self._queued.get(doc_id)
        return entry[0] if entry else None
