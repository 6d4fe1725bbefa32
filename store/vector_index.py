"""The FAISS index over chunk vectors, keyed by chunk id, persisted per Lance version: exact (flat, float32), for large
collections an inverted-file index (IVF, float16) that searches `nprobe` of its clusters, and for very large ones a
compressed IVF (product-quantized codes) whose candidates are re-scored exactly from float32 vectors kept on disk."""

import os
import re
from pathlib import Path
from typing import Any, cast

import numpy as np

from lodex.store.ann_policy import NPROBE, REFINE
from lodex.store.exact_segments import discard_segments
from lodex.store.exact_vectors import ExactVectors

_FILE = re.compile(r"^chunks\.v(\d+)\.faiss$")
PQ_DIMS = 4  # dimensions per byte of a compressed index's product-quantized codes (96 bytes for 384-d: bench/scale/ann.py)
PQ_TRAIN = 256 * 39  # vectors its codebooks need at least (256 centroids each); with fewer: 8-bit scalar codes


def compressed_codes(dim: int, train: int, scheme: str = "sq8") -> str:
    """A compressed index's codes: "sq8" (a byte a dimension), or for scheme "pq" "pq<m>" (m = dim / PQ_DIMS bytes a
    vector) unless the dimension does not divide or the training sample is too small for product quantization."""
    return f"pq{dim // PQ_DIMS}" if scheme == "pq" and dim % PQ_DIMS == 0 and train >= PQ_TRAIN else "sq8"


def index_file(version: int) -> str:
    """The name of the file the index of a Lance version is saved as."""
    return f"chunks.v{version}.faiss"


