"""What the encoder runs for a flush: each chunk that needs a vector alone, or (late chunking) each window holding
such a chunk, whose chunks all take their vectors from it; and a short document's whole text, for its own vector."""

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from lodex.encoders.encoder import Encoder
from lodex.encoders.window import Window
from lodex.indexer.chunking.chunker import Chunk, token_spans_of
from lodex.indexer.chunking.late_chunking import LateChunking, plan_windows
from lodex.indexer.prepared import Prepared

Lead = Callable[[str], str]  # a document's title → the text put before its chunks when encoded


@dataclass(frozen=True)
class TitleLead:
    """What goes before a document's chunk text when encoded (besides the encoder's document prefix): its title
    (chunking.title_prefix) or nothing; picklable, so that a Ray actor leads its chunks as the writer does."""

    title_prefix: bool

    def __call__(self, title: str) -> str:
        return f"{title}\n\n" if self.title_prefix else ""


@dataclass(frozen=True)
class WindowPlanner:
    """Late chunking: the windows a document's chunks (offsets in its clean text) are encoded in; `encoder` may be the
    tokenizer-only stand-in a Ray task holds (Encoder.tokenizer_only)."""

    encoder: Encoder
    late: LateChunking
    chunk_tokens: int  # the chunker's max_tokens
    lead: Lead

    def __call__(self, text: str, chunks: list[Chunk], title: str, spans: np.ndarray | None = None) -> list[Window] | None:
        """The windows, or None where the document's chunks are encoded alone (late.long_only: it fits one window)."""
        encoder, late = self.encoder, self.late
        lead = encoder.document_prefix + self.lead(title)
        budget = late.window_tokens - encoder.special_tokens - (len(encoder.token_spans([lead])[0]) if lead else 0)
        if late.long_only:
            spans = token_spans_of(text, encoder.token_spans) if spans is None else spans
            if len(spans) <= budget:
                return None
        pack = late.window_tokens > self.chunk_tokens + encoder.special_tokens  # else a window per chunk
        return plan_windows(text, chunks, encoder.token_spans, budget, late.margin if pack else 0, pack, spans)


@dataclass(frozen=True)
class WholeText:
    """chunking.document_vector = "whole": the text a document cut in two or more chunks is encoded as, whole, for its
    own vector (the mean-vector half of blend ranking) when it fits one input of `input_tokens` (special tokens and
    lead included, within the model's); `encoder` may be the tokenizer-only stand-in a Ray task holds. A longer
    document (or a streamed one) keeps its chunks' mean, as does one in a language of `unread` (a script the model
    cannot read: its vector would be near random either way, and hybrid search answers it by keywords alone)."""

    encoder: Encoder
    lead: Lead
    input_tokens: int
    unread: frozenset[str] = frozenset()

    def __call__(self, text: str, chunks: list[Chunk], title: str, language: str | None = None) -> tuple[str, int] | None:
        """(the text from its first chunk's start to its last one's end, its tokens), or None: its chunks' mean."""
        if len(chunks) < 2 or language in self.unread:
            return None  # one chunk: its vector is the whole text's already
        encoder = self.encoder
        lead = encoder.document_prefix + self.lead(title)
        budget = min(self.input_tokens, encoder.max_length) - encoder.special_tokens - (len(encoder.token_spans([lead])[0]) if lead else 0)
        start, end = chunks[0].char_start, chunks[-1].char_end
        if end - start > budget * MAX_CHARS_PER_TOKEN:
            return None  # far too long to fit: not tokenized again
        tokens = len(token_spans_of(text[start:end], encoder.token_spans))
        return (text[start:end], tokens) if 0 < tokens <= budget else None


# A text this many characters a token or more (a long URL, a hash) is rare: a longer span is not counted, it cannot fit.
MAX_CHARS_PER_TOKEN = 32


@dataclass
class Job:
    """One input of the encoder: a chunk alone, a window (late chunking) and the chunks pooled from it, or (chunks
    empty, no window) a document's whole text for its own vector (Prepared.whole)."""

    prepared: Prepared
    chunks: list[int]
    window: Window | None
    length: int  # model tokens, special tokens and lead included


def encoder_jobs(fresh: list[Prepared], encoder: Encoder, lead: Lead) -> list[Job]:
    """The jobs that give these files' chunks the vectors they lack (those re-used from the store are not asked for;
    a window is run again when any of its chunks is new, and all its chunks then get its vectors)."""
    jobs: list[Job] = []
    for p in fresh:
        need = set(p.to_encode())
        whole = p.whole is not None and p.doc_vector is None
        prefix = lead(p.title) if need or whole else ""
        extra = (len(encoder.token_spans([prefix])[0]) if prefix else 0) + encoder.special_tokens  # lead and special tokens
        if whole:
            jobs.append(Job(p, [], None, min(p.whole_tokens + extra, encoder.max_length)))
        if p.windows is not None:
            jobs += [Job(p, w.chunks, w, w.tokens + extra) for w in p.windows if need.intersection(w.chunks)]
        else:
            jobs += [Job(p, [i], None, min(p.rows["token_count"][i] + extra, encoder.max_length)) for i in sorted(need)]
    return jobs


# Chunks are encoded in groups of about this many encoder batches; between two groups the run checks that it was not
# asked to stop and that the files being encoded did not change or vanish.
GROUP_BATCHES = 2


def job_groups(encoder: Encoder, jobs: list[Job]) -> Iterator[list[Job]]:
    """A flush's jobs in groups of whole encoder batches, cut from the encoder's own batching of them all (longest
    first; cut anywhere else, each group would end in a small, slow batch): GROUP_BATCHES batches a group, or as many
    as the encoder's group_tokens takes (fast mode's small batches, a layer-streamed model)."""
    group: list[Job] = []
    batches = padded = 0
    for batch in encoder.plan_batches([job.length for job in jobs]):
        group += [jobs[i] for i in batch]
        batches, padded = batches + 1, padded + len(batch) * jobs[batch[0]].length
        if batches >= GROUP_BATCHES and padded >= encoder.group_tokens:
            yield group
            group, batches, padded = [], 0, 0
    if group:
        yield group


def run_jobs(encoder: Encoder, lead: Lead, group: list[Job]) -> None:
    """Encode a group of jobs and put their vectors in their files' `vectors` (set beforehand)."""
    single = [job for job in group if job.window is None]
    if single:
        texts = [lead(job.prepared.title) + (job.prepared.texts[job.chunks[0]] if job.chunks else job.prepared.whole or "") for job in single]
        for job, vector in zip(single, encoder.embed(texts, lengths=[job.length for job in single])):
            if not job.chunks:  # a document's own vector: unit length, as its chunks' mean is made
                norm = float(np.linalg.norm(vector))
                job.prepared.doc_vector = vector / norm if norm > 0 else vector
                continue
            assert job.prepared.vectors is not None  # set before its jobs are made
            job.prepared.vectors[job.chunks[0]] = vector
    windowed = [(job, job.window) for job in group if job.window is not None]
    if windowed:
        pooled = encoder.embed_windows([w for _, w in windowed], [lead(job.prepared.title) for job, _ in windowed])
        for (job, _), vectors in zip(windowed, pooled):
            assert job.prepared.vectors is not None
            job.prepared.vectors[job.chunks] = vectors
