"""What one batch of searches reads: a single committed version of the index, with documents addressed by row."""

from typing import Any, Protocol, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lodex.search.results import SearchFilters
from lodex.store.base import Store
from lodex.store.chunk_owners import ChunkOwners, version_keys
from lodex.store.keyword_delta import KeywordDelta
from lodex.store.schema import vectors_of
from lodex.text.languages import detect

DOCUMENT_FIELDS = ["id", "path", "title", "content_hash", "mtime", "language"]


_ALLOWED_CACHE = 200_000  # (filters, document row) verdicts a snapshot keeps


class SearchIndex(Protocol):
    """What a snapshot's searches ask of its vector index (`snapshot_source.SharedIndex`, or a store's own index)."""

    def __len__(self) -> int: ...

    def search_batch(self, queries: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]: ...

    def vectors(self, ids: "list[int] | np.ndarray") -> np.ndarray: ...


class DocumentView:
    """The documents table of one version, by row, kept as Arrow columns (values are taken out only for the rows
    a search needs): ids, paths, titles, mtimes and "id:hash" version keys."""

    def __init__(self, table: pa.Table) -> None:
        table = table.combine_chunks()
        self.ids, self.paths, self.titles = table["id"], table["path"], table["title"]
        self.mtimes = table["mtime"].to_numpy()
        self.keys = version_keys(table["id"], table["content_hash"])
        self.languages = table["language"]
        self._mix: dict[str, int] | None = None

    def language_mix(self) -> dict[str, int]:
        """Documents per language (ISO 639-1; "" for those with none recorded), most first (counted once)."""
        if self._mix is None:
            counts = pc.value_counts(self.languages.fill_null("")).to_pylist()
            self._mix = {c["values"]: c["counts"] for c in sorted(counts, key=lambda c: (-c["counts"], c["values"]))}
        return self._mix

    def query_language(self, text: str) -> str | None:
        """A query's language: the detected one when some document has it, else (a short query, or a language no
        document has) the language most documents have."""
        mix = {k: v for k, v in self.language_mix().items() if k}
        main = next(iter(mix), None)
        found = detect(text, main)
        return found if found in mix or not mix else main

    def __len__(self) -> int:
        return len(self.ids)

    def rows(self, rows: list[int], column: str) -> list[Any]:
        """One column's values for these rows."""
        return cast(list[Any], getattr(self, column).take(pa.array(rows, pa.int64())).to_pylist())


