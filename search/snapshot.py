"""What one batch of searches reads: a single committed version of the index, with documents addressed by row."""

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from search.results import SearchFilters
from store.lance_store import ChunkOwners, Store, vectors_of
from store.vector_index import VectorIndex


class DocumentView:
    """The documents table of one version, by row: ids, paths, titles, mtimes and "id:hash" version keys."""

    def __init__(self, table: pa.Table) -> None:
        self.ids: list[str] = table["id"].to_pylist()
        self.paths: list[str] = table["path"].to_pylist()
        self.titles: list[str] = table["title"].to_pylist()
        self.mtimes: list[float] = table["mtime"].to_pylist()
        self.id_array = table["id"].combine_chunks()
        self.keys = pc.binary_join_element_wise(self.id_array, table["content_hash"].combine_chunks(), ":")
        self._vectors: tuple[np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def mean_vectors(self, store: Store) -> tuple[np.ndarray, np.ndarray]:
        """Each row's mean chunk vector: (row → matrix row, -1 for none; matrix), read once per version."""
        if self._vectors is None:
            table = store.documents.search().select(["id", "vector"]).limit(None).to_arrow()
            where = pc.index_in(self.id_array, value_set=table["id"].combine_chunks())
            self._vectors = (where.fill_null(-1).to_numpy().astype(np.int64), vectors_of(table))
        return self._vectors


class VersionMap:
    """Chunk owners joined to documents: each document-version code's document row (-1: not the current version
    of a document) and each row's code."""

    def __init__(self, owners: ChunkOwners, docs: DocumentView) -> None:
        self.row_of_code = pc.index_in(owners.keys, value_set=docs.keys).fill_null(-1).to_numpy().astype(np.int64)
        self.code_of_row = np.full(len(docs), -1, np.int64)
        current = self.row_of_code >= 0
        self.code_of_row[self.row_of_code[current]] = np.flatnonzero(current)


class Snapshot:
    """One committed version: the FAISS index, chunk owners and documents, and lookups between them."""

    def __init__(self, store: Store, version: int, index: VectorIndex, docs: DocumentView, versions: VersionMap, owners: ChunkOwners) -> None:
        self.store = store
        self.version = version  # of the chunks table
        self.index = index
        self.owners = owners
        self.docs = docs
        self.versions = versions
        self._allowed: dict[tuple[SearchFilters, int], bool] = {}

    def rows(self, chunk_ids: np.ndarray) -> np.ndarray:
        """The document row of each chunk when it belongs to that document's current version, else -1."""
        codes = self.owners.codes(chunk_ids)
        return np.where(codes >= 0, self.versions.row_of_code[np.maximum(codes, 0)], -1)

    def allowed(self, rows: np.ndarray, filters: SearchFilters) -> np.ndarray:
        """Which of these document rows pass the filters."""
        out = np.empty(len(rows), bool)
        for i, row in enumerate(rows.tolist()):
            key = (filters, row)
            if key not in self._allowed:
                self._allowed[key] = filters.allows(self.docs.paths[row], self.docs.mtimes[row])
            out[i] = self._allowed[key]
        return out

    def chunk_vectors(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every chunk of these documents' current versions: ids and vectors, concatenated, and how many each has."""
        ids, lengths = self.owners.members(self.versions.code_of_row[rows])
        return ids, self.index.vectors(ids), lengths

    def mean_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """Each document row's mean-vector row (-1: none) and the matrix."""
        return self.docs.mean_vectors(self.store)
