"""What the serve role adds to an application (`lodex serve`): the snapshots every query thread shares, the query
batcher, the one writer fed by the watcher and the API's write queue, pushed documents kept until indexed, and the
threads the HTTP routes run on; a read-only replica (serve.read_only) has no writer."""

import gc
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from lodex.api.push_spool import PushSpool
from lodex.api.pushes import PendingPushes
from lodex.api.settings import Settings
from lodex.api.write_queue import WriteQueue
from lodex.encoders.encoder import Encoder
from lodex.indexer.run_state import Progress, RunSummary
from lodex.indexer.watch_service import WatchService
from lodex.indexer.writer import IndexWriter, RunHooks
from lodex.search.batcher import EmbedJob, EmbedQueue, QueryBatcher
from lodex.search.names import Mode
from lodex.search.results import SearchFilters, SearchResponse
from lodex.search.searcher import Query, Searcher
from lodex.search.snapshot_source import SnapshotSource
from lodex.store.errors import ReadOnlyError
from lodex.store.job_log import FileRecord
from lodex.store.lance_store import LanceStore


@dataclass(frozen=True)
class ServeBuilders:
    """What the composition root (api/factory.py) lends the serve role to build its pieces: a reader's store handle,
    a searcher over one and the shared snapshots, and (when it writes) the watcher or the writer for given hooks."""

    open_reader: Callable[[], LanceStore]
    searcher: Callable[[LanceStore, SnapshotSource], Searcher]
    watch: Callable[[RunHooks], WatchService] | None = None
    writer: Callable[[RunHooks], IndexWriter] | None = None