class MeanVectors:
    """Documents' mean chunk vectors by "id:hash" version key, kept across index versions (a key names one
    content, so its vector never changes): every document's read at the first search, then only those of
    documents that changed since (all again when many did)."""

    FEW = 64  # missing vectors read one by one up to this many; above, all of them in one scan

    def __init__(self, store: Store) -> None:
        self.store = store
        self._vectors: dict[str, np.ndarray] = {}

    def of(self, docs: DocumentView, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(vectors, found) for these document rows; rows without a stored vector get zeros and found False."""
        keys = docs.keys.take(pa.array(rows, pa.int64())).to_pylist()
        vectors = self._held(docs, keys)
        dim = self.store.dim
        found = np.array([k in vectors for k in keys], bool)
        out = np.zeros((len(keys), dim), np.float32)
        if found.any():
            out[found] = np.stack([vectors[k] for k, f in zip(keys, found) if f])
        return out, found

    def prefetch(self, docs: DocumentView) -> None:
        """Read the vectors of the documents not held yet (after a commit: those that changed), so that searches
        find them held; nothing is copied out."""
        self._held(docs, docs.keys.to_pylist())

    def _held(self, docs: DocumentView, keys: list[str]) -> dict[str, np.ndarray]:
        """The held vectors, those of `keys` read first when missing."""
        vectors = self._vectors  # read once: a refreshing thread may put a new dict in its place meanwhile
        missing = [k for k in dict.fromkeys(keys) if k not in vectors]
        if len(missing) > self.FEW or len(vectors) + len(missing) > 2 * len(docs) + 1024:
            vectors = {}  # the first search, many changed documents, or too many replaced versions kept
            self._add(vectors, self.store.scan_documents(["id", "content_hash", "vector"]))
            self._vectors = vectors
        elif missing:
            self._add(vectors, self.store.document_rows([k.split(":", 1)[0] for k in missing], ["id", "content_hash", "vector"]))
        return vectors

    @staticmethod
    def _add(vectors: dict[str, np.ndarray], table: pa.Table) -> None:
        """Keep these documents' vectors (rows of id, content_hash, vector)."""
        keys = version_keys(table["id"], table["content_hash"]).to_pylist()
        vectors.update(zip(keys, vectors_of(table)))


class VersionMap:
    """Chunk owners joined to documents: each document-version code's document row (-1: not the current version
    of a document) and each row's code."""

    def __init__(self, owners: ChunkOwners, docs: DocumentView) -> None:
        self.row_of_code = pc.index_in(owners.keys, value_set=docs.keys).fill_null(-1).to_numpy().astype(np.int64)
        self.code_of_row = np.full(len(docs), -1, np.int64)
        current = self.row_of_code >= 0
        self.code_of_row[self.row_of_code[current]] = np.flatnonzero(current)


class Snapshot:
    """One committed version: the vector index, chunk owners and documents, and lookups between them. Read-only once
    made; `pins` counts the searches using it (its source frees what it alone needed once they are done)."""

    def __init__(
        self,
        versions: tuple[int, int],
        index: "SearchIndex",
        docs: DocumentView,
        versions_map: VersionMap,
        owners: ChunkOwners,
        means: MeanVectors,
        keywords: KeywordDelta | None = None,
        rows_since: int | None = None,
    ) -> None:
        self.versions = versions  # (documents, chunks) table versions
        self.version = versions[1]  # of the chunks table
        # the oldest chunks version whose Lance row ids name the same chunks here (stable row ids: never reused, so
        # hits an older version gave by row id map through this snapshot's owners, the rows gone since left out)
        self.rows_since = self.version if rows_since is None else rows_since
        self.index = index
        self.owners = owners
        self.docs = docs
        self.versions_map = versions_map
        self.means = means
        self.keywords = keywords  # the chunk rows the keyword index lacks (None: Lance scans them itself)
        self.pins = 0
        self._allowed: dict[tuple[SearchFilters, int], bool] = {}

    def rows(self, chunk_ids: np.ndarray) -> np.ndarray:
        """The document row of each chunk when it belongs to that document's current version, else -1."""
        codes = self.owners.codes(chunk_ids)
        return np.where(codes >= 0, self.versions_map.row_of_code[np.maximum(codes, 0)], -1)

    def allowed(self, rows: np.ndarray, filters: SearchFilters) -> np.ndarray:
        """Which of these document rows pass the filters."""
        rows_list = rows.tolist()
        cache = self._allowed  # searches of several threads share it: replaced, never emptied in place
        if len(cache) > _ALLOWED_CACHE:  # many distinct filters while no commit comes: start afresh
            self._allowed = cache = {}
        new = [r for r in dict.fromkeys(rows_list) if (filters, r) not in cache]
        for row, path, language in zip(new, self.docs.rows(new, "paths"), self.docs.rows(new, "languages")):
            cache[(filters, row)] = filters.allows(path, float(self.docs.mtimes[row]), language)
        return np.array([cache[(filters, r)] for r in rows_list], bool)

    def chunk_vectors(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every chunk of these documents' current versions: ids and vectors, concatenated, and how many each has."""
        ids, lengths = self.owners.members(self.versions_map.code_of_row[rows])
        return ids, self.index.vectors(ids), lengths

    def mean_vectors(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """These documents' mean vectors, and which have one."""
        return self.means.of(self.docs, rows)
