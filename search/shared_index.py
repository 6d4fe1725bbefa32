"""The one vector index every search of a snapshot source reads: shared by searches, changed alone by a refresh."""

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from lodex.store.vector_index import VectorIndex


class SharedIndex:
    """One vector index read by every search of a source's snapshots and changed only by its refresh: searches
    share it, a change (a commit's vectors added, replaced ones removed) has it alone for as long as FAISS takes."""

    def __init__(self, index: VectorIndex) -> None:
        self.index = index
        self._readers = 0
        self._changing = threading.Condition()

    def __len__(self) -> int:
        return len(self.index)

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Hold the index unchanged for the block (searches, a save)."""
        with self._changing:
            self._readers += 1
        try:
            yield
        finally:
            with self._changing:
                self._readers -= 1
                if not self._readers:
                    self._changing.notify_all()

    @contextmanager
    def _alone(self) -> Iterator[None]:
        with self._changing:
            self._changing.wait_for(lambda: not self._readers)
            yield

    def search_batch(self, queries: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        with self.reading():
            return self.index.search_batch(queries, n)

    def vectors(self, ids: "list[int] | np.ndarray") -> np.ndarray:
        with self.reading():
            return self.index.vectors(ids)

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        if len(ids):
            with self._alone():
                self.index.add(ids, vectors)

    def remove(self, ids: np.ndarray) -> None:
        if len(ids):
            with self._alone():
                self.index.remove(ids)
