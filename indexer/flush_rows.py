"""The rows a flush commits: each pending file's chunk rows with their vectors, and the document row of each file
whose last part it holds (its vector its own or its chunks' normalized mean), with the run's counts kept."""

import time
from typing import Any

import numpy as np
import pyarrow as pa

from lodex.indexer.identity import new_chunk_ids
from lodex.indexer.prepared import Prepared, Stream
from lodex.indexer.run_state import Progress, RunSummary
from lodex.store.schema import chunks_schema


def flush_rows(pending: list[Prepared], dim: int, encoded_tokens: dict[int, int], summary: RunSummary,
               state: Progress) -> tuple[pa.Table, list[dict[str, Any]], list[tuple[Prepared, Stream]]]:
    """(the chunk rows, the document rows, the files finished with their totals) of these encoded files;
    `encoded_tokens`: the tokens encoded for each file (by id()) now, counted into `summary` and `state`."""
    chunk_tables, documents, finished = [], [], []
    stamp = time.time()
    for p in pending:
        n = len(p.texts)
        vectors = p.vectors if p.vectors is not None else np.zeros((n, dim), np.float32)  # set by encode_pending
        chunk_tables.append(pa.Table.from_pydict({
            "id": new_chunk_ids(n), "document_id": [p.doc_id] * n, "content_hash": [p.content_hash] * n, **p.rows,
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), dim),
        }, schema=chunks_schema(dim)))
        total = p.stream or Stream()
        total.vector_sum = vectors.sum(axis=0) + (total.vector_sum if total.vector_sum is not None else 0)
        total.chunks += n
        total.tokens += int(sum(p.rows["token_count"]))
        total.encoded += encoded_tokens.get(id(p), 0)
        summary.chunks += n
        state.chunks += n
        summary.tokens += encoded_tokens.get(id(p), 0)
        state.tokens += encoded_tokens.get(id(p), 0)
        if not p.final:
            continue  # a part of a large document: its row comes with the last part
        if p.doc_vector is not None:  # its own (chunking.document_vector "whole", or copied with its content)
            vector = p.doc_vector
        else:
            mean = total.vector_sum / total.chunks if total.chunks else np.zeros(dim, np.float32)
            norm = float(np.linalg.norm(mean))
            vector = mean / norm if norm > 0 else mean
        documents.append({
            "id": p.doc_id, "path": p.entry.path, "content_hash": p.content_hash, "size": p.entry.size,
            "mtime": p.entry.mtime, "format": p.format, "title": p.title, "chunk_count": total.chunks,
            "token_count": total.tokens,
            "vector": vector.astype(np.float32).tolist(), "indexed_at": stamp,
            "metadata": p.metadata, "language": (p.rows.get("language") or [None])[0],
        })
        finished.append((p, total))
    chunks = pa.concat_tables(chunk_tables)
    return chunks, documents, finished
