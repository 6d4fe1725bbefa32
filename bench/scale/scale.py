"""Scale: one lodex index grown to 100k, 1M and 3M chunks on this machine — build, memory, latency, recall, freshness.

usage: python bench/scale/scale.py [--sizes 100000,1000000,3000000] [--workdir DIR] [--grow-only] [--queries 200] [--edits 20]
How the chunks are made: the abstracts of ../shared/evaldata's Cranfield, CISI and MED are written as long documents
(bundles of 25 abstracts, ~156 files) and indexed for real (`lodex index`, the bundled model, default settings): that
is the watched folder and the only text the model encodes. The index is then grown to each size with pushed copies of
those documents (bench/scale/inflate.py): every chunk vector of a copy is its original's plus N(0, 0.02) noise per
dimension, re-normalized (cosine ~0.93 to the original), its document vector the normalized mean of those, and each
chunk's text gets a copy marker and one other chunk's first word appended, so that keyword search sees
near-duplicates rather than exact ones. Growth commits 250,000 rows at a time, then compacts and saves the vector
index as a growing index would (IVF from 50k chunks, compressed from 1M). Each size is a copy of the base index
grown on its own (--workdir keeps them: base/ and one folder per size; --grow-only builds them, so that a later run
measures on a quiet machine).
At each size, with `lodex serve` watching the folder on a loopback port: seconds to start, resident memory at ready
and its peak after the queries (VmHWM), single-client latency of the collections' queries (each once, hybrid then
dense), recall@10 of the vector index against an exact scan of every chunk vector (the queries encoded by the real
model), and freshness: --edits times, one bundle's paragraph replaced by new text (a unique word, then the paragraph's
sentences reversed), and the seconds until a keyword search for the word returns that file with the new passage. Prints a JSON object per size and a table.
"""

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from bench.harness import EVALDATA as EVAL  # noqa: E402
from bench.harness import LODEX_CLI, free_port, index_folder, machine_line
from bench.harness import percentile_ms as pct
from bench.scale.inflate import inflate  # noqa: E402
from bench.serving.load import get_json, start_server  # noqa: E402
from lodex.search.collections import load_collection, write_files  # noqa: E402

COLLECTIONS = ("cranfield", "cisi", "med")


def proc_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def build_base(folder: Path, data: Path, env: dict[str, str]) -> float:
    """Write the three collections as bundles of 25 abstracts into `folder` and index them for real; seconds taken."""
    for name in COLLECTIONS:
        write_files(load_collection(EVAL / name), folder / name, bundle=25)
    started = time.monotonic()
    index_folder(folder, env)
    return time.monotonic() - started


def timed_searches(port: int, queries: list[str], mode: str) -> list[float]:
    out = []
    for q in queries:
        started = time.perf_counter()
        body = get_json(port, f"/search?k=10&mode={mode}&q={urllib.parse.quote(q)}")
        out.append(time.perf_counter() - started)
        if "results" not in body:
            raise SystemExit(f"search failed: {body}")
    return out


def freshness(port: int, folder: Path, edits: int, timeout: float = 60.0) -> list[float]:
    """Replace a paragraph of a bundle with new text on its subject (a unique word, then the paragraph's sentences in
    reverse order); seconds until a keyword search for the word returns the file first with a passage holding it.
    A version is committed and swapped into the searchers whole (chunks, vectors, keyword index, documents), so the
    new text found by keyword means its vectors are searched too; a keyword probe is used because the passages shown
    are the chunks nearest the query's vector, which need not be the one holding the word."""
    files = sorted(folder.glob("*/bundle-*.txt"))
    originals = {path: path.read_text(encoding="utf-8") for path in files}
    try:
        return _timed_edits(port, folder, files, edits, timeout)
    finally:  # the folder as it was, for the next run (the server indexes it back before it stops)
        for path, text in originals.items():
            if path.read_text(encoding="utf-8") != text:
                path.write_text(text, encoding="utf-8")
        time.sleep(3)


