"""The index invariants, checked the same way by the incremental, crash and contract suites."""

import hashlib
import weakref
from pathlib import Path

import numpy as np

from lodex.encoders.encoder import Encoder
from lodex.store.lance_store import LanceStore, vectors_of
from lodex.store.manifest import IndexManifest


def folder_hashes(root: Path) -> dict[str, str]:
    """root-relative POSIX path → blake2b-128 of the bytes, for every visible regular file under `root` (computed
    here, not by lodex, so that a wrong content hash in the index cannot hide)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.is_file() and not any(part.startswith(".") for part in rel.parts):
            out[rel.as_posix()] = hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()
    return out


def check_index(
    store: LanceStore, root: Path | None = None, persisted: bool = False, vector_atol: float = 2e-3, encoder: Encoder | None = None
) -> dict[str, str]:
    """Assert the invariants of `store`'s current version and return {path: content hash}:

    - chunk ids are unique, and every chunk belongs to the current version of a document (no orphans);
    - each document has exactly `chunk_count` chunks, with ordinals 0..n-1;
    - the FAISS index (flat or IVF) holds exactly the Lance chunk ids, with the Lance vectors (to `vector_atol`:
      an IVF index stores float16);
    - each document's vector is the normalized mean of its chunks' vectors, or, in an index whose origin records
      chunking.document_vector "whole", for a document of two or more chunks, a unit vector of its whole text (close
      to that mean);
    - with `encoder`: each chunk's vector is its text's encoding (vectors kept across an edit or a rename belong to
      the chunk they are stored with; an index built without chunking.title_prefix and without late chunking, where
      a chunk's vector depends on its neighbours too: tests/test_late_chunking.py checks those);
    - with `root`: the index holds exactly the folder's files, each at its current content;
    - with `persisted`: the FAISS file of this chunks version is on disk and holds the same ids.
    """
    docs = store.scan_documents(["id", "path", "content_hash", "chunk_count", "vector"])
    chunks = store.chunks.search().select(["id", "document_id", "content_hash", "ordinal", "text", "vector"]).limit(None).to_arrow()
    ids = chunks["id"].to_numpy()
    assert len(ids) == len(np.unique(ids)), "duplicate chunk ids"

    paths, doc_ids, hashes = docs["path"].to_pylist(), docs["id"].to_pylist(), docs["content_hash"].to_pylist()
    assert len(paths) == len(set(paths)), "two documents with one path"
    assert len(doc_ids) == len(set(doc_ids)), "two document rows with one id"
    current = list(zip(zip(doc_ids, hashes), zip(paths, docs["chunk_count"].to_pylist())))
    owners = list(zip(chunks["document_id"].to_pylist(), chunks["content_hash"].to_pylist()))
    versions = {key for key, _ in current}
    orphans = [key for key in owners if key not in versions]
    assert not orphans, f"orphan chunks (of no current document version): {orphans[:5]}"

    chunk_vectors = vectors_of(chunks)
    doc_vectors = vectors_of(docs)
    whole = bool(IndexManifest.read(store.data_dir).record.get("document_vector"))
    ordinals = chunks["ordinal"].to_numpy()
    members: dict[tuple[str, str], list[int]] = {}
    for i, key in enumerate(owners):
        members.setdefault(key, []).append(i)
    for d, (key, (path, count)) in enumerate(current):
        mine = members.get(key, [])
        assert len(mine) == count, f"{path}: chunk_count {count}, {len(mine)} chunks stored"
        assert sorted(ordinals[mine].tolist()) == list(range(count)), f"{path}: chunk ordinals are not 0..{count - 1}"
        mean = chunk_vectors[mine].mean(axis=0) if mine else np.zeros(store.dim, np.float32)
        norm = float(np.linalg.norm(mean))
        expected = mean / norm if norm > 0 else mean
        if np.allclose(doc_vectors[d], expected, atol=1e-4):
            continue
        assert whole and count >= 2, f"{path}: the document vector is not its chunks' mean"
        assert abs(float(np.linalg.norm(doc_vectors[d])) - 1) < 1e-4, f"{path}: its whole-text vector is not of unit length"
        assert float(doc_vectors[d] @ expected) > 0.5, f"{path}: its whole-text vector is far from its chunks' mean"

    if encoder is not None and len(ids) and "late_chunking" not in IndexManifest.read(store.data_dir).record:
        fresh = _encodings(encoder, chunks["text"].to_pylist())
        worst = float(np.abs(fresh - chunk_vectors).max())
        assert worst < 1e-4, f"a chunk's vector is not the encoding of its text (off by {worst:.3g})"

    index = store.vector_index()
    assert np.array_equal(np.sort(index.ids()), np.sort(ids)), "FAISS ids differ from Lance ids"
    if len(ids):
        assert np.allclose(index.vectors(ids), chunk_vectors, atol=vector_atol), "FAISS vectors differ from Lance vectors"

    if root is not None:
        assert dict(zip(paths, hashes)) == folder_hashes(root), "the index is not the folder"
    if persisted:
        from lodex.store.vector_index import VectorIndex

        saved = VectorIndex.load(store.data_dir, store.chunks.version, store.dim)
        assert saved is not None, "FAISS index not persisted for the final version"
        assert np.array_equal(np.sort(saved.ids()), np.sort(ids)), "the persisted FAISS index holds other ids"
    return dict(zip(paths, hashes))


# Each encoder's encodings of the chunk texts checked so far: a suite that checks one index many times over (the
# contract suite, with the real model too) encodes each text once, not at every check.
_ENCODED: "weakref.WeakKeyDictionary[Encoder, dict[str, np.ndarray]]" = weakref.WeakKeyDictionary()


def _encodings(encoder: Encoder, texts: list[str]) -> np.ndarray:
    """The encoding of each of `texts` by `encoder` (as a document), each text encoded once for as long as the encoder lives."""
    known = _ENCODED.setdefault(encoder, {})
    new = list(dict.fromkeys(text for text in texts if text not in known))
    if new:
        known.update(zip(new, encoder.embed(new)))
    return np.stack([known[text] for text in texts])


def dense_document_scores(store: LanceStore, query_vector: np.ndarray, ranking: str, top_m: int = 3, alpha: float = 0.5) -> dict[str, float]:
    """path → the document's dense-mode score under `ranking`, computed by hand from its chunks' vectors in Lance:
    `max` the best chunk's cosine, `topm` the mean of the `top_m` best, `mean` the cosine to the normalized mean of
    its chunk vectors, `blend` alpha * max + (1 - alpha) * mean."""
    docs = store.scan_documents(["id", "path", "content_hash"])
    chunks = store.chunks.search().select(["document_id", "content_hash", "vector"]).limit(None).to_arrow()
    vectors = vectors_of(chunks)
    owners = list(zip(chunks["document_id"].to_pylist(), chunks["content_hash"].to_pylist()))
    out = {}
    for doc_id, content, path in zip(docs["id"].to_pylist(), docs["content_hash"].to_pylist(), docs["path"].to_pylist()):
        mine = vectors[[i for i, key in enumerate(owners) if key == (doc_id, content)]].astype(np.float64)
        if not len(mine):
            continue
        sims = np.sort(mine @ query_vector)[::-1]
        mean = mine.mean(axis=0)
        scores = {"max": sims[0], "topm": sims[:top_m].mean(), "mean": mean @ query_vector / max(np.linalg.norm(mean), 1e-12)}
        scores["blend"] = alpha * scores["max"] + (1 - alpha) * scores["mean"]
        out[path] = float(scores[ranking])
    return out
