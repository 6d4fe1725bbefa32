"""Large-index mode: each vector index scheme's recall against exact search, memory, latency and build time at
1,000,000 vectors.

usage: python bench/scale/ann.py [--n 1000000] [--dim 384] [--queries 1000] [--nprobe 64] [--candidates 100]
                           [--schemes ivf-fp16,ivf-sq8,ivf-pq96] [--refine 2,4,8] [--workdir DIR]
Synthetic vectors shaped like sentence embeddings: a low-dimensional latent structure (48-d points
around 2,000 topic centres at graded distances) mapped into 384-d by a fixed random projection, plus
isotropic noise, normalized; queries are drawn the same way. Ground truth is exact inner-product search (FAISS flat) in
the same run. Each scheme is built as lodex builds it (clusters trained on an even sample, then every vector added; a
compressed one also writes its float32 vectors to disk, in --workdir) and saved once; each query is then searched
alone for `--candidates` chunks, as a search asks the index (a compressed index re-scores refine x that many from its
vectors on disk, read back with the query: the page cache is warm, as on a machine with the memory to spare).
Recall@10 is that of the first 10 of those candidates, recall@100 that of all of them; bytes per chunk are the growth of
the resident memory of a process of its own while the index is built (ids, codes, lookups and allocator slack; not the
page cache). Then 10% of the vectors are deleted and 1% re-added with new vectors: no deleted vector may be returned.
"""

import argparse
import gc
import multiprocessing
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.harness import machine_line  # noqa: E402
from lodex.store.heap import release_freed  # noqa: E402
from lodex.store.vector_index import VectorIndex, ivf_lists, train_stride  # noqa: E402

ADD_BATCH = 65_536  # vectors added at a time, as the store streams them out of Lance