def ivf_lists(n: int) -> int:
    """Clusters for an IVF index of n vectors: about 4 sqrt(n), and few enough to train each on 40 vectors."""
    return int(max(min(4 * np.sqrt(max(n, 1)), 65_536, n // 40), 1))


def train_stride(n: int, nlist: int) -> int:
    """Train `nlist` clusters on every k-th of n vectors: an even sample of at least 40 per cluster (FAISS asks
    for 39), or all of them."""
    return max(1, n // (40 * nlist))


class VectorIndex:
    """Inner-product search over chunk vectors, keyed by chunk id: exact, IVF (approximate), or compressed IVF whose
    `refine` x n best candidates are re-scored exactly (from `exact`, the float32 vectors on disk) to give n."""

    def __init__(self, dim: int, nprobe: int = NPROBE, refine: int = REFINE) -> None:
        import faiss

        self._faiss = faiss
        self.dim = dim
        self.nprobe = nprobe
        self.refine = refine
        self.index: Any = faiss.IndexIDMap2(faiss.IndexFlatIP(dim))  # IndexIDMap2 (flat) or an IndexIVF: SWIG types
        self.exact: ExactVectors | None = None  # a compressed index's float32 vectors

    def __len__(self) -> int:
        return int(self.index.ntotal)

    @property
    def kind(self) -> str:
        """ "flat", "ivf" or "compressed"."""
        faiss = self._faiss
        if not isinstance(self.index, faiss.IndexIVF):
            return "flat"
        fp16 = isinstance(self.index, faiss.IndexIVFScalarQuantizer) and self.index.sq.qtype == faiss.ScalarQuantizer.QT_fp16
        return "ivf" if fp16 else "compressed"

    @property
    def trained_for(self) -> int:
        """The size an IVF index's clusters were trained for (its lists are sized for it); 0 for flat."""
        return int(self.index.nlist) ** 2 // 16 if self.kind != "flat" else 0

    @classmethod
    def ivf(
        cls, dim: int, train: np.ndarray, nlist: int, nprobe: int = NPROBE, refine: int = REFINE, exact: Path | None = None, codes: str | None = None
    ) -> "VectorIndex":
        """An empty IVF index whose `nlist` clusters are trained on `train`. Vectors are stored as float16 (half the
        memory of float32, cosines within 1e-3) with a hash-table map for removals by chunk id; or, with `exact` (a
        directory for their float32 copies), compressed to `codes` ("sq8", "pq" or "pq<m>": `compressed_codes`;
        removals scan the lists: no map)."""
        faiss = (out := cls(dim, nprobe, refine))._faiss
        quantizer = faiss.IndexFlatIP(dim)
        codes = codes if codes and codes.removeprefix("pq").isdigit() else compressed_codes(dim, len(train), codes or "sq8")
        if exact is None or codes == "sq8":
            kind = faiss.ScalarQuantizer.QT_fp16 if exact is None else faiss.ScalarQuantizer.QT_8bit
            index = faiss.IndexIVFScalarQuantizer(quantizer, dim, nlist, kind, faiss.METRIC_INNER_PRODUCT, False)
        else:
            index = faiss.IndexIVFPQ(quantizer, dim, nlist, int(codes.removeprefix("pq")), 8, faiss.METRIC_INNER_PRODUCT)
        if exact is None:
            index.set_direct_map_type(faiss.DirectMap.Hashtable)
        else:
            out.exact = ExactVectors(exact, dim)
        index.train(np.ascontiguousarray(train, dtype=np.float32))
        out.index = index
        out.set_nprobe()
        return out

    def to_ivf(self, nlist: int | None = None, exact: Path | None = None, codes: str | None = None) -> "VectorIndex":
        """An IVF index holding the same ids and vectors, its clusters trained on an even sample of them (with
        `exact`, a compressed one keeping its float32 vectors there)."""
        ids = self.ids()
        vectors = self.vectors(ids)
        nlist = nlist or ivf_lists(len(ids))
        out = VectorIndex.ivf(self.dim, vectors[:: train_stride(len(ids), nlist)], nlist, self.nprobe, self.refine, exact, codes)
        out.add(ids, vectors)
        return out

    def to_flat(self) -> "VectorIndex":
        """An exact index holding the same ids and vectors."""
        ids = self.ids()
        out = VectorIndex(self.dim, self.nprobe, self.refine)
        out.add(ids, self.vectors(ids))
        return out

    def set_nprobe(self, nprobe: int | None = None) -> None:
        """Search `nprobe` of the inverted lists from now on (None: this index's own nprobe, applied to the faiss index
        it holds); a flat index searches every vector whatever it is."""
        self.nprobe = self.nprobe if nprobe is None else nprobe
        if self.kind != "flat":
            self.index.nprobe = self.nprobe

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Add vectors under their chunk ids."""
        if len(ids):
            vectors = np.ascontiguousarray(vectors, dtype=np.float32)
            self.index.add_with_ids(vectors, np.asarray(ids, dtype=np.int64))
            if self.exact is not None:
                self.exact.append(ids, vectors)

    def remove(self, ids: np.ndarray | list[int]) -> None:
        """Remove chunk ids (absent ids are ignored)."""
        if len(ids):
            self.index.remove_ids(np.asarray(ids, dtype=np.int64))

    def search(self, query: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-n (scores, ids) for one query vector."""
        scores, ids = self.search_batch(query.reshape(1, -1), n)
        keep = ids[0] >= 0
        return scores[0][keep], ids[0][keep]

    def search_batch(self, queries: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-n (scores, ids) for each query row, in one scan of the index; ids of -1 mark empty slots. A compressed
        index scores its `refine` x n best candidates exactly and keeps the n best."""
        n = min(n, len(self))
        if n <= 0:
            return np.zeros((len(queries), 0), dtype=np.float32), np.zeros((len(queries), 0), dtype=np.int64)
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        if self.exact is None:
            return cast(tuple[np.ndarray, np.ndarray], self.index.search(queries, n))
        _, candidates = self.index.search(queries, min(len(self), n * self.refine))
        return self.exact.rescored(queries, candidates, n)

    def vectors(self, ids: "list[int] | np.ndarray") -> np.ndarray:
        """The stored vectors of these chunk ids (a compressed index's: the exact ones, read from disk)."""
        if not len(ids):
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.exact is not None:
            return self.exact.read(ids)
        return cast(np.ndarray, self.index.reconstruct_batch(np.asarray(ids, dtype=np.int64)))

    def ids(self) -> np.ndarray:
        """Every chunk id in the index."""
        faiss = self._faiss
        if self.kind == "flat":
            return cast(np.ndarray, faiss.vector_to_array(self.index.id_map).astype(np.int64))
        lists = self.index.invlists
        parts = [faiss.rev_swig_ptr(lists.get_ids(i), lists.list_size(i)).copy() for i in range(self.index.nlist) if lists.list_size(i)]
        return np.sort(np.concatenate(parts)).astype(np.int64) if parts else np.zeros(0, np.int64)

    def missing_vectors(self) -> np.ndarray:
        """A compressed index's chunk ids whose float32 vector it lacks (loaded where its segment files are not)."""
        return self.exact.missing(self.ids()) if self.exact is not None else np.zeros(0, np.int64)

    def save(self, directory: Path, version: int) -> None:
        """Persist as chunks.v{version}.faiss (atomically) and drop files of older versions; a compressed index
        publishes its float32 vectors first (an index of another kind deletes those of an earlier compressed one)."""
        if self.exact is not None:
            if directory != self.exact.directory:
                raise ValueError(f"a compressed index keeps its vectors in {self.exact.directory}, not {directory}")
            self.exact.save(self.ids())
        target = directory / index_file(version)
        tmp = directory / f".chunks.v{version}.faiss.tmp"
        self._faiss.write_index(self.index, str(tmp))
        os.replace(tmp, target)
        for path in directory.glob("chunks.v*.faiss"):
            if path != target:
                path.unlink(missing_ok=True)
        if self.exact is None:
            discard_segments(directory)

    @classmethod
    def load(cls, directory: Path, version: int, dim: int, nprobe: int = NPROBE, refine: int = REFINE) -> "VectorIndex | None":
        """The index persisted for exactly this Lance version, or None when missing or stale (a compressed one with
        the float32 vectors its directory holds: `missing_vectors` says which are to be added)."""
        path = directory / index_file(version)
        if not path.exists():
            return None
        loaded = cls(dim, nprobe, refine)
        try:
            loaded.index = loaded._faiss.read_index(str(path))
        except RuntimeError:
            return None
        if loaded.index.d != dim:
            return None
        loaded.set_nprobe()
        if loaded.kind == "compressed":
            loaded.exact = ExactVectors.open(directory, dim, loaded.ids())
        return loaded

    @classmethod
    def load_latest(cls, directory: Path, dim: int, nprobe: int = NPROBE, refine: int = REFINE) -> "VectorIndex | None":
        """The most recent persisted index, whatever Lance version it reflects (to catch up from)."""
        versions = sorted((int(m.group(1)) for p in directory.glob("chunks.v*.faiss") if (m := _FILE.match(p.name))), reverse=True)
        for version in versions:
            loaded = cls.load(directory, version, dim, nprobe, refine)
            if loaded is not None:
                return loaded
        return None
