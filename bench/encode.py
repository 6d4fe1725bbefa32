"""Encoding throughput: end-to-end `lodex index` vs sentence-transformers encode() on the same chunks.

usage: python bench/encode.py [DATASET_DIR] [--docs N] [--bundle N] [--rounds R]
Writes N abstracts of a BEIR collection as long documents, runs `lodex index` on them in a fresh
process (its tokens/s covers scan, read, chunk, encode and commit), then encodes exactly the chunks
it stored with sentence-transformers (batch 32) and with lodex's encoder alone, each in its own
process, and prints tokens/s, the ratio to sentence-transformers and each process's peak RSS.
Rounds alternate the order, and the best round of each is kept, since these machines are noisy.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_DATA = ROOT.parent / "shared" / "evaldata" / "cranfield"


def _chunk_texts(data_dir: Path) -> tuple[list[str], int]:
    import lancedb

    table = lancedb.connect(str(data_dir / "lance")).open_table("chunks")
    rows = table.search().select(["text", "token_count"]).limit(None).to_arrow()
    return rows["text"].to_pylist(), int(sum(rows["token_count"].to_pylist()))


def worker(kind: str, data_dir: Path) -> None:
    """Encode the stored chunks in this process and print {seconds, tokens} as JSON."""
    texts, tokens = _chunk_texts(data_dir)
    if kind == "st":
        from sentence_transformers import SentenceTransformer

        from indexer.transformers_encoder import bundled_model_dir

        model = SentenceTransformer(str(bundled_model_dir()), device="cpu")
        model.encode(texts[:64], batch_size=32)  # warm-up
        started = time.perf_counter()
        model.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
    else:
        from indexer.transformers_encoder import TransformersEncoder

        encoder = TransformersEncoder()
        encoder.embed(texts[:64])
        started = time.perf_counter()
        encoder.embed(texts)
    print(json.dumps({"seconds": time.perf_counter() - started, "tokens": tokens}))


def _timed_child(cmd: list[str], env: dict[str, str]) -> tuple[str, float]:
    """Run a child; return its stdout and its own peak RSS (MiB), via wait4."""
    with tempfile.TemporaryFile(mode="w+") as errors:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=errors, text=True)
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            errors.seek(0)
            raise SystemExit(f"{' '.join(cmd[:5])} failed:\n{errors.read()[-2000:]}")
    return out, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset", type=Path, nargs="?", default=DEFAULT_DATA)
    parser.add_argument("--docs", type=int, default=600, help="abstracts to use")
    parser.add_argument("--bundle", type=int, default=25)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--worker", choices=["st", "lodex"])
    parser.add_argument("--data", type=Path)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker, args.data)

    from search.collections import load_collection, write_files

    collection = load_collection(args.dataset)
    collection.docs = dict(list(collection.docs.items())[: args.docs])
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    best: dict[str, tuple[float, float]] = {}
    tokens = 0
    with tempfile.TemporaryDirectory(prefix="lodex-encode-") as tmp:
        folder = Path(tmp) / "docs"
        write_files(collection, folder, bundle=args.bundle)
        for round_ in range(args.rounds):
            data = Path(tmp) / f"data{round_}"
            out, rss = _timed_child([sys.executable, "-m", "api.cli", "index", str(folder), "--json", "--data-dir", str(data)], env)
            summary = json.loads(out)
            results = {"index": (summary["tokens"] / summary["seconds"], rss)}
            for step in (["st", "lodex"] if round_ % 2 == 0 else ["lodex", "st"]):
                out, rss = _timed_child([sys.executable, __file__, "--worker", step, "--data", str(data)], env)
                result = json.loads(out)
                tokens = result["tokens"]
                results[step] = (tokens / result["seconds"], rss)
            print(f"round {round_ + 1}: " + ", ".join(f"{k} {v[0]:,.0f} tokens/s" for k, v in results.items()), file=sys.stderr)
            for key, value in results.items():
                if value[0] > best.get(key, (0.0, 0.0))[0]:
                    best[key] = value
    st_rate = best["st"][0]
    labels = {"st": "sentence-transformers encode() (baseline)", "lodex": "lodex encoder, exact mode",
              "index": "lodex index, end to end"}
    print(f"{args.docs} abstracts of {args.dataset.name} as long documents of {args.bundle}; {tokens:,} chunk tokens; "
          f"best of {args.rounds} round(s); {os.cpu_count()} CPUs")
    print(f"{'':44s} {'tokens/s':>10s} {'vs ST':>7s} {'peak RSS':>10s}")
    for key in ("st", "lodex", "index"):
        rate, rss = best[key]
        print(f"{labels[key]:44s} {rate:10,.0f} {rate / st_rate:6.2f}x {rss:8.0f} MiB")


if __name__ == "__main__":
    main()
