"""Documents' dense scores (best chunk, mean of the top m, mean vector, a blend), taken from the dense candidates'
exact scores where those suffice and from the documents' chunk vectors where they do not."""

import numpy as np

from lodex.search.fusion import Hits
from lodex.search.snapshot import Snapshot


def dense_scores(
    snap: Snapshot, rows: np.ndarray, vector: np.ndarray, ranking: str, top_m: int, alpha: float, hits: Hits | None = None
) -> np.ndarray:
    """These documents' dense scores under `ranking` (`hits`: the dense candidates of `vector`, whose scores are
    exact; other chunks scored in one matrix product); `alpha`: the blend's best-chunk share."""
    if not len(rows):
        return np.zeros(0, np.float64)
    if ranking == "topm":
        _, chunk_vectors, lengths = snap.chunk_vectors(rows)
        sims = chunk_vectors @ vector
        return np.array(
            [float(np.sort(sims[s : s + n])[-top_m:].mean()) if n else 0.0 for s, n in zip((np.cumsum(lengths) - lengths).tolist(), lengths.tolist())]
        )
    best = best_chunks(snap, rows, vector, hits) if ranking != "mean" else np.zeros(len(rows))
    if ranking == "max":
        return best
    means = mean_scores(snap, rows, vector)
    return means if ranking == "mean" else alpha * best + (1 - alpha) * means


def fused_dense_scores(snap: Snapshot, rows: np.ndarray, vector: np.ndarray, alpha: float, hits: Hits, depth: int) -> np.ndarray:
    """Hybrid's dense score of each fused document (alpha * best chunk + (1 - alpha) * mean vector), for document
    fusion, which min-max-normalizes the `depth` best and gives what scores below them 0. A document only BM25 found
    has no chunk among `hits`, so its best chunk scores at most their lowest (up to what the vector index misses):
    when even that bound leaves it below the `depth` best of the documents `hits` found, its score counts as that
    bound and its chunks are not read (at 3M chunks, reading those of ~100 such documents took ~14 ms a query)."""
    if not len(rows):
        return np.zeros(0, np.float64)
    means = mean_scores(snap, rows, vector)
    if alpha == 0 or not len(hits.ids):
        return means if alpha == 0 else alpha * best_chunks(snap, rows, vector, None) + (1 - alpha) * means
    found = np.isin(rows, hits.rows)
    scores = means.copy()
    scores[found] = alpha * best_chunks(snap, rows[found], vector, hits) + (1 - alpha) * means[found]
    others = np.flatnonzero(~found)
    ranked = np.sort(scores[found])[::-1]
    cut = ranked[depth - 1] if len(ranked) >= depth else -np.inf
    bound = alpha * float(hits.scores.min()) + (1 - alpha) * means[others]
    scores[others] = bound
    read = others[bound > cut]
    if len(read):
        scores[read] = alpha * best_chunks(snap, rows[read], vector, None) + (1 - alpha) * means[read]
    return scores


def mean_scores(snap: Snapshot, rows: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """Each document's cosine of its mean vector to `vector` (0 for one without)."""
    vectors, found = snap.mean_vectors(rows)
    return np.where(found, vectors @ vector, 0.0).astype(np.float64)


def best_chunks(snap: Snapshot, rows: np.ndarray, vector: np.ndarray, hits: Hits | None) -> np.ndarray:
    """Each document's best chunk cosine to `vector`. A document among `hits` (the candidates of a search for
    `vector`, best first) takes its best hit: its best chunk scores at least as high as that hit, so it is among
    them too (up to what the vector index misses). The others' chunks are read and scored (at 1M chunks, reading
    every chunk of 100 candidate documents took ~12 ms a query)."""
    best = np.zeros(len(rows), np.float64)
    todo = np.ones(len(rows), bool)
    if hits is not None and len(hits.ids):
        per = hits.best_per_document()
        order = np.argsort(per.rows, kind="stable")
        known, scores = per.rows[order], per.scores[order]
        at = np.minimum(np.searchsorted(known, rows), len(known) - 1)
        found = known[at] == rows
        best[found], todo = scores[at[found]], ~found
    if todo.any():
        _, chunk_vectors, lengths = snap.chunk_vectors(rows[todo])
        sims = chunk_vectors @ vector
        has = lengths > 0
        part = np.zeros(int(todo.sum()), np.float64)
        if has.any():
            part[has] = np.maximum.reduceat(sims, (np.cumsum(lengths) - lengths)[has]).astype(np.float64)
        best[todo] = part
    return best
