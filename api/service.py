"""The running service behind `lodex serve`: one encoder, the one writer (with the watcher), query threads; or, for a
read-only replica (serve.read_only), the encoder and query threads over an index another process writes."""

import gc
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from lodex.api.factory import build_encoder, open_reader, open_store
from lodex.api.index_files import index_manifest, read_job_log
from lodex.api.push_spool import PushSpool
from lodex.api.read_side import ReadSide
from lodex.api.settings import Settings
from lodex.api.write_queue import WriteQueue
from lodex.api.write_side import WriteSide
from lodex.indexer.encoders.encoder import Encoder
from lodex.indexer.errors import Interrupted
from lodex.indexer.identity import document_id
from lodex.indexer.paths import PUSHED_PREFIX
from lodex.indexer.pipeline import Indexer
from lodex.indexer.run_state import Progress, RunSummary
from lodex.indexer.watch_service import WatchService
from lodex.indexer.writer import IndexWriter, RunHooks
from lodex.search.batcher import EmbedJob, EmbedQueue, QueryBatcher
from lodex.search.names import Mode
from lodex.search.results import SearchFilters, SearchResponse
from lodex.search.searcher import Query
from lodex.search.snapshot_source import SnapshotSource
from lodex.store.errors import ReadOnlyError
from lodex.store.job_log import FileRecord
from lodex.store.lance_store import LanceStore


