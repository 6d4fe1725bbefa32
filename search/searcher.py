"""Query → dense (FAISS) and/or keyword (BM25) chunk candidates → fused → documents ranked, with best passages.

Modes: `dense` (cosine of the query to chunk vectors), `bm25` (Lance's full-text index over chunk text) and
`hybrid` (both fused at chunk level, see `Fusion`). Document rankings: `max` (best chunk), `topm` (mean of the m
best chunks; in bm25 mode the sum of its `keyword_passages` best), `mean` (the document's mean vector) and `blend` (best
chunk and mean vector; bm25 mode: its best chunk). Queries are searched
in batches: one encoder pass, one scan of the FAISS index and one round of keyword queries serve them all, and
candidates are ranked as numpy arrays, which is what keeps latency low when many clients ask at once on a small CPU.
"""

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from lodex.encoders.encoder import Encoder
from lodex.encoders.model_languages import unread_languages
from lodex.search.document_scores import dense_scores, fused_dense_scores
from lodex.search.fusion import Fusion, Hits
from lodex.search.names import MODES, RANKINGS, Mode, Ranking
from lodex.search.passages import best_passages
from lodex.search.results import DocumentHit, Passage, SearchFilters, SearchResponse
from lodex.search.snapshot import Snapshot
from lodex.search.snapshot_source import SnapshotSource
from lodex.store.base import Store

__all__ = ["MODES", "RANKINGS", "Fusion", "Mode", "Query", "Ranking", "Searcher"]

# A query's BM25 hits: chunks version, Lance row ids, scores, the query's keyword ceiling (inf: not asked).
KeywordHits = tuple[int, np.ndarray, np.ndarray, float]
# Each query's BM25 hits (None: none started for it), or the function that waits for them (called once the batch's
# dense search is done, so that it runs while Lance answers).
Keywords = list[KeywordHits | None] | Callable[[], list[KeywordHits | None]]


@dataclass(frozen=True)
class Query:
    """One search request; mode and ranking default to the searcher's."""

    text: str
    k: int = 10
    filters: SearchFilters = SearchFilters()
    mode: Mode | None = None
    ranking: Ranking | None = None


