"""Chunk fragments written by other processes (store/fragments.py): invisible until the writer's one commit names them,
the vector index caught up by chunk id, a commit racing another writer rebased or refused in one line, and the files of
fragments never committed swept. Real Lance in tmp_path, no Ray (tests/test_ray.py runs them through the Ray path)."""

import pickle
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest

from lodex.store.errors import StoreError
from lodex.store.fragments import write_chunk_fragments
from lodex.store.lance_store import LanceStore
from lodex.store.schema import chunks_schema
from tests.conftest import make_pipeline
from tests.fakes import FakeEncoder
from tests.invariants import check_index

DIM = FakeEncoder.dim


def _document(number: int, chunks: int) -> tuple[pa.Table, dict[str, Any]]:
    """A document's chunk rows (random unit vectors) and its row (their normalized mean)."""
    doc_id, digest = f"{number:032x}", f"{number + 1000:032x}"
    vectors = np.random.default_rng(number).standard_normal((chunks, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    texts = [f"passage {j} of document {number}" for j in range(chunks)]
    rows = pa.Table.from_pydict(
        {
            "id": [number * 1000 + j for j in range(chunks)],
            "document_id": [doc_id] * chunks,
            "content_hash": [digest] * chunks,
            "ordinal": list(range(chunks)),
            "char_start": [0] * chunks,
            "char_end": [len(t) for t in texts],
            "token_count": [5] * chunks,
            "text": texts,
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), DIM),
            "page": [None] * chunks,
            "page_end": [None] * chunks,
            "section": [None] * chunks,
            "language": ["en"] * chunks,
            "keywords": [None] * chunks,
        },
        schema=chunks_schema(DIM),
    )
    mean = vectors.mean(axis=0)
    row = {
        "id": doc_id,
        "path": f"doc{number}.txt",
        "content_hash": digest,
        "size": 1,
        "mtime": 1.0,
        "format": "text",
        "title": f"doc {number}",
        "chunk_count": chunks,
        "token_count": 5 * chunks,
        "vector": (mean / np.linalg.norm(mean)).tolist(),
        "indexed_at": 1.0,
        "metadata": "{}",
        "language": "en",
    }
    return rows, row


def _store(tmp_path: Path) -> LanceStore:
    store, _, _ = make_pipeline(tmp_path / "data", FakeEncoder())
    store.before_run()  # as a run starts: the vector index followed in memory
    return store


def test_fragments_are_invisible_until_one_commit_takes_them_with_their_documents(tmp_path: Path) -> None:
    store = _store(tmp_path)
    target = pickle.loads(pickle.dumps(store.fragment_target()))  # as a Ray actor gets it
    (rows_a, doc_a), (rows_b, doc_b) = _document(1, 3), _document(2, 4)
    written = pickle.loads(pickle.dumps(write_chunk_fragments(target, rows_a) + write_chunk_fragments(target, rows_b)))
    assert store.refresh() and store.chunk_count() == 0, "a fragment no commit names is seen"
    version = store.chunks.version
    store.commit_fragments(written, [doc_a["id"], doc_b["id"]], [doc_a, doc_b], [])
    assert store.chunks.version == version + 1, "the fragments took more than one commit"
    assert sorted(store.vector_index().ids().tolist()) == sorted(rows_a["id"].to_pylist() + rows_b["id"].to_pylist())
    assert store.counts() == {"documents": 2, "chunks": 7}
    check_index(store)  # keywords made from the text, ordinals, document vectors, FAISS ids and vectors


def test_a_commit_after_another_writers_is_rebased_or_refused_in_one_line(tmp_path: Path) -> None:
    store = _store(tmp_path)
    (rows_a, doc_a), (rows_b, doc_b), (rows_c, doc_c) = _document(1, 3), _document(2, 2), _document(3, 2)
    written = write_chunk_fragments(store.fragment_target(), rows_a)
    other = LanceStore(tmp_path / "data", DIM)  # another writer commits meanwhile: this handle's version is behind
    other.commit(rows_b, [doc_b], [])
    store.commit_fragments(written, [doc_a["id"]], [doc_a], [])
    assert store.counts() == {"documents": 2, "chunks": 5}
    check_index(store)

    written = write_chunk_fragments(store.fragment_target(), rows_c)
    lance.write_dataset(rows_b.slice(0, 1).append_column("x", pa.array([1])), store.chunks.uri, mode="overwrite")
    with pytest.raises(StoreError) as refused:
        store.commit_fragments(written, [doc_c["id"]], [doc_c], [])
    line = refused.value.one_line()
    assert "another writer changed the chunks table" in line and "\n" not in line and "run again" in line


def test_the_files_of_fragments_never_committed_are_swept(tmp_path: Path) -> None:
    store = _store(tmp_path)
    (rows_a, doc_a), (rows_b, _) = _document(1, 3), _document(2, 2)
    target = store.fragment_target()
    store.commit_fragments(write_chunk_fragments(target, rows_a), [doc_a["id"]], [doc_a], [])
    write_chunk_fragments(target, rows_b)  # a worker's whose run died before its commit
    data = Path(store.chunks.uri) / "data"
    assert len(list(data.iterdir())) == 2
    assert store.sweep_fragments() == 1
    assert len(list(data.iterdir())) == 1 and store.counts() == {"documents": 1, "chunks": 3}
    check_index(store)


def test_a_data_file_a_killed_writer_left_half_written_is_swept(tmp_path: Path) -> None:
    store = _store(tmp_path)
    rows, doc = _document(1, 2)
    store.commit_fragments(write_chunk_fragments(store.fragment_target(), rows), [doc["id"]], [doc], [])
    data = Path(store.chunks.uri) / "data"
    (data / ".tmpJt5UF0").write_bytes(b"half a data file")  # as Lance names a file until it renames it written
    assert store.sweep_fragments() == 1
    assert [p.name for p in data.iterdir() if p.name.startswith(".")] == [] and store.counts() == {"documents": 1, "chunks": 2}
