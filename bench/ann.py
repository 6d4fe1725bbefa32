"""Large-index mode: IVF recall@10 against exact search, search latency and build time at 1,000,000 vectors.

usage: python bench/ann.py [--n 1000000] [--dim 384] [--queries 1000] [--nprobe 16,32,64]
Synthetic vectors shaped like sentence embeddings: a low-dimensional latent structure (48-d points
around 2,000 topic centres at graded distances) mapped into 384-d by a fixed random projection, plus
isotropic noise, normalized; queries are drawn the same way. Ground truth is exact inner-product search (FAISS flat) in
the same run. Builds lodex's IVF index from the flat one (train + add), then, per nprobe, searches
the queries one at a time (p50/p99 latency, as a single API query does) and measures recall@10.
Then deletes 10% of the vectors and re-adds 1% with new vectors, and checks that no deleted or
superseded vector is ever returned.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lodex.store.vector_index import VectorIndex  # noqa: E402


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


def recall_at(approx: np.ndarray, exact: np.ndarray, k: int = 10) -> float:
    """Mean share of the exact top-k found in the approximate top-k."""
    return float(np.mean([len(set(a[:k]) & set(e[:k])) / k for a, e in zip(approx, exact)]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--nprobe", default="16,32,64")
    args = parser.parse_args()
    source = EmbeddingLike(args.dim)
    rng = source.rng
    vectors = source.draw(args.n)
    queries = source.draw(args.queries)
    ids = np.arange(args.n, dtype=np.int64) * 7 + 1_000  # chunk ids are arbitrary int64s

    flat = VectorIndex(args.dim)
    flat.add(ids, vectors)
    started = time.perf_counter()
    truth_scores, truth = flat.search_batch(queries, 10)
    exact_ms = (time.perf_counter() - started) * 1000 / args.queries
    started = time.perf_counter()
    for q in queries[:50]:
        flat.search(q, 10)
    exact_one_ms = (time.perf_counter() - started) * 1000 / 50

    started = time.perf_counter()
    ivf = flat.to_ivf()
    build_s = time.perf_counter() - started
    print(f"{args.n:,} vectors of dim {args.dim}; {args.queries:,} queries; IVF {ivf.index.nlist:,} lists, built in {build_s:.1f} s")
    print(f"exact (flat): {exact_one_ms:.1f} ms per single query, {exact_ms:.2f} ms per query in one batch; "
          f"neighbour cosines: top-1 {truth_scores[:, 0].mean():.3f}, 10th {truth_scores[:, 9].mean():.3f}")
    print(f"{'nprobe':>7s} {'recall@10':>10s} {'p50 ms':>8s} {'p99 ms':>8s}")
    for nprobe in [int(p) for p in args.nprobe.split(",")]:
        ivf.index.nprobe = nprobe
        found, times = [], []
        for q in queries:
            started = time.perf_counter()
            _, hit = ivf.search(q, 10)
            times.append((time.perf_counter() - started) * 1000)
            found.append(hit)
        print(f"{nprobe:7d} {recall_at(found, truth):10.4f} {np.percentile(times, 50):8.2f} {np.percentile(times, 99):8.2f}")

    deleted = rng.choice(ids, args.n // 10, replace=False)
    started = time.perf_counter()
    ivf.remove(deleted)
    remove_s = time.perf_counter() - started
    updated = rng.choice(np.setdiff1d(ids, deleted), args.n // 100, replace=False)
    fresh = source.draw(len(updated))
    started = time.perf_counter()
    ivf.remove(updated)
    ivf.add(updated, fresh)
    update_s = time.perf_counter() - started
    probe = np.concatenate([vectors[np.searchsorted(ids, deleted[:500])], vectors[np.searchsorted(ids, updated[:500])]])
    _, hits = ivf.search_batch(probe, 10)
    stale = set(hits.ravel().tolist()) & set(deleted.tolist())
    _, own = ivf.search_batch(fresh[:500], 1)
    print(f"deleted {len(deleted):,} in {remove_s:.1f} s, updated {len(updated):,} in {update_s:.1f} s; "
          f"deleted ids returned: {len(stale)}; updated vectors found under their id: {np.mean(own[:, 0] == updated[:500]):.3f}")


if __name__ == "__main__":
    main()