class LodexService:
    """Owns the index's write side (lock, job log, encoder, writer thread fed by the watcher and the API) and the
    query threads; a read-only replica (settings.serve.read_only; `root` unused) owns no write side: no lock, no
    watcher, no writer, and its writes raise ReadOnlyError (409)."""

    def __init__(self, settings: Settings, root: Path | None, watch: bool = True, encoder: Encoder | None = None,
                 on_file: Callable[[FileRecord], None] | None = None) -> None:
        self.settings = settings
        self.read_only = settings.serve.read_only
        self.data_dir = settings.data_dir
        self.started_at = time.time()
        self.side: WriteSide | None = None
        if self.read_only:
            manifest = index_manifest(settings)  # read once (pulled from object storage first), before the encoder
            self.encoder = encoder or build_encoder(settings, manifest=manifest)
            open_store(settings, self.encoder, settings.data_dir, create=False, manifest=manifest)  # an index there, for this encoder
            self.jobs = read_job_log(settings, manifest)
            self.root = Path(self.jobs.root or "")
        else:
            assert root is not None, "a writing service mirrors a folder"
            # optimize_apart: its seconds of compaction kept off the query threads' runtime
            self.side = WriteSide(settings, root, encoder=encoder, long_lived=True, optimize_apart=True)
            api = settings.api
            self.spool = PushSpool(self.data_dir, api.max_queued_pushes, api.max_queued_push_mb * 2**20)
            self.jobs, self.encoder, self.indexer, self.root = self.side.jobs, self.side.encoder, self.side.indexer, root
        try:
            self.encoder.embed(["warm-up"], kind="query")  # the query path loaded (exported at the first start) before any request
            # what loading made (the modules, the models: ~0.5M objects, there for good) left out of the collector's
            # full passes: each stopped every thread for ~0.3 s, a few times a minute while serving 1M chunks
            gc.freeze()
            # one set of snapshots for every query thread, each new version prepared in the background from the last
            # (and by the writer after each of its requests, before the requester hears back); their vector index is
            # the process's only one: the writer keeps none and has them save theirs
            self.snapshots = SnapshotSource(open_reader(settings, self.encoder.dim)).start()
            if self.side is not None:  # a replica writes no index file: its snapshots keep theirs to themselves
                self.snapshots.keep_index_for(self.side.store)
        except BaseException:
            self._release()
            raise
        self.encoded_tokens = 0
        self._rate = 0.0
        self._files_left = 0  # files the current indexing run has not reached yet
        self._on_file = on_file
        hooks = RunHooks(on_file=self._file_done, progress=self._progress, applied=self._caught_up)
        self.watch: WatchService | None = self.side.watch(hooks) if self.side and watch else None
        self.writer: IndexWriter | None = self.watch.writer if self.watch else self.side.writer(hooks) if self.side else None
        if self.writer is not None:
            self.snapshots.follow_writer(self.writer.applying_for)  # it refreshes after each request: its short ones' versions are left to it
        self._local = threading.local()
        self._closed = False
        self._queued: dict[str, tuple[str, int]] = {}  # pushed documents waiting: id → (path, pushes pending)
        self._queued_lock = threading.Lock()
        embeds = EmbedQueue(lambda texts, kind: (self.encoder.embed(texts, kind=kind), sum(self.encoder.input_tokens(texts, kind))),
                            settings.api.max_queued_embed_inputs, settings.api.embed_slice_inputs)
        self.batcher = QueryBatcher(lambda: ReadSide(settings, self.encoder, open_reader(settings, self.encoder.dim), self.snapshots).searcher,
                                    lambda texts: self.encoder.embed(texts, kind="query"), workers=settings.api.query_threads, embeds=embeds)
        self.queries = ThreadPoolExecutor(2, thread_name_prefix="lodex-read")
        # the API's writes: kept on disk (a push) on these threads, then queued without waiting for the writer
        self.writes = ThreadPoolExecutor(4, thread_name_prefix="lodex-push")
        self.door = WriteQueue(self.writer, settings.api.max_queued_pushes) if self.writer else None

    # ---- lifecycle -----------------------------------------------------------------------
    def start(self) -> "LodexService":
        """Start the writer (and the watcher, which queues the startup reconciliation)."""
        if self.writer is None:
            return self
        if self.watch:
            self.watch.start()  # its startup reconciliation first collects what an interrupted run left
        else:
            self.writer.start()
            self.writer.submit(lambda ix: ix.store.collect_garbage())
        kept = self.spool.pending()  # pushes accepted before a stop or a crash, in order: listed, not read, so that
        for path, doc_id in kept:  # a large spool never delays listening
            self._queue_push(path, doc_id)
        if kept:  # the names of those waiting (GET /documents/{id} answers 202 with the path), learnt in the background
            threading.Thread(target=self._learn_paths, args=(kept,), name="lodex-spool-names", daemon=True).start()
        return self

    def _learn_paths(self, kept: list[tuple[Path, str | None]]) -> None:
        for path, doc_id in kept:
            if self._closed:
                return
            with self._queued_lock:
                waiting = doc_id in self._queued and not self._queued[doc_id][0]
            request = self.spool.load(path) if waiting else None
            if request is not None and doc_id is not None:
                with self._queued_lock:
                    if doc_id in self._queued and not self._queued[doc_id][0]:
                        self._queued[doc_id] = (PUSHED_PREFIX + request["name"], self._queued[doc_id][1])

    def halt(self) -> None:
        """Begin stopping (at SIGTERM, before the server drains its requests): the writer stops at its next check and
        queued changes are cancelled, so requests waiting on them answer at once (pushes stay on disk)."""
        if self.door is not None:
            self.door.halt()
        if self.writer is not None:
            self.writer.halt()

    def close(self) -> None:
        """Stop watching, apply what is queued, release the index (once; later calls do nothing)."""
        if self._closed:
            return
        self._closed = True
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
        self._release()

    def _release(self) -> None:
        """Release the write side (lock, job log), or a replica's job log."""
        if self.side is not None:
            self.side.close()
        else:
            self.jobs.close()

    # ---- writer-side callbacks -----------------------------------------------------------
    def _file_done(self, record: FileRecord) -> None:
        self.encoded_tokens += record.tokens
        if self._on_file:
            self._on_file(record)

    def _caught_up(self) -> None:
        self.snapshots.after_write()  # and the index saved, when the writer asked for it

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
        store = getattr(self._local, "store", None)
        if store is None:
            store = self._local.store = open_reader(self.settings, self.encoder.dim)
        store.refresh()
        return store

    def counts(self) -> dict[str, int]:
        """Documents and chunks in the index now."""
        return self.reader().counts()

    def language_mix(self) -> dict[str, int]:
        """Documents per language (ISO 639-1), most first."""
        return self.reader().language_mix()

    # ---- writing through the one writer --------------------------------------------------
    def require_writer(self) -> IndexWriter:
        """The one writer, or ReadOnlyError on a read-only replica."""
        if self.writer is None:
            raise ReadOnlyError(f"this server is a read-only replica of {self.settings.location}: it writes nothing",
                                "send pushes, deletes and reindexing to the server that writes the index (the one started without --read-only)")
        return self.writer

    def push(self, name: str, text: str, title: str, metadata: dict[str, Any]) -> "tuple[str, Future[FileRecord]]":
        """Keep a pushed text document on disk, then queue it for the writer without waiting; returns its id and the
        future of its record (while it waits, `queued_push` knows it; if lodex stops first, the next start indexes
        it). Blocks on the disk (call it off the event loop); raises BusyError when the spool is full."""
        door = self.require_door()
        request = {"name": name, "text": text, "title": title, "metadata": json.dumps(metadata, sort_keys=True)}
        doc_id = document_id(PUSHED_PREFIX + name)
        kept = self.spool.add(request, doc_id)
        with self._queued_lock:
            self._queued[doc_id] = (PUSHED_PREFIX + name, self._queued.get(doc_id, ("", 0))[1])
        return doc_id, self._queue_push(kept, doc_id, door)

    def _queue_push(self, kept: Path, doc_id: str | None, door: "WriteQueue | None" = None) -> "Future[FileRecord]":
        """Queue a kept push on the writer (never refused: it is within the spool's bound already)."""
        if doc_id is not None:
            with self._queued_lock:
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

        done = (door or self.require_door()).submit(apply, bounded=False)
        if doc_id is not None:
            done.add_done_callback(lambda future: self._pushed(doc_id, future))
        return done

    def _pushed(self, doc_id: str, future: "Future[FileRecord]") -> None:
        with self._queued_lock:
            path, left = self._queued.get(doc_id, ("", 1))
            if left > 1:
                self._queued[doc_id] = (path, left - 1)
            else:
                self._queued.pop(doc_id, None)
        if not future.cancelled() and future.exception() is not None and not isinstance(future.exception(), Interrupted) and self._on_file:
            self._on_file(FileRecord(path or "@api/?", "failed", error=str(future.exception())))

    def queued_push(self, doc_id: str) -> str | None:
        """The path of a pushed document still waiting to be indexed, or None."""
        with self._queued_lock:
            entry = self._queued.get(doc_id)
        return entry[0] if entry else None

    def require_door(self) -> WriteQueue:
        """The API's queue to the writer, or ReadOnlyError on a read-only replica."""
        self.require_writer()
        assert self.door is not None
        return self.door

    def delete(self, doc_id: str) -> "Future[int]":
        """Delete a pushed document through the writer queue (after any push of it queued before), without waiting;
        the future gives how many documents existed."""
        return self.require_door().submit(lambda ix: ix.delete_documents([doc_id]))

    def reindex(self) -> "Future[RunSummary]":
        """Queue a reconciliation with the folder without waiting (joining one queued already); its future gives the
        run's summary."""
        return self.require_door().reindex(self.require_writer().reconcile_job("reindex"))
