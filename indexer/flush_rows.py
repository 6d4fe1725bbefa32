"""The rows a flush commits: each pending file's chunk rows with their vectors (or the fragments they were written in
elsewhere), and the document row of each file whose last part it holds (its vector its own or its chunks' normalized
mean), with the run's counts kept."""

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from lodex.indexer.identity import new_chunk_ids
from lodex.indexer.prepared import Prepared, Stream
from lodex.indexer.run_state import Progress, RunSummary
from lodex.store.fragments import fragment_key
from lodex.store.schema import chunks_schema


@dataclass
class FlushRows:
    """What one flush commits: chunk rows made here, fragments written elsewhere (with the documents they hold chunks
    of), the document rows, and the files finished with their totals."""

    chunks: pa.Table
    documents: list[dict[str, Any]]
    finished: list[tuple[Prepared, Stream]]
    fragments: list[Any] = field(default_factory=list)
    owners: list[str] = field(default_factory=list)


def chunk_table(p: Prepared, vectors: np.ndarray, dim: int) -> pa.Table:
    """A prepared part's chunk rows with these vectors, under new chunk ids."""
    n = len(p.texts)
    return pa.Table.from_pydict(
        {
            "id": new_chunk_ids(n),
            "document_id": [p.doc_id] * n,
            "content_hash": [p.content_hash] * n,
            **p.rows,
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), dim),
        },
        schema=chunks_schema(dim),
    )


def flush_rows(
    pending: list[Prepared], dim: int, encoded_tokens: dict[int, int], summary: RunSummary, state: Progress, committed: set[str] | None = None
) -> FlushRows:
    """The rows to commit for these encoded files; `encoded_tokens`: the tokens encoded for each file (by id()) now,
    counted into `summary` and `state`; `committed`: the fragments (`fragment_key`) committed before in the run (a
    fragment holds the parts of one actor call: it is committed with the first of them), which this flush's join."""
    out = FlushRows(pa.table({}), [], [])
    chunk_tables = []
    stamp = time.time()
    for p in pending:
        if p.written is None:
            vectors = p.vectors if p.vectors is not None else np.zeros((len(p.texts), dim), np.float32)  # set by encode_pending
            chunk_tables.append(chunk_table(p, vectors, dim))
            n, part_sum = len(p.texts), vectors.sum(axis=0)
        else:
            n, part_sum = p.written.chunks, p.written.vector_sum
            fresh = [f for f in p.written.fragments if fragment_key(f) not in (committed if committed is not None else set())]
            out.fragments += fresh
            out.owners += p.written.owners if fresh else []
            if committed is not None:
                committed.update(fragment_key(f) for f in fresh)
        total = p.stream or Stream()
        total.vector_sum = part_sum + (total.vector_sum if total.vector_sum is not None else 0)
        total.chunks += n
        total.tokens += int(sum(p.rows["token_count"]))
        total.encoded += encoded_tokens.get(id(p), 0)
        summary.chunks += n
        state.chunks += n
        summary.tokens += encoded_tokens.get(id(p), 0)
        state.tokens += encoded_tokens.get(id(p), 0)
        if p.final:  # else a part of a large document: its row comes with the last part
            out.documents.append(_document_row(p, total, dim, stamp))
            out.finished.append((p, total))
    out.chunks = pa.concat_tables(chunk_tables) if chunk_tables else chunks_schema(dim).empty_table()
    return out


def _document_row(p: Prepared, total: Stream, dim: int, stamp: float) -> dict[str, Any]:
    """The row of a document whose last part this is: its own vector, else its chunks' normalized mean."""
    if p.doc_vector is not None:  # its own (chunking.document_vector "whole", or copied with its content)
        vector = p.doc_vector
    else:
        mean = total.vector_sum / total.chunks if total.chunks and total.vector_sum is not None else np.zeros(dim, np.float32)
        norm = float(np.linalg.norm(mean))
        vector = mean / norm if norm > 0 else mean
    return {
        "id": p.doc_id,
        "path": p.entry.path,
        "content_hash": p.content_hash,
        "size": p.entry.size,
        "mtime": p.entry.mtime,
        "format": p.format,
        "title": p.title,
        "chunk_count": total.chunks,
        "token_count": total.tokens,
        "vector": vector.astype(np.float32).tolist(),
        "indexed_at": stamp,
        "metadata": p.metadata,
        "language": (p.rows.get("language") or [None])[0],
    }
