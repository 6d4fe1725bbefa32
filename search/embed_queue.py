"""Texts to embed (the /v1/embeddings door) on the query encoder's thread: accepted up to a bound of waiting texts, then
embedded a slice at a time, jobs taking turns, so that a search waits behind one slice at most, never a whole batch."""

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lodex.store.errors import BusyError

Embed = Callable[[list[str], str], tuple[np.ndarray, int]]  # texts, kind → (vectors, tokens the model read)
RETRY_AFTER_S = 1.0  # what a refused client is told to wait: a slice takes a fraction of a second


@dataclass(frozen=True)
class EmbedJob:
    """Texts to embed as queries or as documents (kind), answered with their vectors and their model tokens."""

    texts: list[str]
    kind: str = "query"


@dataclass
class _Progress:
    """A job being embedded: its future (left pending until the last slice, so that a caller that goes away can still
    cancel it), the vectors of its slices so far and their tokens."""

    job: EmbedJob
    future: "Future[Any]"
    done: int = 0
    parts: list[np.ndarray] = field(default_factory=list)
    tokens: int = 0


class EmbedQueue:
    """Embedding jobs of the encoding thread: `admit` (any thread) counts a job's texts in, or refuses it past
    `max_inputs` texts waiting in all (a job alone is always taken); `start` and `run_slice` (the encoding thread
    alone) embed `slice_inputs` texts of one job at a time, then hand the turn to the next job."""

    def __init__(self, embed: Embed, max_inputs: int, slice_inputs: int) -> None:
        self.embed = embed
        self.max_inputs = max_inputs
        self.slice_inputs = slice_inputs
        self.queued = 0  # texts admitted and not answered yet
        self._lock = threading.Lock()
        self._running: deque[_Progress] = deque()

    def admit(self, job: EmbedJob) -> None:
        """Count `job`'s texts as waiting, or raise BusyError (429, Retry-After) when they would pass the bound."""
        with self._lock:
            if self.queued and self.queued + len(job.texts) > self.max_inputs:
                raise BusyError(
                    f"{self.queued} texts are waiting to be embedded, and {len(job.texts)} more would pass the "
                    f"{self.max_inputs} this server queues (api.max_queued_embed_inputs)",
                    "send the request again after its Retry-After, or in smaller batches",
                    retry_after=RETRY_AFTER_S,
                )
            self.queued += len(job.texts)

    def start(self, job: EmbedJob, future: "Future[Any]") -> None:
        """Take an admitted job in turn (on the encoding thread)."""
        self._running.append(_Progress(job, future))

    @property
    def pending(self) -> bool:
        """Whether a job has slices left to embed."""
        return bool(self._running)

    def run_slice(self) -> None:
        """Embed the next slice of the job whose turn it is; answer the job after its last slice, or at its first error;
        drop a job its caller cancelled."""
        progress = self._running.popleft()
        if progress.future.cancelled():
            self._release(progress)
            return
        texts = progress.job.texts[progress.done : progress.done + self.slice_inputs]
        try:
            vectors, tokens = self.embed(texts, progress.job.kind)
        except Exception as exc:  # noqa: BLE001 — for this job's caller alone
            self._release(progress)
            if progress.future.set_running_or_notify_cancel():
                progress.future.set_exception(exc)
            return
        progress.parts.append(vectors)
        progress.tokens += tokens
        progress.done += len(texts)
        if progress.done < len(progress.job.texts):
            self._running.append(progress)  # the next job's turn
            return
        self._release(progress)
        if progress.future.set_running_or_notify_cancel():
            progress.future.set_result((np.concatenate(progress.parts), progress.tokens))

    def _release(self, progress: _Progress) -> None:
        with self._lock:
            self.queued -= len(progress.job.texts)
