"""Query → encoder → FAISS top chunks → documents ranked by their best chunk, with their best passages.

Queries can be searched in batches: one encoder call and one scan of the FAISS index serve them all,
which is what keeps latency low when many clients ask at once on a small CPU.
"""

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from indexer.encoder import Encoder
from search.results import DocumentHit, Passage, SearchFilters, SearchResponse
from store.lance_store import ChunkOwners, Store
from store.vector_index import VectorIndex


@dataclass(frozen=True)
class Query:
    """One search request."""

    text: str
    k: int = 10
    filters: SearchFilters = SearchFilters()


class Searcher:
    """Ranks documents by max-sim: a document scores as its most similar chunk."""

    def __init__(self, store: Store, encoder: Encoder, passages: int = 3, candidates: int = 100) -> None:
        self.store = store
        self.encoder = encoder
        self.passages = passages
        self.candidates = candidates
        self._docs: dict[str, dict[str, Any]] = {}
        self._docs_version = -1

    def _documents(self) -> dict[str, dict[str, Any]]:
        """Current documents by id, cached per documents-table version."""
        version = self.store.documents.version
        if version != self._docs_version:
            table = self.store.document_table().select(["id", "path", "title", "content_hash", "mtime"])
            self._docs = {row["id"]: row for row in table.to_pylist()}
            self._docs_version = version
        return self._docs

    def search(self, query: str, k: int = 10, filters: SearchFilters | None = None) -> SearchResponse:
        """Top-k documents for `query`, each with up to `passages` best passages."""
        return self.search_many([Query(query, k, filters or SearchFilters())])[0]

    def search_many(self, queries: list[Query]) -> list[SearchResponse]:
        """Several searches against one committed version of the index, sharing the encoder call and the scan."""
        started = time.perf_counter()
        vectors = self.encoder.embed([q.text for q in queries], kind="query")
        self.store.refresh()  # the latest committed version, pinned for these searches
        index, owners, docs = self.store.vector_index(), self.store.chunk_owners(), self._documents()
        n = max(self.candidates, 10 * max(q.k for q in queries))
        scores, ids = index.search_batch(vectors, n)
        tops = []
        for q, vector, row_scores, row_ids in zip(queries, vectors, scores, ids):
            best = self._group(row_scores, row_ids, q, owners, docs)
            width = n
            while len(best) < q.k and width < len(index):  # filters left too few: look deeper for this query
                width *= 4
                wide_scores, wide_ids = index.search(vector, width)
                best = self._group(wide_scores, wide_ids, q, owners, docs)
            tops.append(sorted(best.items(), key=lambda item: (-item[1], docs[item[0]]["path"]))[: q.k])
        passages = self._passages(vectors, tops, index, owners, docs)
        took = round((time.perf_counter() - started) * 1000, 3)
        return [
            SearchResponse(q.text, took, [DocumentHit(d, docs[d]["path"], docs[d]["title"], round(s, 6), passages.get((i, d), []))
                                          for d, s in top])
            for i, (q, top) in enumerate(zip(queries, tops))
        ]

    @staticmethod
    def _group(scores: np.ndarray, ids: np.ndarray, query: Query, owners: ChunkOwners, docs: dict[str, dict[str, Any]]) -> dict[str, float]:
        """Best chunk similarity per allowed, current document (chunk order is best first)."""
        best: dict[str, float] = {}
        for score, chunk_id in zip(scores.tolist(), ids.tolist()):
            doc_id, digest = owners.owner.get(chunk_id, (None, None))
            doc = docs.get(doc_id)
            if doc is None or doc["content_hash"] != digest or doc_id in best or not query.filters.allows(doc["path"], doc["mtime"]):
                continue
            best[doc_id] = score
        return best

    def _passages(self, vectors: np.ndarray, tops: list[list[tuple[str, float]]], index: VectorIndex,
                  owners: ChunkOwners, docs: dict[str, dict[str, Any]]) -> dict[tuple[int, str], list[Passage]]:
        """The best passages of each result document, scored exactly against its query; texts in one Lance read."""
        if self.passages <= 0:
            return {}
        chosen: dict[tuple[int, str], list[tuple[float, int]]] = {}
        for i, top in enumerate(tops):
            for doc_id, _ in top:
                members = owners.members.get((doc_id, docs[doc_id]["content_hash"]), [])
                sims = index.vectors(members) @ vectors[i]
                order = np.argsort(-sims, kind="stable")[: self.passages]
                chosen[(i, doc_id)] = [(float(sims[j]), members[j]) for j in order]
        wanted = sorted({chunk_id for picks in chosen.values() for _, chunk_id in picks})
        rows = {r["id"]: r for r in self.store.chunks_by_id(wanted, ["id", "char_start", "char_end", "text"]).to_pylist()}
        return {
            key: [Passage(rows[c]["text"], rows[c]["char_start"], rows[c]["char_end"], round(s, 6)) for s, c in picks if c in rows]
            for key, picks in chosen.items()
        }
