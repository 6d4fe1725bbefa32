"""Chunk rules on folders of real long documents the rules were not chosen on: git's HTML documentation, real PDFs and
the German Debian reference, each with labelled questions; dense and hybrid nDCG@10 (one target document each), top-1
and MRR@10 per rule, every rule a fresh index of the same folder in the same run.

usage: python bench/late_heldout.py [--folders html,pdf,de] [--rules plain,late-long,whole,...] [--precision fast|exact]
           [--work DIR] [--json FILE]
Quality, not timing: contention does not change the figures. Needs `pip install -e .[bench]`, `apt-get`, `dpkg-deb`
(the folders are built as bench/pipelines.py and bench/languages.py build them).
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from langdata import build_folder, questions  # noqa: E402
from languages import cpu_flags  # noqa: E402
from pipeline_folders import Folder, build  # noqa: E402

from lodex.search.metrics import evaluate  # noqa: E402

# Each rule: the settings it overrides for a new index (dotted keys, as `load_settings` takes them).
RULES: dict[str, dict[str, Any]] = {
    "plain": {"chunking.late": False},
    "late-all": {"chunking.late": True, "chunking.late_for": "all"},
    "late-long": {"chunking.late": True, "chunking.late_for": "long"},
    "whole": {"chunking.late": False, "chunking.whole_tokens": 256},
    "whole-late-long": {"chunking.late": True, "chunking.late_for": "long", "chunking.whole_tokens": 256},
}
MODES = ("dense", "hybrid")


def german(work: Path) -> Folder:
    """The German Debian reference split at its sections, with bench/langdata/de.json's questions."""
    folder, version = build_folder("de", work)
    qs = questions("de")
    return Folder("de", folder, {f"q{i}": q["question"] for i, q in enumerate(qs)},
                  {f"q{i}": {q["target"]: 1} for i, q in enumerate(qs)}, f"German: debian-reference {version}")


def folder_of(name: str, work: Path) -> Folder:
    return german(work / "languages") if name == "de" else build(name, work / "pipelines")


def _relative(path: str, root: Path) -> str:
    """A hit's path relative to the folder indexed (lodex gives it relative to the folder, or absolute)."""
    p = Path(path)
    return (p.relative_to(root) if p.is_absolute() else p).as_posix()


def run(folder: Folder, overrides: dict[str, Any], precision: str) -> dict[str, dict[str, float]]:
    """Index `folder` afresh with `overrides`, then ask its questions in each mode: documents ranked by path."""
    from lodex.api.factory import WriteSide
    from lodex.api.read_side import ReadSide
    from lodex.api.settings import load_settings

    root = folder.path.resolve()
    with tempfile.TemporaryDirectory(prefix="lodex-late-") as data:
        settings = load_settings(None, {"index.data_dir": data, "encoder.precision": precision, "search.passages": 0}
                                 | overrides)
        out: dict[str, dict[str, float]] = {}
        with WriteSide(settings, root, rebuild=True) as side:
            side.indexer.run(root)
            side.store.maybe_optimize(force=True)
            searcher = ReadSide(settings, side.encoder, side.store).searcher
            for mode in MODES:
                runs = {qid: [_relative(hit.path, root) for hit in searcher.search(text, k=10, mode=mode).results]
                        for qid, text in folder.queries.items()}
                scores = evaluate(runs, folder.qrels)
                top1 = sum(1 for qid, ranked in runs.items() if ranked[:1] and folder.qrels[qid].get(ranked[0], 0) > 0)
                out[mode] = {"ndcg@10": scores["ndcg@10"], "mrr@10": scores["mrr@10"], "top1": top1 / len(runs)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folders", default="html,pdf,de")
    parser.add_argument("--rules", default="plain,late-long")
    parser.add_argument("--precision", default="fast", choices=("fast", "exact"))
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "lodex-bench-late")
    parser.add_argument("--json", type=Path, help="append each cell's result as one JSON line to this file")
    args = parser.parse_args()
    print(f"cpu: {cpu_flags()}; precision {args.precision}")
    print(f"{'folder':8s} {'rule':10s} {'dense nDCG@10':>14s} {'hybrid nDCG@10':>15s} {'top-1 d/h':>10s}")
    for name in args.folders.split(","):
        folder = folder_of(name, args.work)
        for rule in args.rules.split(","):
            result = run(folder, RULES[rule], args.precision)
            d, h = result["dense"], result["hybrid"]
            print(f"{name:8s} {rule:10s} {d['ndcg@10']:14.4f} {h['ndcg@10']:15.4f} {d['top1']:5.3f}/{h['top1']:.3f}", flush=True)
            if args.json:
                with args.json.open("a") as fh:
                    fh.write(json.dumps({"folder": name, "rule": rule, "precision": args.precision} | result) + "\n")


if __name__ == "__main__":
    main()