def _timed_edits(port: int, folder: Path, files: list[Path], edits: int, timeout: float) -> list[float]:
    seconds = []
    for i in range(edits):
        path = files[(i * 37) % len(files)]
        word = f"scalemark{i}q{int(time.time()) % 100000}"
        paragraphs = path.read_text(encoding="utf-8").split("\n\n")
        middle = len(paragraphs) // 2
        paragraphs[middle] = f"{word} " + ". ".join(reversed(paragraphs[middle].split(". ")))
        path.write_text("\n\n".join(paragraphs), encoding="utf-8")
        written, rel = time.perf_counter(), str(path.relative_to(folder))
        while True:
            hits = get_json(port, f"/search?k=1&mode=bm25&q={word}").get("results", [])
            if hits and hits[0]["path"] == rel and any(word in p["text"] for p in hits[0]["passages"]):
                break
            if time.perf_counter() - written > timeout:
                raise SystemExit(f"edit {i} of {rel} not searchable after {timeout} s; top: {[h['path'] for h in hits]}")
            time.sleep(0.25)  # a user's pace: a tighter loop's searches take the CPU from the writer (it runs at nice 19)
        seconds.append(time.perf_counter() - written)
        print(f"  edit {i + 1:2d}: {rel} searchable after {seconds[-1]:.2f} s", flush=True)
        time.sleep(0.5)
    return seconds


def recall_at_10(data: Path, queries: list[str]) -> tuple[float, str]:
    """recall@10 of the vector index lodex serves against an exact scan of every chunk vector in Lance, and its kind."""
    from lodex.api.factory import build_encoder
    from lodex.api.settings import Settings
    from lodex.store.lance_store import LanceStore
    from lodex.store.schema import vectors_of

    vectors = build_encoder(Settings()).embed(queries, kind="query").astype(np.float32)
    store = LanceStore(data, 384)
    index = store.vector_index()
    _, found = index.search_batch(vectors, 10)
    best = np.full((len(queries), 10), -np.inf, np.float32)
    best_ids = np.zeros((len(queries), 10), np.int64)
    for batch in store.chunks.search().select(["id", "vector"]).limit(None).to_batches(131_072):
        scores = vectors @ vectors_of(pa.Table.from_batches([batch])).T
        ids = batch["id"].to_numpy()
        merged = np.concatenate([best, scores], axis=1)
        merged_ids = np.concatenate([best_ids, np.broadcast_to(ids, scores.shape)], axis=1)
        top = np.argpartition(-merged, 10, axis=1)[:, :10]
        best, best_ids = np.take_along_axis(merged, top, 1), np.take_along_axis(merged_ids, top, 1)
    hits = sum(len(set(found[q]) & set(best_ids[q])) for q in range(len(queries)))
    return hits / (10 * len(queries)), index.kind


def measure(folder: Path, data: Path, env: dict[str, str], queries: list[str], edits: int, tmp: Path) -> dict:
    port = free_port()
    started = time.monotonic()
    server = start_server([*LODEX_CLI, "serve", str(folder), "--port", str(port)], env, port, tmp / "serve.log")
    try:
        ready_s = time.monotonic() - started
        rss_ready = proc_kib(server.pid, "VmRSS")
        timed_searches(port, queries[:20], "hybrid")  # warm-up
        hybrid = timed_searches(port, queries, "hybrid")
        dense = timed_searches(port, queries, "dense")
        fresh = freshness(port, folder, edits)
        rss_end, peak = proc_kib(server.pid, "VmRSS"), proc_kib(server.pid, "VmHWM")
        chunks = get_json(port, "/stats")["chunks"]
    finally:
        server.terminate()
        server.wait(timeout=300)
    fresh.sort()
    served = {
        "chunks": chunks,
        "serve_start_s": round(ready_s, 1),
        "rss_ready_mib": round(rss_ready / 1024),
        "rss_end_mib": round(rss_end / 1024),
        "rss_peak_mib": round(peak / 1024),
        "hybrid_p50_ms": round(pct(hybrid, 0.5), 1),
        "hybrid_p99_ms": round(pct(hybrid, 0.99), 1),
        "dense_p50_ms": round(pct(dense, 0.5), 1),
        "dense_p99_ms": round(pct(dense, 0.99), 1),
        "fresh_p50_s": round(statistics.median(fresh), 2),
        "fresh_p95_s": round(fresh[min(len(fresh) - 1, round(0.95 * (len(fresh) - 1)))], 2),
    }
    print(json.dumps(served), flush=True)
    recall, kind = recall_at_10(data, queries)
    return {**served, "vector_index": kind, "recall_at_10": round(recall, 4)}


