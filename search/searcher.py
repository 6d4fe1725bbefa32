"""Query → dense (FAISS) and/or keyword (BM25) chunk candidates → fused → documents ranked, with best passages.

Modes: `dense` (cosine of the query to chunk vectors), `bm25` (Lance's full-text index over chunk text) and
`hybrid` (reciprocal rank fusion of both at chunk level). Document rankings: `max` (best chunk), `topm`
(mean of the m best chunks), `mean` (the document's mean vector) and `blend` (best chunk and mean vector).
Queries can be searched in batches: one encoder call and one scan of the FAISS index serve them all, which
is what keeps latency low when many clients ask at once on a small CPU.
"""

import time
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from indexer.encoder import Encoder
from search.highlight import highlight_spans, query_stems
from search.results import DocumentHit, Passage, SearchFilters, SearchResponse
from store.lance_store import ChunkOwners, Store, vectors_of
from store.vector_index import VectorIndex

Mode = Literal["dense", "bm25", "hybrid"]
Ranking = Literal["max", "topm", "mean", "blend"]
MODES: tuple[str, ...] = ("dense", "bm25", "hybrid")
RANKINGS: tuple[str, ...] = ("max", "topm", "mean", "blend")


@dataclass(frozen=True)
class Query:
    """One search request; mode and ranking default to the searcher's."""

    text: str
    k: int = 10
    filters: SearchFilters = SearchFilters()
    mode: Mode | None = None
    ranking: Ranking | None = None


@dataclass(frozen=True)
class Fusion:
    """How hybrid mode combines its two chunk rankings, then feeds the result back to the dense side.

    `convex`: dense_weight * min-max-normalized cosine + (1 - dense_weight) * min-max-normalized BM25;
    `rrf`: 1 / (rrf_k + dense rank) + bm25_weight / (rrf_k + BM25 rank). With `feedback_chunks` > 0 the
    query vector is moved toward the mean of the best fused chunks (weight `feedback_weight`), searched
    again, and fused again with BM25 (pseudo-relevance feedback; no extra encoding)."""

    method: Literal["convex", "rrf"] = "convex"
    dense_weight: float = 0.6
    rrf_k: float = 60.0
    bm25_weight: float = 1.0
    feedback_chunks: int = 5
    feedback_weight: float = 1.0
    doc_dense_weight: float = 0.7  # hybrid blend: the dense share when document scores are fused
    hybrid_blend_alpha: float = 0.6  # hybrid blend: the best chunk's share of the dense document score
    top_m: int = 3
    blend_alpha: float = 0.5  # dense blend: alpha * best chunk + (1 - alpha) * mean-vector cosine
    depth: int = 100  # convex: scores are normalized over each list's top `depth` hits, so k does not change them

    def fuse(self, dense: list[tuple[Any, str, float]], keyword: list[tuple[Any, str, float]]) -> tuple[dict[Any, float], dict[Any, str]]:
        """Fused score per key (a chunk id; a document id when fusing document rankings), and each key's document."""
        fused: dict[Any, float] = {}
        owner: dict[Any, str] = {}
        if self.method == "rrf":
            lists = ((1.0, dense, None), (self.bm25_weight, keyword, None))
        else:
            lists = ((self.dense_weight, dense, _minmax([h[2] for h in dense[: self.depth]])),
                     (1.0 - self.dense_weight, keyword, _minmax([h[2] for h in keyword[: self.depth]])))
        for weight, hits, scale in lists:
            for rank, (c, d, score) in enumerate(hits, start=1):
                part = weight / (self.rrf_k + rank) if scale is None else weight * max(score - scale[0], 0.0) / scale[1]
                fused[c] = fused.get(c, 0.0) + part
                owner[c] = d
        return fused, owner


def _minmax(scores: list[float]) -> tuple[float, float]:
    """(lowest score, span) of some scores, for min-max normalization."""
    if not scores:
        return 0.0, 1.0
    low = min(scores)
    return low, max(max(scores) - low, 1e-9)


