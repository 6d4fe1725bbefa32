"""`lodex eval`: index a BEIR-layout collection through the real pipeline and score every retrieval mode."""

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from api.factory import build_encoder, build_indexer, build_searcher, open_store
from api.settings import Settings
from search.collections import load_collection, write_files
from search.metrics import evaluate
from search.searcher import Query, Searcher

_BATCH = 16  # queries per search_many call


def _run(searcher: Searcher, queries: dict[str, str], mode: str, ranking: str | None) -> tuple[dict[str, list[str]], float]:
    """Top-100 document paths per query, and the mean milliseconds per query."""
    ids = list(queries)
    runs: dict[str, list[str]] = {}
    started = time.perf_counter()
    for start in range(0, len(ids), _BATCH):
        part = ids[start : start + _BATCH]
        for qid, response in zip(part, searcher.search_many([Query(queries[q], 100, mode=mode, ranking=ranking) for q in part])):
            runs[qid] = [hit.path for hit in response.results]
    return runs, (time.perf_counter() - started) * 1000 / max(len(ids), 1)


def evaluate_dataset(dataset: Path, settings: Settings, bundle: int = 1, modes: tuple[str, ...] = ("bm25", "dense", "hybrid"),
                     rankings: tuple[str, ...] = (), progress: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """Write `dataset` out as files (bundles of `bundle` documents), index it in a temporary data dir, run its
    judged queries in each mode (and, for `rankings`, each document ranking in dense and hybrid mode)."""
    collection = load_collection(dataset)
    with tempfile.TemporaryDirectory(prefix="lodex-eval-") as tmp:
        folder, data = Path(tmp) / "docs", Path(tmp) / "data"
        _, qrels = write_files(collection, folder, bundle=bundle)
        encoder = build_encoder(settings)
        store = open_store(settings, encoder, data, create=True)
        summary = build_indexer(settings, encoder, store).run(folder, progress=progress)
        store.maybe_optimize(force=True)
        searcher = build_searcher(settings, encoder, store)
        searcher.passages = 0
        queries = {q: t for q, t in collection.queries.items() if q in qrels}
        result: dict[str, Any] = {
            "dataset": collection.name, "bundle": bundle, "files": summary.added, "chunks": summary.chunks,
            "queries": len(queries), "index_s": round(summary.seconds, 2), "default": {"mode": searcher.mode, "ranking": searcher.ranking},
            "modes": {}, "rankings": {},
        }
        for mode in modes:
            runs, ms = _run(searcher, queries, mode, None)
            result["modes"][mode] = _rounded(evaluate(runs, qrels)) | {"query_ms": round(ms, 2)}
        for ranking in rankings:
            for mode in ("dense", "hybrid"):
                runs, ms = _run(searcher, queries, mode, ranking)
                result["rankings"][f"{mode}:{ranking}"] = _rounded(evaluate(runs, qrels)) | {"query_ms": round(ms, 2)}
    return result


def _rounded(metrics: dict[str, float]) -> dict[str, float]:
    return {name: round(value, 4) for name, value in metrics.items()}
