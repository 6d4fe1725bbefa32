"""Ranking metrics with trec_eval's definitions: nDCG@k (linear graded gains), Recall@k, MRR@k."""

import math
from collections.abc import Mapping, Sequence

Qrels = Mapping[str, Mapping[str, int]]  # query id → {doc id: grade}; grade > 0 is relevant


def ndcg_at(ranking: Sequence[str], judged: Mapping[str, int], k: int = 10) -> float:
    """nDCG@k: sum of grade/log2(rank+1) over the top k, divided by the ideal ordering's value."""
    gains = [max(judged.get(doc, 0), 0) for doc in ranking[:k]]
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains))
    ideal = sorted((g for g in judged.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at(ranking: Sequence[str], judged: Mapping[str, int], k: int = 100) -> float:
    """Share of the relevant documents found in the top k."""
    relevant = {doc for doc, grade in judged.items() if grade > 0}
    return len(relevant.intersection(ranking[:k])) / len(relevant) if relevant else 0.0


def mrr_at(ranking: Sequence[str], judged: Mapping[str, int], k: int = 10) -> float:
    """Reciprocal rank of the first relevant document within the top k (0 when none)."""
    for i, doc in enumerate(ranking[:k]):
        if judged.get(doc, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def evaluate(runs: Mapping[str, Sequence[str]], qrels: Qrels) -> dict[str, float]:
    """Mean nDCG@10, Recall@100 and MRR@10 over the queries that have at least one relevant document."""
    judged = [q for q, docs in qrels.items() if any(g > 0 for g in docs.values())]
    if not judged:
        return {"ndcg@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0}
    total = {"ndcg@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0}
    for q in judged:
        ranking = runs.get(q, [])
        total["ndcg@10"] += ndcg_at(ranking, qrels[q], 10)
        total["recall@100"] += recall_at(ranking, qrels[q], 100)
        total["mrr@10"] += mrr_at(ranking, qrels[q], 10)
    return {name: value / len(judged) for name, value in total.items()}