class _Context:
    """What one batch of searches reads: a single committed version of the index."""

    def __init__(self, searcher: "Searcher") -> None:
        store = searcher.store
        store.refresh()  # the latest committed version, pinned for these searches
        self.store = store
        self.index: VectorIndex = store.vector_index()
        self.owners: ChunkOwners = store.chunk_owners()
        self.docs = searcher._documents()
        self.searcher = searcher
        self.vectors: dict[str, tuple[list[int], np.ndarray]] = {}
        self._doc_vectors: tuple[dict[str, int], np.ndarray] | None = None

    def doc_vectors(self) -> tuple[dict[str, int], np.ndarray]:
        """Document mean vectors (row by id), read once per batch."""
        if self._doc_vectors is None:
            self._doc_vectors = self.searcher._document_vectors()
        return self._doc_vectors

    def current(self, owner: tuple[str, str] | None, query: Query) -> str | None:
        """The document id of a chunk's (document id, content hash) when that is the document's current
        version and passes the filters."""
        doc = self.docs.get(owner[0]) if owner else None
        if doc is None or doc["content_hash"] != owner[1] or not query.filters.allows(doc["path"], doc["mtime"]):
            return None
        return owner[0]

    def chunk_vectors(self, doc_id: str) -> tuple[list[int], np.ndarray]:
        """Every chunk of a document's current version and its vector (cached per batch)."""
        if doc_id not in self.vectors:
            self.load_vectors([doc_id])
        return self.vectors[doc_id]

    def load_vectors(self, doc_ids: list[str]) -> None:
        """Read the chunk vectors of these documents (those not cached yet) from the index in one call."""
        missing = [d for d in dict.fromkeys(doc_ids) if d not in self.vectors]
        if not missing:
            return
        members = [self.owners.members(d, self.docs[d]["content_hash"]) for d in missing]
        vectors = self.index.vectors([c for m in members for c in m])
        for doc_id, chunk_ids, block in zip(missing, members, np.split(vectors, np.cumsum([len(m) for m in members])[:-1])):
            self.vectors[doc_id] = (chunk_ids, block)


