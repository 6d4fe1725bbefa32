"""A flush's encoding phase: the chunks its files need, encoded a group of encoder batches at a time, with the checks
between groups (asked to stop; files changed or gone meanwhile)."""

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from lodex.encoders.encoder import Encoder
from lodex.indexer.encoding_jobs import Job, TitleLead, encoder_jobs, job_groups, run_jobs
from lodex.indexer.errors import Interrupted
from lodex.indexer.prepared import Prepared
from lodex.indexer.run_state import Progress, moved_on
from lodex.indexer.scanner import FileEntry

# Between two groups of encoder batches (encoding_jobs.job_groups), at most this often, the run checks that the files
# being encoded did not change or vanish (those are dropped, not finished); it checks that it was not asked to stop at each.
CHECK_EVERY_S = 0.5


def encode_pending(
    encoder: Encoder,
    lead: TitleLead,
    dim: int,
    cancel: threading.Event,
    pending: list[Prepared],
    fail: Callable[[FileEntry, str], None] | None,
    state: Progress,
) -> list[Prepared]:
    """Encode the chunks the pending files need (their vectors filled in place), a group of encoder batches at a
    time; between groups, stop when `cancel` is set (Interrupted) and drop files that changed or vanished meanwhile
    (they are failed through `fail`). Returns the files still wanted."""
    fresh = [p for p in pending if p.vectors is None and p.written is None]  # (written: encoded and stored by an actor)
    jobs = encoder_jobs(fresh, encoder, lead)
    for p in fresh:
        vectors = p.vectors = np.zeros((len(p.texts), dim), dtype=np.float32)
        for i, vector in p.known.items():
            vectors[i] = vector
    gone: set[str] = set()  # paths of files dropped meanwhile

    def drop_moved() -> None:
        for p in pending:
            reason = None if p.entry.path in gone else moved_on(p.entry)
            if reason and fail is not None:
                gone.add(p.entry.path)
                fail(p.entry, reason)
                state.files_done += 1

    checked = time.monotonic()
    for _ in run_groups(encoder, lead, jobs, gone):
        if cancel.is_set():
            raise Interrupted()
        if fail is not None and time.monotonic() - checked >= CHECK_EVERY_S:
            checked = time.monotonic()
            drop_moved()
    if fail is not None:
        drop_moved()  # once more before the commit
    return [p for p in pending if p.entry.path not in gone]


def run_groups(encoder: Encoder, lead: TitleLead, jobs: list[Job], gone: set[str]) -> Iterator[None]:
    """Encode the jobs a group at a time (leaving out the files in `gone` when a group starts), yielding after each
    group. An encoder whose calls run side by side (parallel_calls > 1: one session per core) is kept that many
    groups ahead, so that a core done with a group's last batches starts the next group's instead of waiting."""

    def run(group: list[Job]) -> None:
        run_jobs(encoder, lead, [job for job in group if job.prepared.entry.path not in gone])

    if encoder.parallel_calls <= 1:
        for group in job_groups(encoder, jobs):
            run(group)
            yield
        return
    ahead: deque[Future[None]] = deque()
    with ThreadPoolExecutor(encoder.parallel_calls, thread_name_prefix="lodex-group") as groups:
        try:
            for group in job_groups(encoder, jobs):
                ahead.append(groups.submit(run, group))
                if len(ahead) >= encoder.parallel_calls:
                    ahead.popleft().result()
                    yield
            while ahead:
                ahead.popleft().result()
                yield
        finally:  # stopped or failed: the groups not yet started are not run
            for future in ahead:
                future.cancel()
