"""Exact (fp32 PyTorch) vs fast (int8 ONNX Runtime) document encoding: retrieval quality on labelled collections.

usage: python bench/quality/precision.py [--collections cranfield,cisi,med] [--bundles 1,25] [--evaldata DIR] [--json OUT]
Runs `lodex eval` (the real pipeline, a fresh index each time) on every collection, as one file per document and as
bundles of 25, once per precision, each in its own process, and prints nDCG@10 per mode (dense, bm25, hybrid) with
fast minus exact in points. Quality does not depend on the machine's load; the index times printed do.
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.harness import EVALDATA, LODEX_CLI  # noqa: E402

MODES = ("dense", "bm25", "hybrid")
PRECISIONS = ("exact", "fast")


def run_eval(dataset: Path, bundle: int, precision: str) -> dict:
    """One `lodex eval --json` in a fresh process with this document precision."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", LODEX_ENCODER__PRECISION=precision)
    done = subprocess.run(
        [*LODEX_CLI, "eval", str(dataset), "--bundle", str(bundle), "--json"], capture_output=True, text=True, env=env, cwd=ROOT, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"lodex eval {dataset.name} --bundle {bundle} ({precision}) failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def ndcg(report: dict, mode: str) -> float:
    """nDCG@10 of one mode in a `lodex eval --json` report."""
    return float(report["modes"][mode]["ndcg@10"]) if "modes" in report else float(report[mode]["ndcg@10"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collections", default="cranfield,cisi,med")
    parser.add_argument("--bundles", default="1,25")
    parser.add_argument("--evaldata", type=Path, default=EVALDATA)
    parser.add_argument("--json", type=Path, help="also write every report here")
    args = parser.parse_args()
    reports = []
    print("| collection | bundle | mode | exact nDCG@10 | fast nDCG@10 | fast − exact (points) |")
    print("|---|---|---|---|---|---|")
    for name in args.collections.split(","):
        for bundle in (int(b) for b in args.bundles.split(",")):
            runs = {p: run_eval(args.evaldata / name, bundle, p) for p in PRECISIONS}
            reports.append({"collection": name, "bundle": bundle, **runs})
            for mode in MODES:
                exact, fast = ndcg(runs["exact"], mode), ndcg(runs["fast"], mode)
                print(f"| {name} | {bundle} | {mode} | {exact:.4f} | {fast:.4f} | {100 * (fast - exact):+.2f} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(reports, indent=1))


if __name__ == "__main__":
    main()