class EmbeddingLike:
    """Draws unit vectors with the neighbourhood structure of text embeddings (low intrinsic dimension)."""

    def __init__(self, dim: int, latent: int = 48, topics: int = 2_000, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.centres = self.rng.standard_normal((topics, latent), dtype=np.float32)
        self.projection = self.rng.standard_normal((latent, dim), dtype=np.float32) / np.sqrt(latent)
        self.dim = dim

    def draw(self, n: int) -> np.ndarray:
        """n vectors: a topic centre, a graded latent offset, projected, plus a little isotropic noise."""
        out = np.empty((n, self.dim), dtype=np.float32)
        for start in range(0, n, 100_000):
            m = min(100_000, n - start)
            rng = self.rng
            spread = rng.uniform(0.3, 1.0, (m, 1)).astype(np.float32)
            z = self.centres[rng.integers(0, len(self.centres), m)] + spread * rng.standard_normal((m, self.centres.shape[1]), dtype=np.float32)
            x = z @ self.projection + 0.3 * rng.standard_normal((m, self.dim), dtype=np.float32)
            out[start : start + m] = x / np.linalg.norm(x, axis=1, keepdims=True)
        return out


def recall_at(approx: "list[np.ndarray] | np.ndarray", exact: np.ndarray, k: int = 10) -> float:
    """Mean share of the exact top-k found in the approximate top-k."""
    return float(np.mean([len(set(a[:k].tolist()) & set(e[:k].tolist())) / k for a, e in zip(approx, exact)]))


def resident() -> int:
    """This process's resident memory in bytes, after handing freed heap back."""
    gc.collect()
    release_freed()
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


def build(scheme: str, ids: np.ndarray, vectors: np.ndarray, nprobe: int, workdir: Path) -> tuple[VectorIndex, float, float, float]:
    """(index, bytes per chunk, build seconds, save seconds) of one scheme, built as the store builds it (FAISS loaded
    and its threads started first: what the process holds anyway is not counted)."""
    warm = VectorIndex(vectors.shape[1])
    warm.add(ids[:1000], vectors[:1000])
    warm.search_batch(vectors[:64], 10)
    del warm
    before = resident()
    started = time.perf_counter()
    n, dim = vectors.shape
    if scheme == "flat":
        index = VectorIndex(dim, nprobe)
    else:
        nlist = ivf_lists(n)
        codes = scheme.removeprefix("ivf-")
        exact = workdir if codes != "fp16" else None
        index = VectorIndex.ivf(dim, vectors[:: train_stride(n, nlist)], nlist, nprobe, exact=exact, codes=codes)
    for start in range(0, n, ADD_BATCH):
        index.add(ids[start : start + ADD_BATCH], vectors[start : start + ADD_BATCH])
    build_s = time.perf_counter() - started
    per_chunk = (resident() - before) / n
    started = time.perf_counter()
    if scheme != "flat":
        index.save(workdir, 1)
    return index, per_chunk, build_s, time.perf_counter() - started


def measure(index: VectorIndex, queries: np.ndarray, truth: np.ndarray, candidates: int) -> tuple[float, float, float, float]:
    """(recall@10, recall@100, p50 ms, p99 ms) of single-query searches for `candidates` chunks."""
    found, times = [], []
    for q in queries:
        started = time.perf_counter()
        _, hits = index.search_batch(q[None, :], candidates)
        times.append((time.perf_counter() - started) * 1000)
        found.append(hits[0])
    return (
        recall_at(found, truth, 10),
        recall_at(found, truth, min(100, candidates)),
        float(np.percentile(times, 50)),
        float(np.percentile(times, 99)),
    )


def churn(index: VectorIndex, source: EmbeddingLike, ids: np.ndarray, vectors: np.ndarray) -> str:
    """Delete 10% of the vectors and replace 1% (same ids, new vectors); whether any deleted one comes back."""
    rng = np.random.default_rng(1)
    deleted = rng.choice(ids, len(ids) // 10, replace=False)
    started = time.perf_counter()
    index.remove(deleted)
    remove_s = time.perf_counter() - started
    updated = rng.choice(np.setdiff1d(ids, deleted), len(ids) // 100, replace=False)
    fresh = source.draw(len(updated))
    started = time.perf_counter()
    index.remove(updated)
    index.add(updated, fresh)
    update_s = time.perf_counter() - started
    probe = np.concatenate([vectors[np.searchsorted(ids, deleted[:500])], vectors[np.searchsorted(ids, updated[:500])]])
    _, hits = index.search_batch(probe, 10)
    stale = len(set(hits.ravel().tolist()) & set(deleted.tolist()))
    _, own = index.search_batch(fresh[:500], 1)
    return (
        f"deleted {len(deleted):,} in {remove_s:.1f} s, updated {len(updated):,} in {update_s:.1f} s; deleted ids returned: "
        f"{stale}; updated found under their id: {np.mean(own[:, 0] == updated[:500]):.3f}"
    )


def scheme_rows(scheme: str, args: argparse.Namespace, truth: np.ndarray, work: Path) -> tuple[list[tuple], str]:
    """One IVF scheme's table rows (one per refine factor) and churn line, measured in a process of its own (the
    vectors drawn again, as in the parent), so that no other index's freed memory flatters its bytes per chunk."""
    source = EmbeddingLike(args.dim)
    vectors, queries = source.draw(args.n), source.draw(args.queries)
    ids = np.arange(args.n, dtype=np.int64) * 7 + 1_000
    index, per_chunk, build_s, save_s = build(scheme, ids, vectors, args.nprobe, work)
    rows = []
    for factor in [1] if scheme == "ivf-fp16" else [int(f) for f in args.refine.split(",")]:
        index.refine = factor
        name = scheme if factor == 1 else f"{scheme} + refine x{factor}"
        rows.append((name, *measure(index, queries, truth, args.candidates), per_chunk, build_s, save_s))
    line = f"{scheme}: {churn(index, source, ids, vectors)}"
    del index
    for path in work.glob("chunks.*"):
        path.unlink()
    return rows, line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--nprobe", type=int, default=64)
    parser.add_argument("--candidates", type=int, default=100, help="chunks a search asks of the index (search.candidates)")
    parser.add_argument("--schemes", default="ivf-fp16,ivf-sq8,ivf-pq96", help="besides flat: ivf-fp16, ivf-sq8, ivf-pq<m>")
    parser.add_argument("--refine", default="2,4,8", help="refine factors tried on each compressed scheme")
    parser.add_argument("--workdir", default=None, help="where compressed schemes keep their float32 vectors (default: a temp dir)")
    args = parser.parse_args()
    print(machine_line())
    source = EmbeddingLike(args.dim)
    vectors = source.draw(args.n)
    queries = source.draw(args.queries)
    ids = np.arange(args.n, dtype=np.int64) * 7 + 1_000  # chunk ids are arbitrary int64s
    work = Path(args.workdir or tempfile.mkdtemp(prefix="lodex-ann-"))
    work.mkdir(parents=True, exist_ok=True)

    flat, flat_bytes, flat_s, _ = build("flat", ids, vectors, args.nprobe, work)
    started = time.perf_counter()
    _, truth = flat.search_batch(queries, args.candidates)
    batch_ms = (time.perf_counter() - started) * 1000 / args.queries
    print(
        f"{args.n:,} vectors of dim {args.dim}; {args.queries:,} queries, each searched alone for {args.candidates} candidates; "
        f"IVF {ivf_lists(args.n):,} lists, nprobe {args.nprobe}; exact search of all queries in one batch: {batch_ms:.2f} ms a query"
    )
    rows = [("flat (exact, float32)", *measure(flat, queries[:100], truth[:100], args.candidates), flat_bytes, flat_s, 0.0)]
    del flat, vectors
    churned = []
    for scheme in args.schemes.split(","):
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as child:
            scheme_table, line = child.submit(scheme_rows, scheme, args, truth, work).result()
        rows += scheme_table
        churned.append(line)
    print("| scheme | recall@10 | recall@100 | p50 ms | p99 ms | bytes/chunk in RAM | build s | save s |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r10, r100, p50, p99, per_chunk, build_s, save_s in rows:
        print(f"| {name} | {r10:.4f} | {r100:.4f} | {p50:.2f} | {p99:.2f} | {per_chunk:,.0f} | {build_s:.0f} | {save_s:.1f} |")
    print("\n".join(churned))


if __name__ == "__main__":
    main()
