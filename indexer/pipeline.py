"""The indexing run: reconcile a folder (or some of its paths) with the store, encode what changed, commit in order."""

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from lodex.encoders.encoder import Encoder
from lodex.encoders.window import Window
from lodex.indexer.chunking.chunker import Chunk, Chunker
from lodex.indexer.chunking.late_chunking import LateChunking
from lodex.indexer.encoding_jobs import TitleLead, WholeText, WindowPlanner
from lodex.indexer.errors import Interrupted
from lodex.indexer.flushing import Flusher
from lodex.indexer.identity import content_hash, document_id
from lodex.indexer.paths import PUSHED_PREFIX
from lodex.indexer.preparation import Preparer
from lodex.indexer.prepared import Prepared, Skipped, chunk_rows, shifted, unchanged_chunks
from lodex.indexer.readers.decoding import OffsetMap, clean_mapped
from lodex.indexer.readers.read_budget import ReadBudget, ReadPool
from lodex.indexer.run_state import Progress, RunSummary, unchanged_file
from lodex.indexer.scanner import FileEntry, ScanRules, scan, scan_paths, under
from lodex.indexer.settings import IndexSettings
from lodex.store.base import DocRecord, Store
from lodex.store.job_log import FileRecord, JobLog

# A run's first flush is this share of flush_tokens, so that the encoder starts once a few files are read instead of
# after a whole flush's worth of reading (0.5-1.5 s here at the default 131,072 tokens, with both cores otherwise idle).
FIRST_FLUSH_SHARE = 8


