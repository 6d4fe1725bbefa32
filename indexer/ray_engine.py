"""`lodex index --ray`: a run's files read and chunked in Ray Data tasks and encoded by a pool of Ray actors (one model
each, loaded once), which write their chunk rows as fragments of the chunks table (index.ray_writes "fragments") or send
them back (the vectors too: "driver"); this process stays the one committer (scan, skips by content hash, commits)."""

import logging
import math
import pickle
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from lodex.encoders.encoder import Encoder
from lodex.indexer.chunking.chunker import Chunker
from lodex.indexer.chunking.late_chunking import LateChunking
from lodex.indexer.pipeline import Indexer
from lodex.indexer.prepared import Prepared, Skipped, Stream, unchanged_chunks
from lodex.indexer.ray_workers import EncodeActor, ReadSide, read_files
from lodex.indexer.run_state import Progress, RunSummary
from lodex.indexer.scanner import FileEntry, ScanRules
from lodex.indexer.settings import IndexSettings
from lodex.store.base import DocRecord, Store
from lodex.store.errors import ConfigError, LodexError
from lodex.store.fragments import StoredChunks, fragment_key
from lodex.store.job_log import FileRecord, JobLog

READ_CPUS = 0.5  # what each reading-and-chunking task reserves; the default actor count leaves this much to them
FILES_PER_TASK = 2  # files one reading task takes (a Ray Data block of the run's file list)
PARTS_PER_CALL = 4  # prepared files (or parts of a large one) an actor encodes per call: its model batches them by tokens
RERUN = "what was committed is kept: run `lodex index --ray` again to finish"


class ClusterError(LodexError):
    """The Ray cluster could not be reached, or the job failed beyond Ray's retries."""

    code = "cluster_error"


def import_ray() -> Any:
    """The ray module, or a ConfigError saying how to install it."""
    try:
        import ray
        import ray.data  # noqa: F401 - Ray Data is the part used
    except ImportError as exc:
        raise ConfigError("`lodex index --ray` needs Ray Data, which is not installed", "pip install lodex[cluster]") from exc
    return ray


