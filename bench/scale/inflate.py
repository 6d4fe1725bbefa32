"""Grow a real lodex index to N chunks with pushed copies of its documents: vectors jittered, texts varied per copy."""

import hashlib
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from lodex.indexer.identity import document_id
from lodex.indexer.paths import PUSHED_PREFIX
from lodex.store.lance_store import LanceStore
from lodex.store.schema import chunks_schema, vectors_of

JITTER = 0.02  # per-dimension noise on a unit vector: a copy's cosine to its original is ~0.93 at 384 dimensions
COMMIT_ROWS = 250_000  # chunk rows per commit while growing (a few large Lance fragments, not thousands)


def _varied(texts: list[str], copy: int, words: list[str]) -> list[str]:
    """The copy's texts: each with a copy marker and one other chunk's first word appended, so that copies differ for
    keyword search as near-duplicate documents do."""
    return [f"{text} copy{copy} {words[(i * 7919 + copy) % len(words)]}" for i, text in enumerate(texts)]


def inflate(data: Path, target: int, vary_text: bool = False, progress: bool = False) -> dict[str, float]:
    """Add pushed copies of the documents first indexed (not of earlier copies) until the index holds `target`
    chunks: each copy's chunk vectors are the originals plus N(0, JITTER) noise, re-normalized, its document vector the
    normalized mean of those, and (with `vary_text`) its texts varied per copy, under a content hash of their own (with
    the original's, a file edited back to its original text was given a copy's chunks, and the next edit of it found
    none of its chunk texts to keep and encoded it whole). Compacts the tables and saves the
    vector index (rebuilt as the kind the size calls for); returns the chunk count and the seconds of each phase."""
    store = LanceStore(data, 384)
    chunks = store.chunks.search().limit(None).to_arrow()
    total = chunks.num_rows
    originals = [d for d in store.documents.search().limit(None).to_arrow().to_pylist() if not d["path"].startswith(PUSHED_PREFIX)]
    copies = {d["path"] for d in store.documents.search().select(["path"]).limit(None).to_arrow().to_pylist()}
    by_doc: dict[str, list[int]] = {}
    for i, d in enumerate(chunks["document_id"].to_pylist()):
        by_doc.setdefault(d, []).append(i)
    vectors = vectors_of(chunks)
    words = [t.split()[0] if t.split() else "word" for t in chunks["text"].to_pylist()]
    rng = np.random.default_rng(len(copies))
    phases = {"write_s": 0.0, "optimize_s": 0.0, "vector_index_s": 0.0}
    started, copy = time.monotonic(), 0
    rows: list[pa.Table] = []
    doc_rows: list[dict] = []
    while total < target:
        copy += 1
        for doc in originals:
            idx = by_doc.get(doc["id"], [])
            path = f"{PUSHED_PREFIX}copy-{copy}/{doc['path']}"
            if not idx or path in copies:
                continue
            new_id = document_id(path)
            jitter = vectors[idx] + rng.normal(0, JITTER, (len(idx), vectors.shape[1])).astype(np.float32)
            jitter /= np.linalg.norm(jitter, axis=1, keepdims=True)
            mean = jitter.mean(axis=0)
            part = chunks.take(pa.array(idx)).to_pydict()
            part.update(
                {
                    "id": rng.integers(1, 2**62, len(idx)),
                    "document_id": [new_id] * len(idx),
                    "vector": pa.FixedSizeListArray.from_arrays(pa.array(jitter.reshape(-1)), 384),
                }
            )
            content_hash = doc["content_hash"]
            if vary_text:  # other texts: another content, so another hash (lodex re-uses the chunks of equal hashes)
                part["text"] = _varied(part["text"], copy, words)
                content_hash = hashlib.sha256(f"{content_hash} copy{copy}".encode()).hexdigest()[: len(content_hash)]
                part["content_hash"] = [content_hash] * len(idx)
            rows.append(pa.Table.from_pydict(part, schema=chunks_schema(384)))
            doc_rows.append(
                {
                    **doc,
                    "id": new_id,
                    "path": path,
                    "metadata": "{}",
                    "content_hash": content_hash,
                    "vector": (mean / np.linalg.norm(mean)).astype(np.float32).tolist(),
                }
            )
            total += len(idx)
            if total >= target:
                break
        if sum(r.num_rows for r in rows) >= COMMIT_ROWS or total >= target:
            store.commit(pa.concat_tables(rows), doc_rows, [])
            rows, doc_rows = [], []
            if progress:
                print(f"  {total:,} chunks, {time.monotonic() - started:.0f} s", flush=True)
    phases["write_s"] = time.monotonic() - started
    started = time.monotonic()
    store.optimize()
    phases["optimize_s"] = time.monotonic() - started
    started = time.monotonic()
    store.persist_index()  # as a growing index would: caught up, rebuilt when the size calls for another kind
    phases["vector_index_s"] = time.monotonic() - started
    return {"chunks": store.chunk_count(), **{k: round(v, 1) for k, v in phases.items()}}
