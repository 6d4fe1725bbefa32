"""A run's flushes: the pending files' chunks encoded, their rows committed in order (each commit in the background
while the next flush encodes), then their files recorded; the base of the Indexer."""

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from lodex.encoders.encoder import Encoder
from lodex.indexer.encode_phase import encode_pending
from lodex.indexer.encoding_jobs import TitleLead
from lodex.indexer.flush_rows import flush_rows
from lodex.indexer.prepared import Prepared
from lodex.indexer.run_state import Progress, RunSummary
from lodex.indexer.scanner import FileEntry
from lodex.store.base import Store
from lodex.store.job_log import FileRecord, FileStatus, JobLog


class Flusher:
    """Encodes and commits a run's pending files, one flush at a time, its commits in order."""

    def __init__(self, store: Store, encoder: Encoder, lead: TitleLead, jobs: JobLog | None, optimize_every_s: float) -> None:
        """`lead`: the title put before each chunk's text, or none; `jobs`: where the files committed are recorded (None:
        nowhere); `optimize_every_s` > 0: optimize after commits too, at most this often."""
        self.store = store
        self.encoder = encoder
        self._lead = lead
        self.jobs = jobs
        self.optimize_every_s = optimize_every_s
        self.cancel = threading.Event()  # set to stop a run at its next check (files, encoder groups); see Interrupted
        self.background_commits = True  # commit a flush while the next one encodes (False: commit in turn, as a test may want)
        self._committer: ThreadPoolExecutor | None = None  # during a run: commits in the background, one at a time, in order
        self._in_flight: tuple[Future[None], Callable[[], None]] | None = None  # the commit running, and what to do once it is done
        self._progress: Callable[[Progress], None] | None = None  # the run's progress callback (told as files are committed)
        self._fragments_committed: set[str] = set()  # during a run: the chunk fragments (written by Ray actors) committed

    def _flush(
        self,
        pending: list[Prepared],
        summary: RunSummary,
        state: Progress,
        note: Callable[[FileRecord], None],
        run_id: int,
        fail: Callable[[FileEntry, str], None] | None = None,
    ) -> None:
        """Encode the pending files' chunks, then commit chunks and documents, then record them."""
        fresh_ids = {id(p) for p in pending if p.vectors is None or p.encoded is not None}
        wanted_before = {id(p): p.to_encode() for p in pending}
        with summary.phase("encode"):
            pending = encode_pending(self.encoder, self._lead, self.store.dim, self.cancel, pending, fail, state)
        if not pending:
            return
        encoded_tokens = {
            key: sum(p.rows["token_count"][i] for i in wanted_before[key]) + (p.whole_tokens if p.whole is not None else 0)
            for p in pending
            if (key := id(p)) in fresh_ids
        }
        rows = flush_rows(pending, self.store.dim, encoded_tokens, summary, state, self._fragments_committed)
        finished = rows.finished

        def commit() -> None:
            if rows.fragments:  # written by Ray actors: one commit of them all, with the rows made here
                self.store.commit_fragments(rows.fragments, rows.owners, rows.documents, [], rows.chunks)
            else:
                self.store.commit(rows.chunks, rows.documents, [])
            self.store.after_commit(self.optimize_every_s)  # a long run while serving: keep keyword search on the full-text index

        def committed() -> None:  # on this thread: the job log and the callbacks stay on the indexing thread
            done = time.monotonic()
            records = []
            for p, total in finished:
                summary.count(p.outcome)
                state.files_done += 1
                if self._progress:
                    self._progress(state)
                status: FileStatus = "reused" if p.outcome == "reused" or id(p) not in fresh_ids else "indexed"
                record = FileRecord(p.entry.path, status, round(done - p.started, 3), total.chunks, total.encoded, attempts=p.attempts)
                records.append(record)
                note(record)
            if self.jobs:
                self.jobs.record(run_id, records)

        with summary.phase("commit"):
            self._settle()  # commits stay in order: the one before this is done first
            if self._committer is None or not self.background_commits:
                commit()
                committed()
        if self._committer is not None and self.background_commits:
            self._in_flight = (self._committer.submit(commit), committed)

    def _settle(self) -> None:
        """Wait for the commit in the background (raising its error), then record its files."""
        if self._in_flight is not None:
            future, committed = self._in_flight
            self._in_flight = None
            future.result()
            committed()
