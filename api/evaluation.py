"""`lodex eval`: index a BEIR-layout collection through the real pipeline (the application object's write role, in a
temporary data dir) and score it."""

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lodex.api.factory import open_app
from lodex.api.settings import Settings
from lodex.search.collections import load_collection, write_files
from lodex.search.evaluation import score_modes
from lodex.search.names import Mode, Ranking


def evaluate_dataset(
    dataset: Path,
    settings: Settings,
    bundle: int = 1,
    modes: tuple[Mode, ...] = ("bm25", "dense", "hybrid"),
    rankings: tuple[Ranking, ...] = (),
    progress: Callable[[Any], None] | None = None,
) -> dict[str, Any]:
    """Write `dataset` out as files (bundles of `bundle` documents), index it in a temporary data dir, run its
    judged queries in each mode (and, for `rankings`, each document ranking in dense and hybrid mode)."""
    collection = load_collection(dataset)
    with tempfile.TemporaryDirectory(prefix="lodex-eval-") as tmp:
        folder, data = Path(tmp) / "docs", Path(tmp) / "data"
        _, qrels = write_files(collection, folder, bundle=bundle)
        # a new index there (precision "auto" chosen as for any new one), ranking only: no passages
        quiet = settings.model_copy(
            update={"index": settings.index.model_copy(update={"data_dir": str(data)}), "search": settings.search.model_copy(update={"passages": 0})}
        )
        with open_app(quiet, "write", folder) as app:
            assert app.indexer is not None and app.store is not None
            summary = app.indexer.run(folder, progress=progress)
            app.store.maybe_optimize(force=True)
            searcher = app.searcher
            queries = {q: t for q, t in collection.queries.items() if q in qrels}
            return {
                "dataset": collection.name,
                "bundle": bundle,
                "files": summary.added,
                "chunks": summary.chunks,
                "tokens": summary.tokens,
                "queries": len(queries),
                "index_s": round(summary.seconds, 2),
                "default": {"mode": searcher.mode, "ranking": searcher.ranking},
                **score_modes(searcher, queries, qrels, modes, rankings),
            }
