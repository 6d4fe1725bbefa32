"""Keyword search at size: LanceDB's native BM25 full-text index (as lodex builds it) over N chunk texts.

usage: python bench/scale/fts.py [--chunks 1000000] [--queries 200] [--add 1000]
Texts: the abstracts of ../shared/evaldata's Cranfield, CISI and MED cut into ~100-word chunks, repeated with a
variation per copy (a copy marker and one word of another chunk appended) until --chunks; queries: the collections'
own. Measures, in a scratch Lance table with lodex's schema columns for text: the index build (seconds, peak RSS of
this process), single-query latency for 100 results as lodex asks (`fast_search` when the index covers every row),
then --add new rows: latency while they are outside the index (Lance scans them) and the optimize that folds them in.
"""

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402

from bench.harness import EVALDATA as EVAL  # noqa: E402
from bench.harness import machine_line
from lodex.search.collections import load_collection  # noqa: E402


def chunk_texts() -> tuple[list[str], list[str]]:
    """~100-word chunks of every abstract of the three collections, and their queries."""
    chunks, queries = [], []
    for name in ("cranfield", "cisi", "med"):
        collection = load_collection(EVAL / name)
        queries += list(collection.queries.values())
        for title, text in collection.docs.values():
            words = f"{title} {text}".split()
            chunks += [" ".join(words[i : i + 100]) for i in range(0, len(words), 100) if words[i : i + 100]]
    return chunks, queries


def rows(base: list[str], start: int, n: int) -> pa.Table:
    """Chunk rows start..start+n: base texts cycled, each copy varied."""
    texts = []
    for i in range(start, start + n):
        text, copy = base[i % len(base)], i // len(base)
        texts.append(text if copy == 0 else f"{text} copy{copy} {base[(i * 7919) % len(base)].split()[0]}")
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "text": pa.array(texts, pa.string())})


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed_queries(table, queries: list[str], fast: bool) -> list[float]:  # noqa: ANN001 - a lancedb table
    out = []
    for q in queries:
        started = time.perf_counter()
        query = table.search(q, query_type="fts").limit(100).select(["id", "_score"])
        if fast:
            query = query.fast_search() if hasattr(query, "fast_search") else query
        query.to_arrow()
        out.append((time.perf_counter() - started) * 1000)
    return out


def line(name: str, ms: list[float]) -> str:
    ordered = sorted(ms)
    return f"{name}: p50 {statistics.median(ordered):.1f} ms, p99 {ordered[int(0.99 * (len(ordered) - 1))]:.1f} ms ({len(ms)} queries)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--add", type=int, default=1_000)
    args = parser.parse_args()
    import lancedb
    from lancedb.index import FTS

    base, queries = chunk_texts()
    queries = queries[: args.queries]
    print(machine_line())
    with tempfile.TemporaryDirectory(prefix="lodex-fts-") as tmp:
        db = lancedb.connect(tmp)
        started = time.perf_counter()
        table = db.create_table("chunks", rows(base, 0, min(args.chunks, 100_000)))
        for start in range(100_000, args.chunks, 100_000):
            table.add(rows(base, start, min(100_000, args.chunks - start)))
        table.optimize()
        print(
            f"{args.chunks:,} chunks ({len(base):,} distinct texts) written in {time.perf_counter() - started:.1f} s; peak RSS {peak_mib():,.0f} MiB"
        )
        before = peak_mib()
        started = time.perf_counter()
        table.create_index("text", config=FTS(with_position=False))
        print(f"BM25 index built in {time.perf_counter() - started:.1f} s; peak RSS {peak_mib():,.0f} MiB (was {before:,.0f})")
        timed_queries(table, queries[:10], True)  # warm-up
        print(line("query, index covers every row (fast_search)", timed_queries(table, queries, True)))
        table.add(rows(base, args.chunks, args.add))
        print(line(f"query with {args.add:,} rows added outside the index", timed_queries(table, queries, False)))
        started = time.perf_counter()
        table.optimize()
        print(f"optimize folding {args.add:,} rows into the index: {time.perf_counter() - started:.1f} s")
        print(line("query after it (fast_search)", timed_queries(table, queries, True)))


if __name__ == "__main__":
    main()
