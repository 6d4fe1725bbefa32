"""A large append encoded in shards: an empty copy of a trained index for each worker to add its shard's vectors to,
and the shards merged into the main index by their inverted lists (nothing retrained, nothing encoded again)."""

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from lodex.store.exact_vectors import ExactVectors
from lodex.store.vector_index import VectorIndex


def empty_copy(index: VectorIndex, exact: Path | None = None) -> VectorIndex:
    """An index holding nothing, with `index`'s trained clusters and codes (copied: `index` may hold millions of
    vectors, none of which is copied); a compressed one keeps the float32 vectors added to it under `exact`."""
    faiss = _faiss()
    out = VectorIndex(index.dim, index.nprobe, index.refine)
    if index.kind == "flat":
        return out
    if index.kind == "compressed" and exact is None:
        raise ValueError("an empty copy of a compressed index needs a directory for its float32 vectors")
    ivf, quantizer = index.index, faiss.clone_index(index.index.quantizer)
    if isinstance(ivf, faiss.IndexIVFPQ):
        copy = faiss.IndexIVFPQ(quantizer, ivf.d, ivf.nlist, ivf.pq.M, ivf.pq.nbits, ivf.metric_type)
        copy.pq = ivf.pq
    else:
        copy = faiss.IndexIVFScalarQuantizer(quantizer, ivf.d, ivf.nlist, ivf.sq.qtype, ivf.metric_type, ivf.by_residual)
        copy.sq = ivf.sq
    copy.by_residual, copy.is_trained, copy.nprobe = ivf.by_residual, True, ivf.nprobe
    if index.kind == "ivf":
        copy.set_direct_map_type(faiss.DirectMap.Hashtable)
    elif exact is not None:
        out.exact = ExactVectors(exact, index.dim)
    out.index = copy
    return out


def merge_shards(main: VectorIndex, shards: Iterable[VectorIndex]) -> None:
    """Move every vector of each shard (an `empty_copy` of `main` or of the index `main` copies, with a shard of the
    append added to it, saved and loaded by the driver) into `main`: its codes by inverted list, a compressed shard's
    float32 segment files moved into `main`'s directory. The shards are left empty. Like any change of the index, it
    must not run while a search reads `main`. ValueError for a shard of another kind, clusters or codes."""
    faiss = _faiss()
    if main.kind == "flat":
        for shard in shards:
            ids = shard.ids()
            main.add(ids, shard.vectors(ids))
        return
    ivf = main.index
    hashed = ivf.direct_map.type != faiss.DirectMap.NoMap
    if hashed:
        ivf.set_direct_map_type(faiss.DirectMap.NoMap)  # FAISS merges no direct map: rebuilt once, at the end
    try:
        for shard in shards:
            _check_same_training(main, shard)
            shard.index.set_direct_map_type(faiss.DirectMap.NoMap)
            ivf.merge_from(shard.index, 0)
            if main.exact is not None and shard.exact is not None:
                main.exact.adopt(shard.exact)
    finally:
        if hashed:
            ivf.set_direct_map_type(faiss.DirectMap.Hashtable)


def _check_same_training(main: VectorIndex, shard: VectorIndex) -> None:
    """Raise ValueError unless `shard` was encoded with `main`'s clusters and codes (FAISS itself checks the clusters
    only, and would merge codes of other scalar ranges or codebooks without a word)."""
    faiss = _faiss()
    if shard.kind != main.kind or type(shard.index) is not type(main.index):
        raise ValueError(f"a {shard.kind} shard cannot be merged into a {main.kind} index")
    a, b = main.index, shard.index
    if (a.d, a.nlist, a.code_size) != (b.d, b.nlist, b.code_size) or not np.array_equal(_centroids(a), _centroids(b)):
        raise ValueError("a shard encoded with other clusters cannot be merged: encode it with an empty copy of this index")
    codec = "pq" if hasattr(a, "pq") else "sq"
    field = "centroids" if codec == "pq" else "trained"
    if not np.array_equal(faiss.vector_to_array(getattr(getattr(a, codec), field)), faiss.vector_to_array(getattr(getattr(b, codec), field))):
        raise ValueError("a shard encoded with other codes cannot be merged: encode it with an empty copy of this index")


def _centroids(ivf: Any) -> np.ndarray:
    return np.asarray(ivf.quantizer.reconstruct_n(0, ivf.nlist))


def _faiss() -> Any:
    """The FAISS module, imported when first needed (its SWIG types are untyped)."""
    import faiss

    return faiss
