"""What bench/scale/scaleout.py's simulated machines index: documents of realistic size (chunks of 60–128 tokens, real text
from samples/), their rows in lodex's own schemas with 384-dimension vectors, and the check of a finished index (every
chunk once, every document once, nothing else)."""

import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from lodex.indexer.identity import new_chunk_ids
from lodex.store.schema import chunks_schema, documents_schema

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
CHARS_PER_TOKEN = 4.5  # English text through MiniLM's WordPiece, about


@dataclass(frozen=True)
class Workload:
    """The encode cost (`per_token_s`: the stand-in encoder sleeps this long per token), today's flush
    (index.flush_tokens), and each machine's share of the folder."""

    per_token_s: float
    flush_tokens: int = 131_072
    docs_per_machine: int = 120
    chunks_per_doc: tuple[int, int] = (6, 30)
    chunk_tokens: tuple[int, int] = (60, 128)
    dim: int = 384
    seed: int = 0


@dataclass(frozen=True)
class Doc:
    """A document a machine indexes: its id and its chunks' token counts."""

    id: str
    tokens: tuple[int, ...]

    @property
    def total(self) -> int:
        return sum(self.tokens)


def machine_docs(work: Workload, machine: int) -> list[Doc]:
    """The documents machine `machine` encodes, the same for every design."""
    rng = np.random.default_rng([work.seed, machine])
    low, high = work.chunk_tokens
    return [
        Doc(f"m{machine:03d}-d{k:05d}", tuple(int(t) for t in rng.integers(low, high + 1, rng.integers(*work.chunks_per_doc))))
        for k in range(work.docs_per_machine)
    ]


def encode(doc: Doc, work: Workload) -> None:
    """The stand-in encoder: sleeps for the real encoder's time on this document's tokens (a sleep, not a spin: 128
    machines share two cores here)."""
    time.sleep(doc.total * work.per_token_s)


@lru_cache(maxsize=1)
def passages() -> tuple[str, ...]:
    """Real text to fill chunk rows with: the paragraphs of the samples' text files."""
    found = [
        p.strip()
        for path in sorted(SAMPLES.glob("*"))
        if path.suffix in (".txt", ".md", ".rst")
        for p in path.read_text(encoding="utf-8").split("\n\n")
        if len(p.strip()) > 200
    ]
    return tuple(found) or ("lorem ipsum dolor sit amet " * 40,)


def chunk_rows(docs: list[Doc], dim: int, rng: np.random.Generator) -> tuple[pa.Table, np.ndarray]:
    """The chunk rows of these documents (lodex's chunks schema, keywords already made, as the reading tasks make
    them), and each document's vector (its chunks' normalized mean)."""
    texts = passages()
    tokens = [t for doc in docs for t in doc.tokens]
    n = len(tokens)
    vectors = rng.standard_normal((n, dim), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    text = [texts[i % len(texts)][: int(t * CHARS_PER_TOKEN)] for i, t in enumerate(tokens)]
    table = pa.table(
        {
            "id": new_chunk_ids(n),
            "document_id": [doc.id for doc in docs for _ in doc.tokens],
            "content_hash": [f"h{doc.id}" for doc in docs for _ in doc.tokens],
            "ordinal": pa.array([i for doc in docs for i in range(len(doc.tokens))], pa.int32()),
            "char_start": pa.array(np.zeros(n, np.int64)),
            "char_end": pa.array([len(t) for t in text], pa.int64()),
            "token_count": pa.array(tokens, pa.int32()),
            "text": text,
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), dim),
            "page": pa.nulls(n, pa.int32()),
            "page_end": pa.nulls(n, pa.int32()),
            "section": pa.nulls(n, pa.string()),
            "language": ["en"] * n,
            "keywords": [t.lower() for t in text],
        },
        schema=chunks_schema(dim),
    )
    ends = np.cumsum([len(doc.tokens) for doc in docs])
    means = np.add.reduceat(vectors, np.r_[0, ends[:-1]], axis=0)
    return table, means / np.linalg.norm(means, axis=1, keepdims=True)


def document_rows(docs: list[Doc], vectors: np.ndarray) -> list[dict[str, Any]]:
    """The document rows of these documents (the commit point of today's path)."""
    stamp = time.time()
    return [
        {
            "id": doc.id,
            "path": f"{doc.id}.txt",
            "content_hash": f"h{doc.id}",
            "size": int(doc.total * CHARS_PER_TOKEN),
            "mtime": stamp,
            "format": "text",
            "title": doc.id,
            "chunk_count": len(doc.tokens),
            "token_count": doc.total,
            "vector": vector.tolist(),
            "indexed_at": stamp,
            "metadata": "{}",
            "language": "en",
        }
        for doc, vector in zip(docs, vectors)
    ]


def document_table(docs: list[Doc], vectors: np.ndarray, dim: int) -> pa.Table:
    """The document rows as a table (what a machine writes as a fragment)."""
    return pa.Table.from_pylist(document_rows(docs, vectors), schema=documents_schema(dim))


def batches(docs: list[Doc], flush_tokens: int, first: int) -> Iterator[list[Doc]]:
    """`docs` in flushes of at least `flush_tokens` tokens (the first of at least `first`), the last one what is left."""
    batch: list[Doc] = []
    tokens, limit = 0, first
    for doc in docs:
        batch.append(doc)
        tokens += doc.total
        if tokens >= limit:
            yield batch
            batch, tokens, limit = [], 0, flush_tokens
    if batch:
        yield batch


def verify(chunks: pa.Table, documents: pa.Table, expected: list[Doc]) -> dict[str, Any]:
    """What a finished index holds against what was indexed: rows, unique chunk ids, every (document, ordinal) once and
    nothing else, every document once."""
    ids = chunks["id"].to_numpy().tolist()
    keys = list(zip(chunks["document_id"].to_pylist(), chunks["ordinal"].to_pylist()))
    wanted = {(doc.id, i) for doc in expected for i in range(len(doc.tokens))}
    doc_ids = documents["id"].to_pylist()
    ok = (
        len(ids) == len(set(ids)) == len(keys) == len(set(keys)) == len(wanted)
        and set(keys) == wanted
        and len(doc_ids) == len(set(doc_ids))
        and set(doc_ids) == {d.id for d in expected}
    )
    return {
        "ok": ok,
        "chunk_rows": len(ids),
        "unique_chunk_ids": len(set(ids)),
        "expected_chunks": len(wanted),
        "document_rows": len(doc_ids),
        "unique_documents": len(set(doc_ids)),
        "expected_documents": len(expected),
        **({"missing": sorted(wanted - set(keys))[:5], "unexpected": sorted(set(keys) - wanted)[:5]} if not ok else {}),
    }
