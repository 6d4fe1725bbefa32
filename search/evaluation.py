"""Scoring a searcher on judged queries: every retrieval mode (and document ranking) against relevance labels."""

import time
from collections.abc import Mapping
from typing import Any

from lodex.search.metrics import evaluate
from lodex.search.names import Mode, Ranking
from lodex.search.searcher import Query, Searcher

_BATCH = 16  # queries per search_many call


def _run(searcher: Searcher, queries: Mapping[str, str], mode: Mode, ranking: Ranking | None) -> tuple[dict[str, list[str]], float]:
    """Top-100 document paths per query, and the mean milliseconds per query."""
    ids = list(queries)
    runs: dict[str, list[str]] = {}
    started = time.perf_counter()
    for start in range(0, len(ids), _BATCH):
        part = ids[start : start + _BATCH]
        for qid, response in zip(part, searcher.search_many([Query(queries[q], 100, mode=mode, ranking=ranking) for q in part])):
            runs[qid] = [hit.path for hit in response.results]
    return runs, (time.perf_counter() - started) * 1000 / max(len(ids), 1)


def score_modes(
    searcher: Searcher,
    queries: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
    modes: tuple[Mode, ...],
    rankings: tuple[Ranking, ...] = (),
) -> dict[str, dict[str, dict[str, float]]]:
    """nDCG@10, Recall@100, MRR@10 and ms/query of `queries` in each mode, and for `rankings` each document ranking in
    dense and hybrid mode: {"modes": {mode: metrics}, "rankings": {"mode:ranking": metrics}}."""
    result: dict[str, dict[str, dict[str, float]]] = {"modes": {}, "rankings": {}}
    for mode in modes:
        runs, ms = _run(searcher, queries, mode, None)
        result["modes"][mode] = _rounded(evaluate(runs, qrels)) | {"query_ms": round(ms, 2)}
    for ranking in rankings:
        for mode in ("dense", "hybrid"):
            runs, ms = _run(searcher, queries, mode, ranking)
            result["rankings"][f"{mode}:{ranking}"] = _rounded(evaluate(runs, qrels)) | {"query_ms": round(ms, 2)}
    return result


def _rounded(metrics: dict[str, Any]) -> dict[str, float]:
    return {name: round(value, 4) for name, value in metrics.items()}
