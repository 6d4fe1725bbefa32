"""A folder of small files end to end: `lodex index` (defaults, process start included) vs a bare sentence-transformers
encode of the same texts, in one run.

usage: python bench/indexing/small_files.py [DATASET_DIR] [--rounds R] [--precision auto|exact|fast]
Writes each abstract of a BEIR collection (default: Cranfield, 1,400 documents) as its own file, then, each in a fresh
process and alternating the order each round (the best round of each kept, these machines being noisy):
  lodex         `lodex index DIR --json` into a new data dir, on the defaults (a warm model cache: one small run first);
                wall time from process start to exit, its phases (start, scan, read, encode, commit, finish)
  st            python -c: import sentence_transformers, load the bundled model, read the files, encode them (batch 32);
                wall time from process start to exit, and the encode alone
Prints the CPU's flags, tokens (lodex: tokens its model read; st: the texts' tokens as it truncates them), each
process's peak RSS, and lodex's speed-up over st, wall to wall.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.harness import EVALDATA, alternating, machine_line  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")

_ST = """
import json, sys, time
from pathlib import Path
from sentence_transformers import SentenceTransformer
from lodex.encoders.transformers_encoder import bundled_model_dir
model = SentenceTransformer(str(bundled_model_dir()), device="cpu")
texts = [p.read_text(encoding="utf-8") for p in sorted(Path(sys.argv[1]).iterdir())]
started = time.perf_counter()
vectors = model.encode(texts, batch_size=32, normalize_embeddings=True)
encode = time.perf_counter() - started
lengths = [min(len(ids), model.max_seq_length) for ids in model.tokenizer(texts)["input_ids"]]
print(json.dumps({"encode_s": encode, "tokens": sum(lengths), "rows": len(vectors)}))
"""


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int, str]:
    """Wall seconds from spawn to exit, peak RSS (MiB) and stdout of one process."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd[:4])} failed ({proc.returncode}): {err.read().decode()[-800:]}")
        return wall, usage.ru_maxrss // 1024, out.read().decode()


def main() -> None:
    from lodex.search.collections import load_collection, write_files

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", nargs="?", type=Path, default=EVALDATA / "cranfield")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--precision", default="", help="encoder.precision for lodex (default: its default)")
    parser.add_argument("--limit", type=int, default=0, help="only the first N files (a quick check)")
    args = parser.parse_args()
    print(machine_line())
    print(f"date: {time.strftime('%Y-%m-%d %H:%M')}; load average before: {os.getloadavg()[0]:.2f}")
    env = dict(os.environ)
    if args.precision:
        env["LODEX_ENCODER__PRECISION"] = args.precision
    lodex = [str(Path(sys.executable).with_name("lodex")), "index"]
    with tempfile.TemporaryDirectory(prefix="lodex-small-files-") as tmp:
        work = Path(tmp)
        folder = work / "docs"
        write_files(load_collection(args.dataset), folder)
        for extra in sorted(folder.iterdir())[args.limit :] if args.limit else []:
            extra.unlink()
        files = len(list(folder.iterdir()))
        warm = work / "warm"
        warm.mkdir()
        (warm / "a.txt").write_text("A short note on swept wings, to load and check the model once.")
        timed([*lodex, str(warm), "--data-dir", str(work / "warm-data"), "--json"], env, work)

        def one(name: str, round_: int) -> dict:
            if name == "lodex":
                wall, rss, out = timed([*lodex, str(folder), "--data-dir", str(work / f"data{round_}"), "--json"], env, work)
                report = json.loads(out.strip().splitlines()[-1])
                run = {
                    "wall_s": wall,
                    "rss_mb": rss,
                    "tokens": report["tokens"],
                    "chunks": report["chunks"],
                    "phases": report.get("phases", {}),
                    "added": report["added"],
                }
            else:
                wall, rss, out = timed([sys.executable, "-c", _ST, str(folder)], env, work)
                run = {"wall_s": wall, "rss_mb": rss, **json.loads(out.strip().splitlines()[-1])}
            print(f"round {round_ + 1} {name}: {json.dumps(run)}", flush=True)
            return run

        best = alternating(("lodex", "st"), args.rounds, one, lambda new, kept: new["wall_s"] < kept["wall_s"])
    lo, st = best["lodex"], best["st"]
    print(f"\n{files:,} files of {args.dataset.name}, best of {args.rounds} rounds each")
    print("| pipeline | wall s (start included) | tokens | peak RSS MiB | notes |")
    print("|---|---|---|---|---|")
    phases = ", ".join(f"{k} {v:.1f}" for k, v in lo["phases"].items())
    print(f"| lodex index (defaults) | {lo['wall_s']:.1f} | {lo['tokens']:,} | {lo['rss_mb']:,} | {lo['chunks']:,} chunks; {phases} |")
    print(f"| sentence-transformers encode | {st['wall_s']:.1f} | {st['tokens']:,} | {st['rss_mb']:,} | encode alone {st['encode_s']:.1f} s |")
    print(
        f"\nlodex over sentence-transformers, wall to wall: {st['wall_s'] / lo['wall_s']:.2f}x "
        f"(over its encode alone: {st['encode_s'] / lo['wall_s']:.2f}x)"
    )


if __name__ == "__main__":
    main()
