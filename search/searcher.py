"""Query → encoder → FAISS top chunks → documents ranked by their best chunk, with their best passages."""

import time
from typing import Any

import numpy as np

from indexer.encoder import Encoder
from search.results import DocumentHit, Passage, SearchFilters, SearchResponse
from store.lance_store import Store, vectors_of


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
        started = time.perf_counter()
        filters = filters or SearchFilters()
        vector = self.encoder.embed_query(query)
        self.store.refresh()  # the latest committed version, pinned for this search
        best = self._best_chunks(vector, k, filters)
        top = sorted(best.items(), key=lambda item: (-item[1], self._docs[item[0]]["path"]))[:k]
        passages = self._passages(vector, [doc_id for doc_id, _ in top])
        results = [
            DocumentHit(doc_id, self._docs[doc_id]["path"], self._docs[doc_id]["title"], round(score, 6), passages.get(doc_id, []))
            for doc_id, score in top
        ]
        return SearchResponse(query, round((time.perf_counter() - started) * 1000, 3), results)

    def _best_chunks(self, vector: np.ndarray, k: int, filters: SearchFilters) -> dict[str, float]:
        """Best chunk similarity per allowed current document, widening the FAISS search until k are found."""
        index = self.store.vector_index()
        docs = self._documents()
        n = max(self.candidates, 10 * k)
        while True:
            scores, ids = index.search(vector, n)
            rows = self.store.chunks_by_id(ids.tolist(), ["id", "document_id", "content_hash"]).to_pylist()
            owner = {r["id"]: (r["document_id"], r["content_hash"]) for r in rows}
            best: dict[str, float] = {}
            for score, chunk_id in zip(scores.tolist(), ids.tolist()):
                doc_id, digest = owner.get(chunk_id, (None, None))
                doc = docs.get(doc_id)
                if doc is None or doc["content_hash"] != digest or doc_id in best or not filters.allows(doc["path"], doc["mtime"]):
                    continue
                best[doc_id] = score
            if len(best) >= k or n >= len(index):
                return best
            n *= 4

    def _passages(self, vector: np.ndarray, doc_ids: list[str]) -> dict[str, list[Passage]]:
        """The best passages of each document, scored exactly against the query."""
        if not doc_ids or self.passages <= 0:
            return {}
        table = self.store.chunks_of_documents(doc_ids, ["document_id", "content_hash", "char_start", "char_end", "text", "vector"])
        if table.num_rows == 0:
            return {}
        sims = vectors_of(table) @ vector
        by_doc: dict[str, list[tuple[float, dict]]] = {}
        for sim, row in zip(sims.tolist(), table.select(["document_id", "content_hash", "char_start", "char_end", "text"]).to_pylist()):
            if self._docs[row["document_id"]]["content_hash"] == row["content_hash"]:
                by_doc.setdefault(row["document_id"], []).append((sim, row))
        out: dict[str, list[Passage]] = {}
        for doc_id, scored in by_doc.items():
            scored.sort(key=lambda item: (-item[0], item[1]["char_start"]))
            out[doc_id] = [Passage(r["text"], r["char_start"], r["char_end"], round(s, 6)) for s, r in scored[: self.passages]]
        return out