class Searcher:
    """Ranks documents for queries; see the module docstring for the modes and rankings."""

    def __init__(self, store: Store, encoder: Encoder, passages: int = 3, candidates: int = 100,
                 mode: Mode = "hybrid", ranking: Ranking = "blend", fusion: Fusion = Fusion()) -> None:
        self.store = store
        self.encoder = encoder
        self.passages = passages
        self.candidates = candidates
        self.mode = mode
        self.ranking = ranking
        self.fusion = fusion
        self._doc_fusion = replace(fusion, dense_weight=fusion.doc_dense_weight)  # fusing document scores
        self._docs: dict[str, dict[str, Any]] = {}
        self._docs_version = -1
        self._doc_vectors: tuple[int, dict[str, int], np.ndarray] | None = None

    def _documents(self) -> dict[str, dict[str, Any]]:
        """Current documents by id, cached per documents-table version."""
        version = self.store.documents.version
        if version != self._docs_version:
            table = self.store.document_table().select(["id", "path", "title", "content_hash", "mtime"])
            self._docs = {row["id"]: row for row in table.to_pylist()}
            self._docs_version = version
        return self._docs

    def _document_vectors(self) -> tuple[dict[str, int], np.ndarray]:
        """Each document's mean chunk vector (row by id), cached per documents-table version."""
        version = self.store.documents.version
        if self._doc_vectors is None or self._doc_vectors[0] != version:
            table = self.store.documents.search().select(["id", "vector"]).limit(None).to_arrow()
            self._doc_vectors = (version, {d: i for i, d in enumerate(table["id"].to_pylist())}, vectors_of(table))
        return self._doc_vectors[1], self._doc_vectors[2]

    def search(self, query: str, k: int = 10, filters: SearchFilters | None = None,
               mode: Mode | None = None, ranking: Ranking | None = None) -> SearchResponse:
        """Top-k documents for `query`, each with up to `passages` best passages."""
        return self.search_many([Query(query, k, filters or SearchFilters(), mode, ranking)])[0]

    def search_many(self, queries: list[Query]) -> list[SearchResponse]:
        """Several searches against one committed version of the index, sharing the encoder call and the scans."""
        started = time.perf_counter()
        vectors = self.encoder.embed([q.text for q in queries], kind="query")
        ctx = _Context(self)
        n = max(self.candidates, 10 * max(q.k for q in queries))
        first = self._retrieve_batch(ctx, queries, vectors, n)
        tops, chunk_order = [], []
        for i, (q, vector) in enumerate(zip(queries, vectors)):
            width, hits = n, first[i]
            while True:
                ranked, order = self._rank(ctx, i, q, vector, *hits)
                if len(ranked) >= q.k or width >= len(ctx.index):
                    break
                width *= 4  # filters left too few: look deeper for this query
                hits = self._retrieve_batch(ctx, [q], vector[None, :], width)[0]
            tops.append(sorted(ranked.items(), key=lambda item: (-item[1], ctx.docs[item[0]]["path"]))[: q.k])
            chunk_order.append(order)
        passages = self._passages(ctx, queries, vectors, tops, chunk_order)
        took = round((time.perf_counter() - started) * 1000, 3)
        return [
            SearchResponse(q.text, took, [DocumentHit(d, ctx.docs[d]["path"], ctx.docs[d]["title"], round(s, 6), passages.get((i, d), []))
                                          for d, s in top], q.mode or self.mode)
            for i, (q, top) in enumerate(zip(queries, tops))
        ]

    def _retrieve_batch(self, ctx: _Context, queries: list[Query], vectors: np.ndarray, width: int) -> list[tuple[list, list, np.ndarray]]:
        """(dense hits, BM25 hits, the vector dense search used) per query, hits as (chunk id, document id, score)
        best first: one FAISS scan for the batch, one more for hybrid queries' feedback vectors."""
        modes = [q.mode or self.mode for q in queries]
        dense: list[list] = [[] for _ in queries]
        keyword: list[list] = [[] for _ in queries]
        picked = [i for i, m in enumerate(modes) if m != "bm25"]
        if picked:
            scores, ids = ctx.index.search_batch(vectors[picked], width)
            for i, row_scores, row_ids in zip(picked, scores, ids):
                dense[i] = self._candidates(ctx, queries[i], row_ids, row_scores)
        worded = [i for i, m in enumerate(modes) if m != "dense"]
        for i, hits in zip(worded, ctx.store.keyword_search([queries[i].text for i in worded], width)):
            keyword[i] = self._candidates(ctx, queries[i], *hits)
        feedback = [i for i, m in enumerate(modes) if m == "hybrid" and self.fusion.feedback_chunks > 0 and self.fusion.feedback_weight > 0]
        used = list(vectors)
        moved = []
        for i in feedback:
            fused, _ = self.fusion.fuse(dense[i], keyword[i])
            best = [c for c, _ in sorted(fused.items(), key=lambda item: -item[1])[: self.fusion.feedback_chunks]]
            vector = vectors[i] + self.fusion.feedback_weight * (ctx.index.vectors(best).mean(axis=0) if best else 0.0)
            moved.append((vector / max(float(np.linalg.norm(vector)), 1e-9)).astype(np.float32))
        if moved:
            scores, ids = ctx.index.search_batch(np.stack(moved), width)
            for i, row_scores, row_ids, vector in zip(feedback, scores, ids, moved):
                dense[i] = self._candidates(ctx, queries[i], row_ids, row_scores)
                used[i] = vector
        return list(zip(dense, keyword, used))

    def _candidates(self, ctx: _Context, q: Query, ids: np.ndarray, scores: np.ndarray) -> list[tuple[int, str, float]]:
        """(chunk id, document id, score) of the current, allowed chunks among a retriever's hits, best first."""
        out = []
        for chunk_id, score, owner in zip(ids.tolist(), scores.tolist(), ctx.owners.owners(ids)):
            if chunk_id >= 0 and (doc_id := ctx.current(owner, q)) is not None:
                out.append((chunk_id, doc_id, score))
        return out

    def _rank(self, ctx: _Context, i: int, q: Query, vector: np.ndarray, dense_hits: list[tuple[int, str, float]],
              bm25_hits: list[tuple[int, str, float]], moved: np.ndarray) -> tuple[dict[str, float], dict[int, float]]:
        """Document scores for one query, and the chunk scores (in the mode's scale) that passages follow."""
        mode, ranking, f = q.mode or self.mode, q.ranking or self.ranking, self.fusion
        if mode == "bm25":
            return _best_per_document(bm25_hits), {c: s for c, _, s in bm25_hits}
        if mode == "dense":
            chunk_scores = {c: s for c, _, s in dense_hits}
            if ranking == "max":
                return _best_per_document(dense_hits), chunk_scores
            docs = list(dict.fromkeys(d for _, d, _ in dense_hits))
            return dict(zip(docs, self._dense_scores(ctx, docs, vector, ranking))), chunk_scores
        fused, owner = f.fuse(dense_hits, bm25_hits)
        by_doc: dict[str, list[float]] = {}
        for c, s in sorted(fused.items(), key=lambda item: -item[1]):
            by_doc.setdefault(owner[c], []).append(s)
        if ranking == "max":
            return {d: s[0] for d, s in by_doc.items()}, fused
        if ranking == "topm":
            return {d: sum(s[: f.top_m]) / f.top_m for d, s in by_doc.items()}, fused
        # blend / mean: a dense score per document (for the feedback vector), fused with BM25's best chunk per
        # document, at document level
        alpha = f.hybrid_blend_alpha if ranking == "blend" else 0.0
        docs = list(by_doc)
        dense_docs = sorted(((d, d, s) for d, s in zip(docs, self._dense_scores(ctx, docs, moved, "blend", alpha))), key=lambda h: -h[2])
        keyword_docs = [(d, d, s) for d, s in _best_per_document(bm25_hits).items()]
        return self._doc_fusion.fuse(dense_docs, keyword_docs)[0], fused

    def _dense_scores(self, ctx: _Context, doc_ids: list[str], vector: np.ndarray, ranking: str, alpha: float | None = None) -> list[float]:
        """Documents' dense scores under `ranking` (their chunks scored exactly, in one matrix product);
        `alpha`: the blend's best-chunk share."""
        if not doc_ids:
            return []
        ctx.load_vectors(doc_ids)
        blocks = [ctx.vectors[d][1] for d in doc_ids]
        sims = np.split(np.concatenate(blocks) @ vector, np.cumsum([len(b) for b in blocks])[:-1])
        best = [float(s.max()) if len(s) else 0.0 for s in sims]
        if ranking == "max":
            return best
        if ranking == "topm":
            return [float(np.sort(s)[-self.fusion.top_m:].mean()) if len(s) else 0.0 for s in sims]
        rows, matrix = ctx.doc_vectors()
        means = [float(matrix[rows[d]] @ vector) if d in rows else 0.0 for d in doc_ids]
        alpha = self.fusion.blend_alpha if alpha is None else alpha
        return means if ranking == "mean" else [alpha * b + (1 - alpha) * m for b, m in zip(best, means)]

    def _passages(self, ctx: _Context, queries: list[Query], vectors: np.ndarray, tops: list[list[tuple[str, float]]],
                  chunk_order: list[dict[int, float]]) -> dict[tuple[int, str], list[Passage]]:
        """The best passages of each result document — the chunks the mode ranked highest, then by cosine —
        with their cosine to the query and the query words they contain; texts in one Lance read."""
        if self.passages <= 0:
            return {}
        chosen: dict[tuple[int, str], list[tuple[float, int]]] = {}
        for i, top in enumerate(tops):
            order = chunk_order[i]
            for doc_id, _ in top:
                members, chunk_vectors = ctx.chunk_vectors(doc_id)
                sims = chunk_vectors @ vectors[i]
                keys = sorted(range(len(members)), key=lambda j: (-order.get(members[j], float("-inf")), -sims[j], j))
                chosen[(i, doc_id)] = [(float(sims[j]), members[j]) for j in keys[: self.passages]]
        wanted = sorted({chunk_id for picks in chosen.values() for _, chunk_id in picks})
        rows = {r["id"]: r for r in ctx.store.chunks_by_id(wanted, ["id", "char_start", "char_end", "text"]).to_pylist()}
        stems = [query_stems(q.text) for q in queries]
        return {
            (i, d): [Passage(rows[c]["text"], rows[c]["char_start"], rows[c]["char_end"], round(s, 6),
                             highlight_spans(rows[c]["text"], stems[i])) for s, c in picks if c in rows]
            for (i, d), picks in chosen.items()
        }


def _best_per_document(hits: list[tuple[int, str, float]]) -> dict[str, float]:
    """Each document's first (best) score in a best-first list of chunk hits."""
    best: dict[str, float] = {}
    for _, doc_id, score in hits:
        best.setdefault(doc_id, score)
    return best