class Indexer(Flusher):
    """Brings the store in line with a folder; the only writer of the store while it runs."""

    def __init__(
        self,
        store: Store,
        encoder: Encoder,
        chunker: Chunker,
        rules: ScanRules,
        cfg: IndexSettings | None = None,
        jobs: JobLog | None = None,
        title_prefix: bool = False,
        late: LateChunking | None = None,
        optimize_every_s: float = 0.0,
        whole_vector: int = 0,
        unread: frozenset[str] = frozenset(),
    ) -> None:
        """`cfg`: the [index] settings (flush_tokens, retries, retry_backoff_s; their defaults when None); `late`: encode
        documents read whole in windows and pool each chunk from its span (late chunking), or each chunk alone (None);
        `optimize_every_s` > 0 (a serving writer's): optimize during runs too, at most this often; `whole_vector`
        > 0 (chunking.document_vector "whole"): a document of two or more chunks that fits an input of this many tokens
        gets its own vector from its text encoded whole, not its chunks' mean (0: every document its chunks' mean),
        unless it is in a language of `unread` (a script the model cannot read: `model_languages.unread_languages`)."""
        cfg = cfg or IndexSettings()
        super().__init__(store, encoder, TitleLead(title_prefix), jobs, optimize_every_s)
        self.title_prefix = title_prefix
        self.late = late
        self.whole_vector, self.unread = whole_vector, unread
        self._whole = WholeText(encoder, self._lead, whole_vector, unread) if whole_vector else None
        self.chunker = chunker
        self.rules = rules
        self.flush_tokens = max(cfg.flush_tokens, encoder.group_tokens)  # a layer-streamed encoder wants its whole group at once
        self.retries, self.retry_backoff_s = cfg.retries, cfg.retry_backoff_s
        self.reading = ReadPool(ReadBudget(cfg.max_seconds_per_file, cfg.max_memory_mb_per_file, cfg.max_memory_mb))  # files read whole
        self.language = cfg.language.lower() or None  # every document's language, when set; else each one detected

    def preparer(self) -> Preparer:
        """What prepares the files of a run, with this indexer's settings as they are now."""
        return Preparer(
            self.store,
            self.chunker,
            self.rules,
            self.cancel,
            self.flush_tokens,
            self.retries,
            self.retry_backoff_s,
            self.plan_windows if self.late else None,
            self.reading,
            self.language,
            self._whole,
        )

    def plan_windows(self, text: str, chunks: list[Chunk], title: str, spans: np.ndarray | None = None) -> list[Window] | None:
        """Late chunking: the windows a document's chunks (offsets in its clean `text`, whose token spans are `spans`
        when known) are encoded in (None: each chunk alone)."""
        assert self.late is not None
        return WindowPlanner(self.encoder, self.late, self.chunker.max_tokens, self._lead)(text, chunks, title, spans)

    def run(
        self,
        root: Path,
        only: list[str] | None = None,
        progress: Callable[[Progress], None] | None = None,
        on_file: Callable[[FileRecord], None] | None = None,
        kind: str = "index",
    ) -> RunSummary:
        """Index new and changed files under `root` (or only under the `only` paths, as the index names
        them: path_key), drop deleted ones, re-use vectors of moved or copied content; every file processed gets a record."""
        started = time.monotonic()
        summary, records = RunSummary(), []
        run_id = self.jobs.start_run(kind) if self.jobs else 0

        def note(record: FileRecord) -> None:
            records.append(record)
            if on_file:
                on_file(record)

        self.store.before_run()
        found = scan(root, self.rules) if only is None else scan_paths(root, only, self.rules)
        entries, refused = found.files, found.refused
        summary.skipped = dict(sorted(found.skipped.items(), key=lambda kv: (-kv[1], kv[0])))
        known = self.store.document_records()
        in_scope = {p: r for p, r in known.items() if not p.startswith(PUSHED_PREFIX) and (only is None or under(p, only))}
        for path, reason in refused.items():
            summary.failures[path] = reason
            note(FileRecord(path, "failed", error=reason))
        todo = []
        for entry in entries:
            if unchanged_file(known.get(entry.path), entry):
                summary.unchanged += 1
                note(FileRecord(entry.path, "unchanged"))
            else:
                todo.append(entry)
        by_content = {(r.content_hash, r.format): r for r in known.values()}
        summary.phases["scan"] = round(time.monotonic() - started, 3)
        try:
            self._process(todo, known, by_content, summary, Progress(files_total=len(todo)), progress, note, run_id)
        except Interrupted:
            summary.interrupted = True
        if summary.tokens:
            self.encoder.release_memory()  # before compaction and the index save, which need memory too
        with summary.phase("finish"):
            if not summary.interrupted:
                self._finish(summary, {e.path for e in entries}, in_scope, only is None, note)
        summary.failed = len(summary.failures)
        summary.seconds = round(time.monotonic() - started, 3)
        if self.jobs:
            self.jobs.record(run_id, [r for r in records if r.status in ("unchanged", "failed", "deleted")])
            self.jobs.finish_run(run_id, {k: v for k, v in summary.to_dict().items() if k != "failures"})
        return summary

    def _finish(self, summary: RunSummary, scanned: set[str], in_scope: dict[str, DocRecord], full: bool, note: Callable[[FileRecord], None]) -> None:
        """Drop the documents whose files are gone (or failed), then bring the store's indexes up to date."""
        gone = [p for p in in_scope if p not in scanned or p in summary.failures]
        self.store.commit(None, [], [in_scope[p].id for p in gone])
        for path in gone:
            if path not in summary.failures:
                summary.deleted += 1
                note(FileRecord(path, "deleted"))
        self.store.after_run(full=full)

    def index_text(self, name: str, text: str, title: str = "", metadata: str = "{}") -> FileRecord:
        """Index a document pushed as text (not a file of the folder) under PUSHED_PREFIX + name."""
        path = PUSHED_PREFIX + name
        data = text.encode("utf-8")
        digest = content_hash(data)
        record = self.store.document_records().get(path)
        started = time.monotonic()
        if record is not None and record.content_hash == digest:
            if record.metadata == metadata and record.title == (title or name):
                return FileRecord(path, "unchanged", chunks=record.chunk_count)
            # same text, new title or metadata: update the row, keep its chunks (never commit them twice)
            self.store.set_document_fields(record.id, title=title or name, metadata=metadata)
            return FileRecord(path, "indexed", chunks=record.chunk_count)
        offsets = OffsetMap()  # cleaned like a file's text (invisible characters, CRs); offsets stay in the text pushed
        clean = clean_mapped(text, offsets)
        chunks = self.chunker.chunk(clean)
        preparer = self.preparer()
        rows = chunk_rows(shifted(chunks, offsets), language=preparer.language_of(clean))
        entry = FileEntry(path, Path(path), len(data), time.time())
        prepared = Prepared(
            entry,
            document_id(path),
            digest,
            "text",
            title or name,
            rows["text"],
            rows,
            None,
            "updated" if record else "added",
            started,
            metadata=metadata,
            windows=self.plan_windows(clean, chunks, title or name) if self.late else None,
        )
        preparer.plan_whole(prepared, clean, chunks)
        if record is not None:
            prepared.known = unchanged_chunks(self.store, record, rows["text"])
        records: list[FileRecord] = []
        self._flush([prepared], RunSummary(), Progress(1), records.append, self.jobs.start_run("api") if self.jobs else 0)
        if not records:
            raise Interrupted()
        self.store.after_small_change()
        return records[0]

    def delete_documents(self, doc_ids: list[str]) -> int:
        """Remove documents (and their chunks) by id; returns how many existed."""
        existing = [r.id for r in self.store.document_records().values() if r.id in set(doc_ids)]
        self.store.commit(None, [], existing)
        self.store.after_removal()
        return len(existing)

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
        """Prepare, encode and commit the files to do; each commit runs in the background while the next files encode."""
        self._progress, self._fragments_committed = progress, set()
        with ThreadPoolExecutor(1, thread_name_prefix="lodex-commit") as self._committer:
            try:
                self._prepare_and_flush(todo, known, by_content, summary, state, progress, note, run_id)
            finally:
                self._settle()  # the last commit done (or its error raised) before the run goes on or ends
                self._committer = self._progress = None

    def _prepare_and_flush(
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
        pending: list[Prepared] = []
        pending_tokens = 0
        limit = min(self.flush_tokens, max(self.flush_tokens // FIRST_FLUSH_SHARE, self.encoder.group_tokens))
        touched: list[FileEntry] = []
        dropped: set[str] = set()  # files that failed midway: their later parts are ignored

        def fail(entry: FileEntry, error: str, attempts: int = 1) -> None:
            dropped.add(entry.path)
            summary.failures[entry.path] = error
            note(FileRecord(entry.path, "failed", error=error, attempts=attempts))

        for item in summary.timed(iter(self._items(todo, known, by_content)), "read"):
            if self.cancel.is_set():
                raise Interrupted()
            if item.entry.path in dropped:
                continue
            state.files_done += 0 if isinstance(item, Prepared) else 1  # a file read is done once committed (or failed)
            state.path = item.entry.path
            if isinstance(item, Skipped) and item.error:
                pending = [p for p in pending if p.entry is not item.entry]  # parts of a file that failed midway
                fail(item.entry, item.error, item.attempts)
            elif isinstance(item, Skipped):
                summary.unchanged += 1
                touched.append(item.entry)
                note(FileRecord(item.entry.path, "unchanged"))
            else:
                pending.append(item)
                pending_tokens += sum(item.rows["token_count"][i] for i in item.to_encode())
            if pending and pending_tokens >= limit and not self._joins_next_commit():
                self._flush(pending, summary, state, note, run_id, fail)
                pending, pending_tokens, limit = [], 0, self.flush_tokens
            if progress:
                progress(state)
        if pending:
            self._flush(pending, summary, state, note, run_id, fail)
            if progress:
                progress(state)
        with summary.phase("commit"):
            self._settle()
        if progress:
            progress(state)
        self.store.touch_documents({document_id(entry.path): (entry.size, entry.mtime) for entry in touched})

    def _joins_next_commit(self) -> bool:
        """Whether a flush that is due waits to join the next one (commits of fragments, while one is in flight)."""
        return False

    def _items(
        self, todo: list[FileEntry], known: dict[str, DocRecord], by_content: dict[tuple[str, str], DocRecord]
    ) -> Iterator[Prepared | Skipped]:
        """The files to do, prepared (read and chunked, or matched to stored vectors) on a reader thread; the Ray engine
        gives them encoded too (lodex index --ray)."""
        return self.preparer().prepared(todo, known, by_content)