class Searcher:
    """Ranks documents for queries; see the module docstring for the modes and rankings."""

    def __init__(
        self,
        store: Store,
        encoder: Encoder,
        passages: int = 3,
        candidates: int = 100,
        mode: Mode = "hybrid",
        ranking: Ranking = "blend",
        fusion: Fusion = Fusion(),
        source: SnapshotSource | None = None,
        languages: frozenset[str] | None = None,
    ) -> None:
        self.store = store  # this searcher's own handle (BM25, passages), pinned to each search's snapshot
        self.encoder = encoder
        self.passages = passages
        self.candidates = candidates
        self.mode = mode
        self.ranking = ranking
        self.fusion = fusion
        self._doc_fusion = replace(fusion, dense_weight=fusion.doc_dense_weight)  # fusing document scores
        self.source = source or SnapshotSource(store)  # shared by the searchers of a server, prepared in the background
        self.languages = languages  # those the encoder covers (None: it does not say)

    def snapshot(self) -> Snapshot:
        """The latest prepared committed version (see `SnapshotSource`)."""
        return self.source.snapshot()

    def search(
        self, query: str, k: int = 10, filters: SearchFilters | None = None, mode: Mode | None = None, ranking: Ranking | None = None
    ) -> SearchResponse:
        """Top-k documents for `query`, each with up to `passages` best passages."""
        return self.search_many([Query(query, k, filters or SearchFilters(), mode, ranking)])[0]

    def start_keyword_search(self, queries: list[Query]) -> "Callable[[], list[KeywordHits | None]]":
        """Start these queries' BM25 at the latest prepared snapshot's version (it needs no query vector) and return
        the function that waits for it: run it while the queries are encoded, and pass its answer to `search_many`
        (which uses it if its own snapshot is of the same version, or of a later one with the same row ids: then the
        keyword hits are those of the earlier version less the chunks gone since). Dense-mode queries get None."""
        worded = [i for i, q in enumerate(queries) if (q.mode or self.mode) != "dense"]
        if not worded:
            return lambda: [None] * len(queries)
        snap = self.snapshot()
        self.store.pin(snap.versions)
        wait = self._keyword_search(snap, [queries[i] for i in worded], [self._width(queries[i]) for i in worded])

        def answer() -> list[KeywordHits | None]:
            out: list[KeywordHits | None] = [None] * len(queries)
            for i, hits in zip(worded, wait()):
                out[i] = (snap.version, *hits)
            return out

        return answer

    def _keyword_search(self, snap: Snapshot, queries: list[Query], widths: list[int]) -> Callable[[], list[tuple[np.ndarray, np.ndarray, float]]]:
        """Start these queries' BM25 (each its best `widths` chunks) at the snapshot's version, and with fusion `ceiling` their hybrid ones' keyword
        ceilings; the function that waits for both: per query, Lance row ids, scores and ceiling (inf: not asked)."""
        texts = [q.text for q in queries]
        languages = [snap.docs.query_language(text) for text in texts]
        wait = self.store.start_keyword_search(texts, widths, snap.version, snap.keywords, languages)
        capped = [i for i, q in enumerate(queries) if self.fusion.method == "ceiling" and (self._for_model(snap, q).mode or self.mode) == "hybrid"]
        ceilings = self.store.start_keyword_ceilings([texts[i] for i in capped], snap.version, [languages[i] for i in capped]) if capped else None

        def answer() -> list[tuple[np.ndarray, np.ndarray, float]]:
            found = dict(zip(capped, ceilings())) if ceilings is not None else {}
            return [(row_ids, scores, found.get(i, math.inf)) for i, (row_ids, scores) in enumerate(wait())]

        return answer

    def search_many(
        self, queries: list[Query], vectors: np.ndarray | None = None, started: float | None = None, keywords: Keywords | None = None
    ) -> list[SearchResponse]:
        """Several searches against one committed version of the index, sharing the encoder call and the scans;
        `vectors`: the queries already encoded (from `started`, a perf_counter time, for took_ms); `keywords`: their
        BM25 hits from `start_keyword_search`, or its function that waits for them."""
        started = time.perf_counter() if started is None else started
        if vectors is None:
            vectors = self.encoder.embed([q.text for q in queries], kind="query")
        with self.source.pinned() as snap:
            self.store.pin(snap.versions)
            return self._search_snapshot(snap, [self._for_model(snap, q) for q in queries], vectors, started, keywords)

    def _for_model(self, snap: Snapshot, q: Query) -> Query:
        """A hybrid query in a language of another script that the encoder does not cover (Chinese, Japanese, Korean,
        Thai…) is answered by keywords alone, documents scored by their `keyword_passages` best chunks (ranking
        `topm`): its vector is near random there (the bundled model: top-1 0.17 Chinese, 0.03 Japanese), and fusing
        it in only pushes good keyword hits down; a section's second passage speaks for it where its vector cannot
        (top-1 0.78 -> 0.81 Chinese, 0.66 -> 0.74 Japanese; on English abstracts, 1-3 chunks a document, it cost bm25
        4.5 points of nDCG@10, so keyword search elsewhere keeps the best chunk). One in an uncovered language of the
        model's own script stays hybrid: shared words and names carry meaning (German: dense top-1 0.41, and hybrid
        0.51 where keywords alone gave 0.43; bench/languages/RESULTS-languages.md)."""
        if self.languages is None or (q.mode or self.mode) != "hybrid":
            return q
        if snap.docs.query_language(q.text) not in unread_languages(self.languages):
            return q
        return replace(q, mode="bm25", ranking="topm")

    def _search_snapshot(
        self, snap: Snapshot, queries: list[Query], vectors: np.ndarray, started: float, keywords: Keywords | None
    ) -> list[SearchResponse]:
        widths = [self._width(q) for q in queries]
        first = self._retrieve_batch(snap, queries, vectors, widths, keywords)
        tops, chunk_order = [], []
        for q, vector, hits, width in zip(queries, vectors, first, widths):
            while True:
                ranked, order = self._rank(snap, q, vector, *hits)
                if len(ranked.ids) >= q.k or width >= len(snap.index):
                    break
                width *= 4  # filters left too few: look deeper for this query
                hits = self._retrieve_batch(snap, [q], vector[None, :], [width])[0]
            rows = ranked.rows.tolist()
            paths = snap.docs.rows(rows, "paths")  # ties broken by path
            tops.append([(r, s) for s, _, r in sorted(zip(ranked.scores.tolist(), paths, rows), key=lambda item: (-item[0], item[1]))[: q.k]])
            chunk_order.append(order)
        passages = self.best_passages(snap, queries, vectors, tops, chunk_order)
        took = round((time.perf_counter() - started) * 1000, 3)
        shown = sorted({r for top in tops for r, _ in top})
        ids, names, titles = (dict(zip(shown, snap.docs.rows(shown, c))) for c in ("ids", "paths", "titles"))
        return [
            SearchResponse(
                q.text, q.mode or self.mode, took, [DocumentHit(ids[r], names[r], titles[r], round(s, 6), passages.get((i, r), [])) for r, s in top]
            )
            for i, (q, top) in enumerate(zip(queries, tops))
        ]

    def _width(self, q: Query) -> int:
        """Candidate chunks a retriever returns for a query (its own: answers do not depend on batch mates)."""
        return max(self.candidates, 10 * q.k)

    def _retrieve_batch(
        self, snap: Snapshot, queries: list[Query], vectors: np.ndarray, widths: list[int], keywords: Keywords | None = None
    ) -> list[tuple[Hits, Hits, np.ndarray]]:
        """(dense hits, BM25 hits, the vector dense search used) per query: one FAISS scan for the batch (while the
        keyword queries already started run), one round of keyword queries (for those `keywords` has not answered at
        this version or at an earlier one whose row ids it shares: a commit that came meanwhile costs no second round),
        one more scan for hybrid queries' feedback vectors."""
        modes = [q.mode or self.mode for q in queries]
        dense = [Hits.empty() for _ in queries]
        keyword = [Hits.empty() for _ in queries]
        picked = [i for i, m in enumerate(modes) if m != "bm25"]
        if picked:
            self._dense_hits(snap, queries, vectors[picked], widths, picked, dense)
        worded = [i for i, m in enumerate(modes) if m != "dense"]
        if callable(keywords):
            keywords = keywords()
        given = {i: k[1:] for i in worded if keywords and (k := keywords[i]) is not None and snap.rows_since <= k[0] <= snap.version}
        asked = [i for i in worded if i not in given]
        if asked:
            given |= dict(zip(asked, self._keyword_search(snap, [queries[i] for i in asked], [widths[i] for i in asked])()))
        for i, (row_ids, scores, ceiling) in given.items():
            keyword[i] = self._candidates(snap, queries[i], *snap.owners.ranked(row_ids, scores))._replace(ceiling=ceiling)
        f = self.fusion
        feedback = [i for i, m in enumerate(modes) if m == "hybrid" and f.feedback_chunks > 0 and f.feedback_weight > 0]
        used = list(vectors)
        moved = []
        for i in feedback:
            best = f.fuse(dense[i], keyword[i]).ids[: f.feedback_chunks]
            vector = vectors[i] + f.feedback_weight * f.feedback_share(keyword[i]) * (snap.index.vectors(best).mean(axis=0) if len(best) else 0.0)
            moved.append((vector / max(float(np.linalg.norm(vector)), 1e-9)).astype(np.float32))
        if moved:
            self._dense_hits(snap, queries, np.stack(moved), widths, feedback, dense)
            for i, vector in zip(feedback, moved):
                used[i] = vector
        return list(zip(dense, keyword, used))

    def _dense_hits(self, snap: Snapshot, queries: list[Query], vectors: np.ndarray, widths: list[int], picked: list[int], out: list[Hits]) -> None:
        """FAISS candidates for the `picked` queries (`vectors`: theirs, in that order), one scan, each cut to its width."""
        scores, ids = snap.index.search_batch(vectors, max(widths[i] for i in picked))
        for i, row_scores, row_ids in zip(picked, scores, ids):
            out[i] = self._candidates(snap, queries[i], row_ids[: widths[i]], row_scores[: widths[i]])

    @staticmethod
    def _candidates(snap: Snapshot, q: Query, ids: np.ndarray, scores: np.ndarray) -> Hits:
        """The current, allowed chunks among a retriever's hits, best first."""
        ids = np.asarray(ids, np.int64)
        rows = snap.rows(ids)
        keep = (ids >= 0) & (rows >= 0)
        if q.filters.active and keep.any():
            keep[keep] = snap.allowed(rows[keep], q.filters)
        return Hits(ids[keep], rows[keep], np.asarray(scores, np.float64)[keep])

    def _rank(self, snap: Snapshot, q: Query, vector: np.ndarray, dense: Hits, keyword: Hits, moved: np.ndarray) -> tuple[Hits, Hits]:
        """Documents scored for one query (keyed by row, any order), and the chunk scores (in the mode's scale)
        that passages follow."""
        mode, ranking, f = q.mode or self.mode, q.ranking or self.ranking, self.fusion
        if mode == "bm25":  # best chunk; "topm": the sum of the keyword_passages best (uncovered languages' hybrid)
            return keyword.summed_per_document(f.keyword_passages if ranking == "topm" else 1), keyword
        if mode == "dense":
            if ranking == "max":
                return dense.best_per_document(), dense
            rows = dense.rows[dense.firsts()]
            return Hits(rows, rows, dense_scores(snap, rows, vector, ranking, f.top_m, f.blend_alpha, dense)), dense
        fused = f.fuse(dense, keyword)
        first = fused.firsts()
        rows = fused.rows[first]
        if ranking == "max":
            return Hits(rows, rows, fused.scores[first]), fused
        if ranking == "topm":
            docs, group = np.unique(fused.rows, return_inverse=True)  # each hit's document; grouped in list order
            grouped = np.argsort(group, kind="stable")
            starts = np.searchsorted(group[grouped], group[grouped])
            keep = grouped[np.arange(len(grouped)) - starts < f.top_m]
            sums = np.bincount(group[keep], weights=fused.scores[keep], minlength=len(docs))
            return Hits(rows, rows, sums[np.searchsorted(docs, rows)] / f.top_m), fused
        # blend / mean: a dense score per document (for the feedback vector), fused with BM25's best chunk per
        # document, at document level
        alpha = f.hybrid_blend_alpha if ranking == "blend" else 0.0
        scores = fused_dense_scores(snap, rows, moved, alpha, dense, self._doc_fusion.depth)
        order = np.argsort(-scores, kind="stable")
        dense_docs = Hits(rows[order], rows[order], scores[order])
        return self._doc_fusion.fuse(dense_docs, keyword.best_per_document()), fused

    def best_passages(
        self, snap: Snapshot, queries: list[Query], vectors: np.ndarray, tops: list[list[tuple[int, float]]], chunk_order: list[Hits]
    ) -> dict[tuple[int, int], list[Passage]]:
        """The best passages of each result document — the chunks the mode ranked highest, then by cosine, of the
        PASSAGE_POOL best the ones that read as a table of contents or an index last — with their cosine to the query
        and the query words they contain; keyed by (query, document row). What it is given (`tops`: each query's
        documents; `chunk_order`: each query's chunk ranking) is what a subclass that studies passage choice sees."""
        return best_passages(self.store, snap, [q.text for q in queries], vectors, tops, chunk_order, self.passages)