class RayIndexer(Indexer):
    """The Indexer with its files prepared and encoded on a Ray cluster; its commits, skips and records are the local
    path's, here. `make_encoder` builds, in each actor, the encoder this process was built with."""

    def __init__(
        self,
        store: Store,
        encoder: Encoder,
        chunker: Chunker,
        rules: ScanRules,
        cfg: IndexSettings,
        make_encoder: Callable[[], Encoder],
        jobs: JobLog | None = None,
        title_prefix: bool = False,
        late: LateChunking | None = None,
        whole_vector: int = 0,
        unread: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__(
            store, encoder, chunker, rules, cfg, jobs=jobs, title_prefix=title_prefix, late=late, whole_vector=whole_vector, unread=unread
        )
        self.ray = import_ray()
        self.address, self.actors, self.cpus_per_actor = cfg.ray_address, cfg.ray_actors, cfg.ray_cpus_per_actor
        self.make_encoder = make_encoder
        self.target = store.fragment_target() if cfg.ray_writes == "fragments" else None  # where the actors write chunk rows
        self._fragments_received: set[str] = set()  # during a run: the fragments the actors wrote (`fragment_key`)

    def _items(
        self, todo: list[FileEntry], known: dict[str, DocRecord], by_content: dict[tuple[str, str], DocRecord]
    ) -> Iterator[Prepared | Skipped]:
        if not todo:
            return
        if self.target is not None:  # what a run killed before its commit left (no worker of this run has written yet)
            self.store.sweep_fragments()
        ray = self.ray
        started_here = not ray.is_initialized()
        if started_here:
            try:
                with warnings.catch_warnings():  # lancedb warns at every fork, even of a subprocess that execs at once
                    warnings.filterwarnings("ignore", "lancedb fork support", RuntimeWarning)
                    ray.init(address=self.address or None, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise ClusterError(
                    f"cannot start or reach the Ray cluster {self.address or '(local)'}: {exc}".splitlines()[0],
                    "check --ray-address (index.ray_address), or leave it empty for a local cluster",
                ) from exc
        try:
            yield from self._gathered(todo, known, by_content)
        except ray.exceptions.RayError as exc:
            raise ClusterError(f"the Ray job failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}", RERUN) from exc
        finally:
            if started_here:
                ray.shutdown()

    def _dataset(self, todo: list[FileEntry], known: dict[str, DocRecord], by_content: dict[tuple[str, str], DocRecord]) -> Any:
        """The run as a Ray dataset: files → reading tasks → encoder actors, in the order of `todo`."""
        ray = self.ray
        side = ReadSide(
            self.encoder.tokenizer_only(),
            self.chunker.max_tokens,
            self.chunker.overlap,
            self.rules,
            self.flush_tokens,
            self.retries,
            self.retry_backoff_s,
            self.late,
            self.title_prefix,
            self.reading.budget,
            self.language,
            self.chunker.rule,
            self.whole_vector,
            self.unread,
            StoredChunks(self.target) if self.target else None,
        )
        cpus = float(ray.cluster_resources().get("CPU", 1))
        actors = self.actors or max(1, int((cpus - READ_CPUS) // self.cpus_per_actor))
        rows = [{"seq": i, "file": pickle.dumps((entry, known.get(entry.path)))} for i, entry in enumerate(todo)]
        files = ray.data.from_items(rows, override_num_blocks=max(1, math.ceil(len(rows) / FILES_PER_TASK)))
        parts = files.flat_map(read_files, fn_kwargs={"side": side, "by_content": by_content}, num_cpus=READ_CPUS)
        # an actor that dies is restarted and its calls run again: Ray Data's defaults for actors (max_restarts and
        # max_task_retries -1); a reading task that dies is run again too (max_retries -1)
        actor = {"make_encoder": self.make_encoder, "title_prefix": self.title_prefix, "target": self.target}
        return parts.map_batches(
            EncodeActor,
            fn_constructor_kwargs=actor,
            batch_size=PARTS_PER_CALL,
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=actors),
            num_cpus=self.cpus_per_actor,
        )

    def _gathered(
        self, todo: list[FileEntry], known: dict[str, DocRecord], by_content: dict[tuple[str, str], DocRecord]
    ) -> Iterator[Prepared | Skipped]:
        """The encoded parts as they come back, in order (a file's parts are committed in turn, its row with the last)."""
        context = self.ray.data.DataContext.get_current()
        kept = (context.execution_options.preserve_order, context.enable_progress_bars, context.print_on_execution_start)
        context.execution_options.preserve_order = True  # a file's parts in turn; and runs go as the local path's do
        context.enable_progress_bars = context.print_on_execution_start = False  # the caller's progress callback says it
        logging.getLogger("ray.data").setLevel(logging.ERROR)  # its notes (progress bars off, deprecations) are not the user's
        started = time.monotonic()
        seen: set[tuple[int, int]] = set()
        streams: dict[str, Stream] = {}  # a large file's parts come unpickled one by one: their running totals are joined here
        try:
            for row in self._dataset(todo, known, by_content).iter_rows():
                key = (int(row["seq"]), int(row["part"]))
                if key in seen:  # never expected (Ray Data hands each output once); never committed twice either way
                    continue
                seen.add(key)
                item = pickle.loads(row["item"])
                if isinstance(item, Skipped):
                    yield item
                    continue
                item.started = started  # the worker's clock is not this one: a file's seconds count from the run's start
                if item.written is not None:
                    self._fragments_received.update(fragment_key(f) for f in item.written.fragments)
                if item.copy_of is not None:
                    yield from self.preparer().reuse(item.entry, item.content_hash, item.copy_of, item.outcome, started)
                    continue
                if item.stream is not None:
                    item.stream = streams.setdefault(item.entry.path, item.stream)
                    if item.final:
                        del streams[item.entry.path]
                self._keep_unchanged(item, known.get(item.entry.path))
                yield item
        finally:
            context.execution_options.preserve_order, context.enable_progress_bars, context.print_on_execution_start = kept

    def _process(
        self,
        todo: list[FileEntry],
        known: dict[str, DocRecord],
        by_content: dict[tuple[str, str], DocRecord],
        summary: RunSummary,
        state: Progress,
        progress: Callable[[Progress], None] | None,
        note: Callable[[FileRecord], None],
        run_id: int,
    ) -> None:
        """The local path's, then the fragments the actors wrote that no commit took (a run stopped or failed) deleted."""
        self._fragments_received = set()
        try:
            super()._process(todo, known, by_content, summary, state, progress, note, run_id)
        finally:
            if self.target is not None and self._fragments_received - self._fragments_committed:
                self.store.sweep_fragments()

    def _joins_next_commit(self) -> bool:
        """Fragments: while a commit is in flight, a flush that is due joins the next one (a commit holds what came
        meanwhile: commits/s stay what the store allows however many actors write)."""
        in_flight = self._in_flight
        return self.target is not None and in_flight is not None and not in_flight[0].done()

    def _keep_unchanged(self, item: Prepared, record: DocRecord | None) -> None:
        """An edited file keeps the stored vectors of the chunks it still holds, as on the local path (the actor encoded
        them again: it has no store to look them up in)."""
        if record is None or item.stream is not None or item.vectors is None or item.encoded is None:
            return
        kept = unchanged_chunks(self.store, record, item.texts)
        for i, vector in kept.items():
            item.vectors[i] = vector
        item.encoded = [i for i in item.encoded if i not in kept]
