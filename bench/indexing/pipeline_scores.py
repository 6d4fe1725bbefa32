"""Retrieval quality of bench/indexing/pipelines.py: documents ranked by their best chunk, then top-1, top-3, MRR@10 and (graded
judgements) nDCG@10 over the questions. Standard library only: bench/peers/pipeline_peers.py imports it in the peers' venv."""

import math
from collections.abc import Iterable, Mapping, Sequence

DEPTH = 10  # documents kept per question


def documents_by_best_chunk(chunk_files: Iterable[str], depth: int = DEPTH) -> list[str]:
    """The files of chunks ranked best first, each file at the place of its best chunk, the first `depth` of them."""
    seen: dict[str, None] = {}
    for name in chunk_files:
        seen.setdefault(name, None)
        if len(seen) == depth:
            break
    return list(seen)


def _ndcg(ranking: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    """nDCG@k with linear gains (trec_eval's, as lodex.search.metrics.ndcg_at; that package is not in the peers' venv)."""
    gains = sorted((g for g in judged.values() if g > 0), reverse=True)[:k]
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(gains))
    found = sum(max(judged.get(doc, 0), 0) / math.log2(i + 2) for i, doc in enumerate(ranking[:k]))
    return found / ideal if ideal else 0.0


def quality(runs: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]) -> dict[str, float]:
    """Means over the questions with a relevant file: top-1 and top-3 (a relevant file first / among the first 3),
    MRR@10 and nDCG@10 (linear gains, as lodex.search.metrics); a question with no run counts 0."""
    judged = [q for q, files in qrels.items() if any(g > 0 for g in files.values())]
    totals = {"top1": 0.0, "top3": 0.0, "mrr@10": 0.0, "ndcg@10": 0.0}
    for q in judged:
        ranking, relevant = list(runs.get(q, [])), {f for f, g in qrels[q].items() if g > 0}
        first = next((i for i, doc in enumerate(ranking[:10]) if doc in relevant), None)
        totals["top1"] += first == 0
        totals["top3"] += first is not None and first < 3
        totals["mrr@10"] += 0.0 if first is None else 1.0 / (first + 1)
        totals["ndcg@10"] += _ndcg(ranking, qrels[q], 10)
    return {name: value / len(judged) if judged else 0.0 for name, value in totals.items()}


def quality_line(scores: Mapping[str, float], graded: bool) -> str:
    """The table's quality cell."""
    if graded:
        return f"nDCG@10 {scores['ndcg@10']:.3f} · MRR@10 {scores['mrr@10']:.3f}"
    return f"top-1 {scores['top1']:.3f} · top-3 {scores['top3']:.3f} · MRR@10 {scores['mrr@10']:.3f}"
