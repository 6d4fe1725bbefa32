"""What runs in the Ray workers of `lodex index --ray`: the reading-and-chunking tasks (ReadSide, read_files) and the
encoder actors (EncodeActor); nothing of it imports Ray."""

import pickle
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa

from lodex.encoders.encoder import Encoder
from lodex.indexer.chunking.chunker import LEGACY_RULE, Chunker, ChunkRule
from lodex.indexer.chunking.late_chunking import LateChunking
from lodex.indexer.encoding_jobs import TitleLead, WholeText, WindowPlanner, encoder_jobs, run_jobs
from lodex.indexer.flush_rows import chunk_table
from lodex.indexer.preparation import Preparer
from lodex.indexer.prepared import Prepared, Written, parts_of
from lodex.indexer.readers.read_budget import ReadBudget, ReadPool
from lodex.indexer.scanner import ScanRules
from lodex.store.base import DocRecord
from lodex.store.fragments import FragmentTarget, StoredChunks, write_chunk_fragments


@dataclass(frozen=True)
class ReadSide:
    """What a Ray task reads and chunks files with, as the writer's own preparer would; picklable: the encoder's
    tokenizer (Encoder.tokenizer_only), no model and no store (copies and kept vectors are left to the writer)."""

    tokens: Encoder
    chunk_tokens: int
    overlap: int
    rules: ScanRules
    flush_tokens: int
    retries: int
    retry_backoff_s: float
    late: LateChunking | None
    title_prefix: bool
    budget: ReadBudget
    language: str | None = None  # index.language: every document's language, when set
    rule: ChunkRule = LEGACY_RULE  # the index's chunk rule (chunking.whole_slack, overlap_at_breaks, whole_tokens)
    whole_vector: int = 0  # the index's chunking.document_vector "whole": the longest input encoded whole (0: off)
    unread: frozenset[str] = frozenset()  # languages whose documents keep their chunks' mean (the model cannot read them)
    stored: StoredChunks | None = None  # where an edited file finds the vectors it keeps (None: the writer puts them in)

    def preparer(self) -> Preparer:
        """A store-less preparer with the writer's settings, reading within the per-file budget."""
        chunker = Chunker(self.tokens.token_spans, self.chunk_tokens, self.overlap, self.rule)
        lead = TitleLead(self.title_prefix)
        plan = WindowPlanner(self.tokens, self.late, self.chunk_tokens, lead) if self.late else None
        return Preparer(
            None,
            chunker,
            self.rules,
            threading.Event(),
            self.flush_tokens,
            self.retries,
            self.retry_backoff_s,
            plan,
            task_pool(self.budget),
            self.language,
            WholeText(self.tokens, lead, self.whole_vector, self.unread) if self.whole_vector else None,
            self.stored,
        )


@lru_cache(maxsize=4)
def task_pool(budget: ReadBudget) -> ReadPool:
    """The reading processes of this Ray worker process (kept across its tasks, so each does not start its own)."""
    return ReadPool(budget)


def read_files(row: dict[str, Any], side: ReadSide, by_content: dict[tuple[str, str], DocRecord]) -> Iterator[dict[str, Any]]:
    """A Ray task's work: one file read and chunked, as one row per part it is committed in (one, unless large)."""
    entry, record = pickle.loads(row["file"])
    item = side.preparer().prepare_with_retries(entry, record, by_content)
    for number, part in enumerate(parts_of(item, entry)):
        yield {"seq": row["seq"], "part": number, "item": pickle.dumps(part)}


class EncodeActor:
    """A Ray actor's work: its own encoder, built once, gives the prepared files of each call the vectors they need;
    with a `target`, it writes their chunk rows there as fragments and sends back only what the writer commits."""

    def __init__(self, make_encoder: Callable[[], Encoder], title_prefix: bool, target: FragmentTarget | None = None) -> None:
        self.encoder = make_encoder()
        self.lead = TitleLead(title_prefix)
        self.target = target

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        items = [pickle.loads(blob) for blob in batch["item"]]
        fresh = [p for p in items if isinstance(p, Prepared) and p.vectors is None and p.copy_of is None]
        for p in fresh:
            p.encoded = p.to_encode()
            p.vectors = np.zeros((len(p.texts), self.encoder.dim), dtype=np.float32)
            for i, vector in p.known.items():  # an edited file's unchanged chunks (found with index.ray_writes "fragments")
                p.vectors[i] = vector
        jobs = encoder_jobs(fresh, self.encoder, self.lead)
        run_jobs(self.encoder, self.lead, sorted(jobs, key=lambda job: -job.length))  # embed() batches them by token budget
        if self.target is not None and fresh:
            self._write(fresh, self.target)
        out = np.empty(len(items), dtype=object)
        out[:] = [pickle.dumps(p) for p in items]
        return {"seq": batch["seq"], "part": batch["part"], "item": out}

    def _write(self, parts: list[Prepared], target: FragmentTarget) -> None:
        """Write these encoded parts' chunk rows as fragments of the chunks table (one call's, together), and keep of
        each part only what the writer needs to commit it: its chunks' count, token counts, language and vector sum."""
        vectors = [p.vectors if p.vectors is not None else np.zeros((0, self.encoder.dim), np.float32) for p in parts]
        fragments = write_chunk_fragments(target, pa.concat_tables([chunk_table(p, v, target.dim) for p, v in zip(parts, vectors)]))
        owners = sorted({p.doc_id for p in parts})
        for p, v in zip(parts, vectors):
            p.written = Written(fragments, owners, len(p.texts), v.sum(axis=0))
            p.vectors, p.texts, p.windows, p.known = None, [], None, {}
            p.rows = {key: p.rows[key] for key in ("token_count", "language")}