class Serving:
    """The serve role's pieces over an index opened by the composition root: `store` the writer's (None on a replica),
    whose snapshots keep the process's one vector index; `watch` False: no watcher (the writer alone)."""

    def __init__(
        self,
        settings: Settings,
        encoder: Encoder,
        store: LanceStore | None,
        build: ServeBuilders,
        watch: bool = True,
        on_file: Callable[[FileRecord], None] | None = None,
    ) -> None:
        self.settings, self.encoder, self.started_at = settings, encoder, time.time()
        self.encoder.embed(["warm-up"], kind="query")  # the query path loaded (exported at the first start) before any request
        # what loading made (the modules, the models: ~0.5M objects, there for good) left out of the collector's
        # full passes: each stopped every thread for ~0.3 s, a few times a minute while serving 1M chunks
        gc.freeze()
        # one set of snapshots for every query thread, each new version prepared in the background from the last
        # (and by the writer after each of its requests, before the requester hears back); their vector index is
        # the process's only one: the writer keeps none and has them save theirs
        self.snapshots = SnapshotSource(build.open_reader()).start()
        if store is not None:  # a replica writes no index file: its snapshots keep theirs to themselves
            self.snapshots.keep_index_for(store)
        self.encoded_tokens, self._rate, self._files_left = 0, 0.0, 0  # files the current run has not reached yet
        self._on_file, self._open_reader = on_file, build.open_reader
        hooks = RunHooks(on_file=self._file_done, progress=self._progress, applied=self.snapshots.after_write)
        self.watch: WatchService | None = build.watch(hooks) if build.watch and watch else None
        self.writer: IndexWriter | None = self.watch.writer if self.watch else build.writer(hooks) if build.writer else None
        if self.writer is not None:
            self.snapshots.follow_writer(self.writer.applying_for)  # it refreshes after each request: its short ones' versions are left to it
        self._local = threading.local()
        api = settings.api
        embeds = EmbedQueue(
            lambda texts, kind: (encoder.embed(texts, kind=kind), sum(encoder.input_tokens(texts, kind))),
            api.max_queued_embed_inputs,
            api.embed_slice_inputs,
        )
        self.batcher = QueryBatcher(
            lambda: build.searcher(build.open_reader(), self.snapshots),
            lambda texts: encoder.embed(texts, kind="query"),
            workers=api.query_threads,
            embeds=embeds,
        )
        self.queries = ThreadPoolExecutor(2, thread_name_prefix="lodex-read")
        # the API's writes: kept on disk (a push) on these threads, then queued without waiting for the writer
        self.writes = ThreadPoolExecutor(4, thread_name_prefix="lodex-push")
        self.door = WriteQueue(self.writer, api.max_queued_pushes) if self.writer else None
        self.pushes = (
            PendingPushes(PushSpool(settings.data_dir, api.max_queued_pushes, api.max_queued_push_mb * 2**20), self.door, on_file)
            if self.door
            else None
        )

    # ---- lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        """Start the writer (and the watcher, which queues the startup reconciliation), then queue the kept pushes."""
        if self.writer is None:
            return
        if self.watch:
            self.watch.start()  # its startup reconciliation first collects what an interrupted run left
        else:
            self.writer.start()
            self.writer.submit(lambda ix: ix.store.collect_garbage())
        if self.pushes is not None:
            self.pushes.restart()

    def halt(self) -> None:
        """Begin stopping (at SIGTERM, before the server drains its requests): the writer stops at its next check and
        queued changes are cancelled, so requests waiting on them answer at once (pushes stay on disk)."""
        if self.door is not None:
            self.door.halt()
        if self.writer is not None:
            self.writer.halt()

    def close(self) -> None:
        """Stop watching, apply what is queued, stop the query threads and the snapshots."""
        if self.pushes is not None:
            self.pushes.closed = True
        if self.door is not None:
            self.door.halt()  # what waits there stays on disk (pushes) or is the next start's reconciliation
        if self.watch:
            self.watch.stop()
        elif self.writer is not None:
            self.writer.stop()
        self.batcher.close()
        self.snapshots.close()
        gc.unfreeze()
        self.queries.shutdown(wait=True)
        self.writes.shutdown(wait=True)

    # ---- writer-side callbacks -----------------------------------------------------------
    def _file_done(self, record: FileRecord) -> None:
        self.encoded_tokens += record.tokens
        if self._on_file:
            self._on_file(record)

    def _progress(self, state: Progress) -> None:
        self._rate = state.tokens_per_s
        self._files_left = state.files_total - state.files_done

    def indexing(self) -> tuple[bool, int]:
        """Whether changes are being applied or wait (searches may not see them yet): the writer's requests, and
        changes the watcher saw that are still settling (`watch.quiet_s`); and how many files the current run has
        left (0 when idle, or while a run is still listing the folder)."""
        if self.writer is None:
            return False, 0
        running = self.writer.busy
        return running or bool(self.watch and len(self.watch.collector)), self._files_left if running else 0

    @property
    def queue_depth(self) -> int:
        """Changes waiting for the writer, in its queue and the API's (none on a replica)."""
        return self.writer.depth + (self.door.depth if self.door else 0) if self.writer is not None else 0

    @property
    def encode_tokens_per_s(self) -> float:
        """Encoder throughput of the current or last indexing batch."""
        return self._rate

    # ---- reading -------------------------------------------------------------------------
    def search(self, query: str, k: int, filters: SearchFilters, mode: Mode | None = None) -> "Future[SearchResponse]":
        """Queue a search; concurrent searches are answered together in one batch."""
        return self.batcher.submit(Query(query, k, filters, mode))

    def embed(self, texts: list[str], kind: str) -> "Future[tuple[np.ndarray, int]]":
        """Queue texts to embed (as queries or documents) on the query encoder's thread, a slice at a time between
        searches; the future gives their vectors and the tokens the model read. BusyError past api.max_queued_embed_inputs."""
        return self.batcher.submit_embedding(EmbedJob(texts, kind))

    def reader(self) -> LanceStore:
        """This reading thread's own store handle (listings, stats), at the latest committed version."""
        store: LanceStore | None = getattr(self._local, "store", None)
        if store is None:
            store = self._local.store = self._open_reader()
        store.refresh()
        return store

    # ---- writing through the one writer --------------------------------------------------
    def require_door(self) -> WriteQueue:
        """The API's queue to the one writer, or ReadOnlyError on a read-only replica."""
        if self.door is None:
            raise ReadOnlyError(
                f"this server is a read-only replica of {self.settings.location}: it writes nothing",
                "send pushes, deletes and reindexing to the server that writes the index (the one started without --read-only)",
            )
        return self.door

    def require_pushes(self) -> PendingPushes:
        """The pushes waiting for the writer (ReadOnlyError on a replica)."""
        self.require_door()
        assert self.pushes is not None
        return self.pushes

    def queued_push(self, doc_id: str) -> str | None:
        """The path of a pushed document still waiting to be indexed, or None."""
        return self.pushes.queued(doc_id) if self.pushes is not None else None

    def delete(self, doc_id: str) -> "Future[int]":
        """Delete a document through the write queue (after any push of it queued before), without waiting; the future
        gives how many documents existed."""
        return self.require_door().submit(lambda ix: ix.delete_documents([doc_id]))

    def reindex(self) -> "Future[RunSummary]":
        """Queue a reconciliation with the folder without waiting (joining one queued already); its future gives the
        run's summary."""
        door = self.require_door()
        return door.reindex(door.writer.reconcile_job("reindex"))
