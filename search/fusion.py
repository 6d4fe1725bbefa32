"""Ranked hit lists as numpy arrays, and how hybrid mode fuses two of them (convex, convex with the keyword side
weighed by its strength, or reciprocal-rank fusion)."""

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from lodex.search.names import FusionMethod

FEEDBACK_POWER = 3  # ceiling: the feedback weight follows the keyword strength to this power (1: ja-paraphrase 0.04, 3: 0.17)


class Hits(NamedTuple):
    """A ranked list, best first: item keys (chunk ids; document rows when fusing documents), the document row
    of each, scores (float64), and the most any item could score (keyword hits: the query's `ceiling`, the sum over
    its terms of the best score a chunk gets for that term alone; inf: not known)."""

    ids: np.ndarray
    rows: np.ndarray
    scores: np.ndarray
    ceiling: float = math.inf

    @classmethod
    def empty(cls) -> "Hits":
        return cls(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64))

    def firsts(self) -> np.ndarray:
        """Positions of each document's first (best) hit, in list order."""
        _, first = np.unique(self.rows, return_index=True)
        return np.sort(first)

    def score_of(self, ids: np.ndarray) -> np.ndarray:
        """Each id's score in this list; -inf for ids not in it."""
        out = np.full(len(ids), -np.inf)
        if len(self.ids) and len(ids):
            sorter = np.argsort(self.ids)
            pos = sorter[np.minimum(np.searchsorted(self.ids, ids, sorter=sorter), len(self.ids) - 1)]
            found = self.ids[pos] == ids
            out[found] = self.scores[pos[found]]
        return out

    def best_per_document(self) -> "Hits":
        """Each document's best hit, keyed by document row, in list order."""
        first = self.firsts()
        return Hits(self.rows[first], self.rows[first], self.scores[first], self.ceiling)

    def summed_per_document(self, m: int) -> "Hits":
        """Each document scored by the sum of its `m` best hits (those in this list), keyed by document row, best
        first (ties in list order); m = 1: `best_per_document`."""
        if m <= 1 or not len(self.ids):
            return self.best_per_document()
        docs, group = np.unique(self.rows, return_inverse=True)
        grouped = np.argsort(group, kind="stable")  # each document's hits together, in list order (best first)
        starts = np.searchsorted(group[grouped], group[grouped])
        keep = grouped[np.arange(len(grouped)) - starts < m]
        sums = np.bincount(group[keep], weights=self.scores[keep], minlength=len(docs))
        first = self.firsts()
        rows = self.rows[first]
        scores = sums[np.searchsorted(docs, rows)]
        order = np.argsort(-scores, kind="stable")
        return Hits(rows[order], rows[order], scores[order], self.ceiling * m)


@dataclass(frozen=True)
class Fusion:
    """How hybrid mode combines its two chunk rankings, then feeds the result back to the dense side.

    `convex`: dense_weight * min-max-normalized cosine + (1 - dense_weight) * min-max-normalized BM25;
    `ceiling`: convex, the BM25 part scaled by the keyword list's strength, min(1, its best score / (ceiling_share *
    the query's ceiling)): a list whose best hit matches a small part of what the query's terms could score (a
    common word alone) weighs little, one that matches the query well (best >= ceiling_share * ceiling) as in convex;
    `rrf`: 1 / (rrf_k + dense rank) + bm25_weight / (rrf_k + BM25 rank). With `feedback_chunks` > 0 the
    query vector is moved toward the mean of the best fused chunks (weight `feedback_weight`), searched
    again, and fused again with BM25 (pseudo-relevance feedback; no extra encoding)."""

    method: FusionMethod = "convex"
    dense_weight: float = 0.6
    ceiling_share: float = 0.5  # ceiling: the share of the query's keyword ceiling at which BM25 weighs in full
    rrf_k: float = 60.0
    bm25_weight: float = 1.0
    feedback_chunks: int = 5
    feedback_weight: float = 1.0
    doc_dense_weight: float = 0.7  # hybrid blend: the dense share when document scores are fused
    hybrid_blend_alpha: float = 0.6  # hybrid blend: the best chunk's share of the dense document score
    top_m: int = 3
    blend_alpha: float = 0.5  # dense blend: alpha * best chunk + (1 - alpha) * mean-vector cosine
    depth: int = 100  # convex: scores are normalized over each list's top `depth` hits, so k does not change them
    keyword_passages: int = 2  # bm25 mode, ranking topm: a document scores the sum of this many best chunks' BM25

    def fuse(self, dense: Hits, keyword: Hits) -> Hits:
        """Both lists fused into one, best first (ties: in order of first appearance, dense list first)."""
        if self.method == "rrf":
            parts = [1.0 / (self.rrf_k + np.arange(1, len(dense.ids) + 1)), self.bm25_weight / (self.rrf_k + np.arange(1, len(keyword.ids) + 1))]
        else:
            parts = [self._convex(self.dense_weight, dense.scores), self._convex(1.0 - self.dense_weight, keyword.scores) * self.strength(keyword)]
        ids = np.concatenate([dense.ids, keyword.ids])
        keys, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
        totals = np.bincount(inverse, weights=np.concatenate(parts), minlength=len(keys))
        appearance = np.argsort(first)
        order = appearance[np.argsort(-totals[appearance], kind="stable")]
        rows = np.concatenate([dense.rows, keyword.rows])[first]
        return Hits(keys[order], rows[order], totals[order])

    def strength(self, keyword: Hits) -> float:
        """`ceiling`: the keyword list's best score over ceiling_share times its ceiling, at most 1; otherwise (or its
        ceiling not known) 1."""
        if self.method != "ceiling" or not len(keyword.scores) or not 0 < keyword.ceiling < math.inf:
            return 1.0
        return min(1.0, float(keyword.scores[: self.depth].max()) / (self.ceiling_share * keyword.ceiling))

    def feedback_share(self, keyword: Hits) -> float:
        """The share of `feedback_weight` a query's feedback vector gets: `ceiling`, the keyword list's strength cubed
        (the best fused chunks are trusted to stand for the query as far as its keywords are matched: a question in
        words of its own drifts toward the chunks that share a common word); otherwise 1."""
        return self.strength(keyword) ** FEEDBACK_POWER

    def _convex(self, weight: float, scores: np.ndarray) -> np.ndarray:
        """weight * min-max-normalized scores (over the list's top `depth`); a list whose top scores are all equal
        (a lone hit: a rare word found in one chunk) scores `weight` for them, not nothing."""
        if not len(scores):
            return scores
        top = scores[: self.depth]
        low = float(top.min())
        span = float(top.max()) - low
        if span <= 1e-9:
            return np.where(scores >= low, weight, 0.0)
        return weight * np.maximum(scores - low, 0.0) / span