def disk_mib(data: Path) -> int:
    return round(sum(p.stat().st_size for p in data.rglob("*") if p.is_file()) / 2**20)


def grown(work: Path, size: int, env: dict[str, str]) -> dict:
    """The index of `size` chunks under work/<size>: a copy of the base index (work/base, built first if missing)
    grown with inflate(); its build figures (kept in build.json, so a later run measures without building again)."""
    base, target = work / "base", work / str(size)
    record = target / "build.json"
    if record.exists():
        return json.loads(record.read_text())
    base_s = 0.0
    if not (base / "data" / "origin.json").exists():
        shutil.rmtree(base, ignore_errors=True)
        base_s = build_base(base / "docs", base / "data", {**env, "LODEX_DATA_DIR": str(base / "data")})
        (base / "build.json").write_text(json.dumps({"base_index_s": round(base_s, 1)}))
    base_s = json.loads((base / "build.json").read_text())["base_index_s"] if (base / "build.json").exists() else base_s
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(base, target)
    with sqlite3.connect(target / "data" / "jobs.sqlite") as db:  # the copy mirrors its own copy of the folder
        db.execute("UPDATE meta SET value = ? WHERE key = 'root'", (str((target / "docs").resolve()),))
    print(f"growing a copy of the base index to {size:,} chunks", flush=True)
    started = time.monotonic()
    figures = inflate(target / "data", size, vary_text=True, progress=True)
    figures = {"size": size, **figures, "grow_s": round(time.monotonic() - started, 1), "base_index_s": base_s, "disk_mib": disk_mib(target / "data")}
    record.write_text(json.dumps(figures))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100000,1000000,3000000", help="chunk counts, comma-separated")
    parser.add_argument("--workdir", type=Path, help="keep the indexes here (base/, one folder per size) for later runs")
    parser.add_argument("--grow-only", action="store_true", help="build the indexes of --sizes in --workdir, measure nothing")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--edits", type=int, default=20)
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    queries = [q for name in COLLECTIONS for q in load_collection(EVAL / name).queries.values() if len(q) <= 1000]  # api.max_query_chars
    queries = [queries[i] for i in np.random.default_rng(0).permutation(len(queries))[: args.queries]]
    print(machine_line(), flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="lodex-scale-") as scratch:
        work = args.workdir or Path(scratch)
        for size in sizes:
            figures = grown(work, size, dict(os.environ, HF_HUB_OFFLINE="1"))
            print(json.dumps(figures), flush=True)
            if args.grow_only:
                continue
            folder, data = work / str(size) / "docs", work / str(size) / "data"
            env = {**os.environ, "HF_HUB_OFFLINE": "1", "LODEX_DATA_DIR": str(data)}
            print(f"measuring at {size:,} chunks", flush=True)
            row = {**figures, **measure(folder, data, env, queries, args.edits, Path(scratch))}
            print(json.dumps(row), flush=True)
            rows.append(row)
    print("\n| chunks | base + grow s | RAM at ready / peak MiB | hybrid p50/p99 ms | dense p50/p99 ms | recall@10 | fresh p50/p95 s | disk MiB |")
    for r in rows:
        print(
            f"| {r['chunks']:,} | {r['base_index_s']} + {r['grow_s']} | {r['rss_ready_mib']:,} / {r['rss_peak_mib']:,} | "
            f"{r['hybrid_p50_ms']} / {r['hybrid_p99_ms']} | {r['dense_p50_ms']} / {r['dense_p99_ms']} | {r['recall_at_10']} "
            f"({r['vector_index']}) | {r['fresh_p50_s']} / {r['fresh_p95_s']} | {r['disk_mib']:,} |"
        )


if __name__ == "__main__":
    main()
