"""The FAISS index over chunk vectors: exact inner product with chunk ids, persisted per Lance version."""

import os
import re
from pathlib import Path

import numpy as np

_FILE = re.compile(r"^chunks\.v(\d+)\.faiss$")


class VectorIndex:
    """Exact inner-product search over chunk vectors, keyed by chunk id."""

    def __init__(self, dim: int) -> None:
        import faiss

        self._faiss = faiss
        self.dim = dim
        self.index = faiss.IndexIDMap2(faiss.IndexFlatIP(dim))

    def __len__(self) -> int:
        return int(self.index.ntotal)

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Add vectors under their chunk ids."""
        if len(ids):
            self.index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), np.asarray(ids, dtype=np.int64))

    def remove(self, ids: np.ndarray | list[int]) -> None:
        """Remove chunk ids (absent ids are ignored)."""
        if len(ids):
            self.index.remove_ids(np.asarray(ids, dtype=np.int64))

    def search(self, query: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-n (scores, ids) for one query vector; ids of -1 mark empty slots."""
        n = min(n, len(self))
        if n <= 0:
            return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64)
        scores, ids = self.index.search(np.ascontiguousarray(query.reshape(1, -1), dtype=np.float32), n)
        keep = ids[0] >= 0
        return scores[0][keep], ids[0][keep]

    def search_batch(self, queries: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-n (scores, ids) for each query row, in one scan of the index; ids of -1 mark empty slots."""
        n = min(n, len(self))
        if n <= 0:
            return np.zeros((len(queries), 0), dtype=np.float32), np.zeros((len(queries), 0), dtype=np.int64)
        return self.index.search(np.ascontiguousarray(queries, dtype=np.float32), n)

    def vectors(self, ids: list[int]) -> np.ndarray:
        """The stored vectors of these chunk ids."""
        if not ids:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self.index.reconstruct_batch(np.asarray(ids, dtype=np.int64))

    def ids(self) -> np.ndarray:
        """Every chunk id in the index."""
        return self._faiss.vector_to_array(self.index.id_map).astype(np.int64)

    def save(self, directory: Path, version: int) -> None:
        """Persist as chunks.v{version}.faiss (atomically) and drop files of older versions."""
        target = directory / f"chunks.v{version}.faiss"
        tmp = directory / f".chunks.v{version}.faiss.tmp"
        self._faiss.write_index(self.index, str(tmp))
        os.replace(tmp, target)
        for path in directory.glob("chunks.v*.faiss"):
            if path != target:
                path.unlink(missing_ok=True)

    @classmethod
    def load(cls, directory: Path, version: int, dim: int) -> "VectorIndex | None":
        """The index persisted for exactly this Lance version, or None when missing or stale."""
        path = directory / f"chunks.v{version}.faiss"
        if not path.exists():
            return None
        loaded = cls(dim)
        try:
            loaded.index = loaded._faiss.read_index(str(path))
        except RuntimeError:
            return None
        return loaded if loaded.index.d == dim else None

    @classmethod
    def load_latest(cls, directory: Path, dim: int) -> "VectorIndex | None":
        """The most recent persisted index, whatever Lance version it reflects (to catch up from)."""
        versions = sorted((int(m.group(1)) for p in directory.glob("chunks.v*.faiss") if (m := _FILE.match(p.name))), reverse=True)
        for version in versions:
            loaded = cls.load(directory, version, dim)
            if loaded is not None:
                return loaded
        return None
