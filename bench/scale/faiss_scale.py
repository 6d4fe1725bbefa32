"""The vector index after a large distributed append: N chunks' vectors arrive in S shards, as from S machines; the
IVF index is trained once on a sample, each shard is encoded by a worker of its own into an empty copy of that trained
index (store/ivf_merge.py `empty_copy`: codes, and a compressed index's float32 segment file), and the driver merges
the shards by inverted list (`merge_shards`), saves, and a fresh process loads the index and searches it. Recall@10
is measured against exact search by brute force over every stored vector, in blocks.

usage: python bench/scale/faiss_scale.py --chunks 10000000 --shards 16 --workdir DIR [--nlist 4096] [--codes sq8|pq]
                                   [--queries 200] [--nprobe 32,64,128] [--keep]

Vectors: bench/scale/ann.py's `EmbeddingLike` (2,000 topic centres in a 48-d latent space at graded distances, projected to
384-d plus isotropic noise, normalized; the generator the 1M scheme figures were measured on), drawn per block of
65,536 rows from a generator seeded by (seed, shard, block): any shard is made again alike without holding the others,
and the queries are further draws of the same mixture. Each step runs in a process of its own (a worker is one), which
reports its seconds and its peak resident memory (ru_maxrss); the float32 vectors live only in lodex's segment files
on disk. FAISS and BLAS run on 2 threads. Prints Markdown tables; --json FILE appends the whole report as a line.
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "2")

from bench.harness import machine_line  # noqa: E402
from bench.scale.ann import EmbeddingLike, recall_at  # noqa: E402
from lodex.store.ivf_merge import empty_copy, merge_shards  # noqa: E402
from lodex.store.vector_index import VectorIndex, ivf_lists  # noqa: E402

DIM, BLOCK, K = 384, 65_536, 10
_HEADER = 32  # a segment file's header (store/exact_vectors.py): magic, dim, rows, reserved


def shard_rows(args: argparse.Namespace, shard: int) -> range:
    """The chunk ids of one shard: an even split of 0..chunks-1."""
    bounds = np.linspace(0, args.chunks, args.shards + 1).astype(int)
    return range(int(bounds[shard]), int(bounds[shard + 1]))


def block(args: argparse.Namespace, shard: int, number: int, rows: int) -> np.ndarray:
    """The `rows` vectors of one block of a shard, the same every time they are drawn."""
    source = EmbeddingLike(DIM, seed=args.seed)  # the mixture: the same for every shard
    source.rng = np.random.default_rng([args.seed, shard, number])
    return source.draw(rows)


def shard_blocks(args: argparse.Namespace, shard: int) -> "Any":
    """(ids, vectors) of a shard, a block at a time."""
    rows = shard_rows(args, shard)
    for number, start in enumerate(range(rows.start, rows.stop, BLOCK)):
        ids = np.arange(start, min(start + BLOCK, rows.stop), dtype=np.int64)
        yield ids, block(args, shard, number, len(ids))


def nlist_of(args: argparse.Namespace) -> int:
    return args.nlist or ivf_lists(args.chunks)


def template(args: argparse.Namespace) -> VectorIndex:
    index = VectorIndex.load(Path(args.workdir) / "trained", 0, DIM, args.nprobe_default)
    assert index is not None, "the trained index is missing: run the train step first"
    return index


# ---- the steps, each in a process of its own -----------------------------------------------------------------------
def step_train(args: argparse.Namespace) -> dict[str, Any]:
    """The driver: train the clusters and codes once on an even sample (the first rows of every shard: its rows are
    independent draws, so these are as good as every k-th), and keep the empty trained index for the workers."""
    per = -(-40 * nlist_of(args) // args.shards)
    sample = np.concatenate([block(args, s, 0, min(per, len(shard_rows(args, s)))) for s in range(args.shards)])
    directory = Path(args.workdir) / "trained"
    directory.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    index = VectorIndex.ivf(DIM, sample, nlist_of(args), args.nprobe_default, exact=directory, codes=args.codes)
    seconds = time.perf_counter() - started
    index.save(directory, 0)
    return {"seconds": seconds, "sample": len(sample), "nlist": nlist_of(args), "codes": type(index.index).__name__}


def step_encode(args: argparse.Namespace) -> dict[str, Any]:
    """A worker: its shard's vectors (made here, as the encoder would) added to an empty copy of the trained index,
    then saved in its own directory (codes, and the float32 segment file) for the driver."""
    directory = Path(args.workdir) / f"shard{args.shard:03d}"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    shard = empty_copy(template(args), directory)
    made = encoded = 0.0
    for ids, vectors in timed(shard_blocks(args, args.shard)):
        made += ids[1]
        started = time.perf_counter()
        shard.add(ids[0], vectors)
        encoded += time.perf_counter() - started
    started = time.perf_counter()
    shard.save(directory, 0)
    return {"seconds": encoded, "made_s": made, "save_s": time.perf_counter() - started, "rows": len(shard)}


def timed(blocks: "Any") -> "Any":
    """The blocks as ((ids, seconds to make them), vectors)."""
    while True:
        started = time.perf_counter()
        try:
            ids, vectors = next(blocks)
        except StopIteration:
            return
        yield (ids, time.perf_counter() - started), vectors


def step_merge(args: argparse.Namespace) -> dict[str, Any]:
    """The driver: each shard loaded and merged into an empty copy of the trained index by inverted list, its segment
    file moved in; then the index saved as lodex saves it (the segments compacted by its rule)."""
    directory = Path(args.workdir) / "index"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    main = empty_copy(template(args), directory)
    started = time.perf_counter()
    for s in range(args.shards):
        shard_dir = Path(args.workdir) / f"shard{s:03d}"
        shard = VectorIndex.load(shard_dir, 0, DIM, args.nprobe_default)
        assert shard is not None and not len(shard.missing_vectors())
        merge_shards(main, [shard])
        shutil.rmtree(shard_dir)
    merged = time.perf_counter() - started
    started = time.perf_counter()
    main.save(directory, 1)
    return {"seconds": merged, "save_s": time.perf_counter() - started, "rows": len(main)}


def stored_vectors(directory: Path) -> "Any":
    """(ids, vectors) of every segment file in `directory`, read in blocks (not mapped: the page cache holds them)."""
    for path in sorted(directory.glob("chunks.exact.*.f32")):
        rows = int(np.fromfile(path, np.int64, 1, offset=16)[0])
        ids = np.fromfile(path, np.int64, rows, offset=_HEADER + rows * DIM * 4)
        for start in range(0, rows, BLOCK):
            n = min(BLOCK, rows - start)
            yield ids[start : start + n], np.fromfile(path, np.float32, n * DIM, offset=_HEADER + start * DIM * 4).reshape(n, DIM)


def step_truth(args: argparse.Namespace) -> dict[str, Any]:
    """Exact top-10 of every query by brute force over every stored vector, block by block."""
    queries = EmbeddingLike(DIM, seed=args.seed)
    queries.rng = np.random.default_rng([args.seed, 1 << 30])
    q = queries.draw(args.queries)
    best_s, best_i = np.full((len(q), K), -np.inf, np.float32), np.full((len(q), K), -1, np.int64)
    seen, started = 0, time.perf_counter()
    for ids, vectors in stored_vectors(Path(args.workdir) / "index"):
        scores = q @ vectors.T
        top = np.argpartition(-scores, K - 1, axis=1)[:, :K]
        all_s = np.concatenate([best_s, np.take_along_axis(scores, top, 1)], 1)
        all_i = np.concatenate([best_i, ids[top]], 1)
        order = np.argsort(-all_s, axis=1, kind="stable")[:, :K]
        best_s, best_i = np.take_along_axis(all_s, order, 1), np.take_along_axis(all_i, order, 1)
        seen += len(ids)
    np.savez(Path(args.workdir) / "truth.npz", queries=q, ids=best_i, scores=best_s)
    return {
        "seconds": time.perf_counter() - started,
        "vectors": seen,
        "top1_cos": float(best_s[:, 0].mean()),
        "top10_cos": float(best_s[:, -1].mean()),
    }


def step_search(args: argparse.Namespace) -> dict[str, Any]:
    """A fresh process: the saved index loaded, then each query searched alone for 10 chunks (a first pass, the refine
    step's reads on whatever the page cache holds; a second pass; then one pass per --nprobe value)."""
    truth = np.load(Path(args.workdir) / "truth.npz")
    started = time.perf_counter()
    index = VectorIndex.load(Path(args.workdir) / "index", 1, DIM, args.nprobe_default)
    assert index is not None and not len(index.missing_vectors())
    out: dict[str, Any] = {
        "load_s": time.perf_counter() - started,
        "rows": len(index),
        "rss_loaded": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    for label, nprobe in [("first", args.nprobe_default), ("second", args.nprobe_default), *[(f"nprobe{n}", n) for n in args.nprobe]]:
        index.set_nprobe(nprobe)
        found, seconds = [], []
        for query in truth["queries"]:
            started = time.perf_counter()
            found.append(index.search(query, K)[1])
            seconds.append(time.perf_counter() - started)
        out[label] = {
            "nprobe": nprobe,
            "recall": recall_at(found, truth["ids"], K),
            "p50_ms": 1000 * float(np.percentile(seconds, 50)),
            "p99_ms": 1000 * float(np.percentile(seconds, 99)),
        }
    out["seconds"] = out["load_s"]
    return out


STEPS = {"train": step_train, "encode": step_encode, "merge": step_merge, "truth": step_truth, "search": step_search}


def run_step(args: argparse.Namespace, name: str, shard: int = 0) -> dict[str, Any]:
    """One step in a process of its own; its report, with its wall time and peak resident memory (kept in --workdir:
    with --resume a step already done is not run again)."""
    kept = Path(args.workdir) / "reports" / f"{name}{shard:03d}.json"
    if args.resume and kept.exists():
        return dict(json.loads(kept.read_text()))
    command = [sys.executable, __file__, "--step", name, "--shard", str(shard), *args.forwarded]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"step {name} {shard} failed:\n{done.stderr[-3000:]}")
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    report["wall_s"] = time.perf_counter() - started
    kept.parent.mkdir(exist_ok=True)
    kept.write_text(json.dumps(report))
    return report


def disk(path: Path, pattern: str = "*") -> int:
    return sum(p.stat().st_size for p in path.rglob(pattern) if p.is_file())


def beside() -> str:
    """What else used the CPUs: the load average and the busiest other processes."""
    top = subprocess.run(["ps", "-eo", "pcpu,comm", "--sort=-pcpu"], capture_output=True, text=True).stdout.splitlines()[1:6]
    return f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}; busiest: " + ", ".join(
        " ".join(line.split()) for line in top
    )


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=10_000_000)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--workdir", required=True, help="where the shards, the index and the ground truth are written")
    parser.add_argument("--nlist", type=int, default=0, help="IVF clusters (default: lodex's ivf_lists(chunks))")
    parser.add_argument("--codes", default="sq8", choices=["sq8", "pq"], help="the compressed index's codes")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--nprobe", default="32,128", help="further nprobe values searched after the default (64)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the index and ground truth in --workdir")
    parser.add_argument("--resume", action="store_true", help="run only the steps whose report --workdir lacks")
    parser.add_argument("--json", default=None, help="append the report to this file as a line")
    parser.add_argument("--step", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--shard", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.forwarded = [a for a in (argv if argv is not None else sys.argv[1:])]
    args.forwarded = [
        a
        for i, a in enumerate(args.forwarded)
        if a not in ("--keep", "--resume") and not (args.forwarded[i - 1] == "--json" if i else False) and a != "--json"
    ]
    from lodex.store.ann_policy import NPROBE

    args.nprobe_default = NPROBE
    args.nprobe = [int(n) for n in args.nprobe.split(",") if n]
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    if args.step:
        import faiss

        faiss.omp_set_num_threads(2)
        report = STEPS[args.step](args)
        report["rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        print(json.dumps(report))
        return report
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpu": machine_line(),
        "chunks": args.chunks,
        "shards": args.shards,
        "beside_start": beside(),
    }
    print(f"{report['date']}; {report['cpu']}; {args.chunks:,} chunks in {args.shards} shards; {report['beside_start']}", flush=True)
    report["train"] = run_step(args, "train")
    report["encode"] = [run_step(args, "encode", s) for s in range(args.shards)]
    report["shards_disk"] = disk(work, "shard*/*")
    report["merge"] = run_step(args, "merge")
    report["disk"] = {"codes": disk(work / "index", "chunks.v*.faiss"), "vectors": disk(work / "index", "chunks.exact.*")}
    report["truth"] = run_step(args, "truth")
    report["search"] = run_step(args, "search")
    report["beside_end"] = beside()
    print_tables(report)
    if args.json:
        with open(args.json, "a", encoding="utf-8") as out:
            out.write(json.dumps(report) + "\n")
    if not args.keep:
        for name in ("index", "trained", "reports"):
            shutil.rmtree(work / name, ignore_errors=True)
    return report


def print_tables(r: dict[str, Any]) -> None:
    gib = 1 << 30
    enc = r["encode"]
    encode_s = [e["seconds"] for e in enc]
    print(f"\nIVF: {r['train']['nlist']:,} clusters, {r['train']['codes']}, trained on {r['train']['sample']:,} vectors")
    print("\n| step | seconds | peak RSS GiB |\n|---|---|---|")
    print(f"| train (driver, once) | {r['train']['seconds']:.1f} | {r['train']['rss'] / gib:.2f} |")
    print(
        f"| encode a shard (worker; {len(enc)} shards of ~{enc[0]['rows']:,}) | median {np.median(encode_s):.1f}, max {max(encode_s):.1f},"
        f" sum {sum(encode_s):.1f} (+ save {np.median([e['save_s'] for e in enc]):.1f} each; vectors made in {np.median([e['made_s'] for e in enc]):.1f}) | {max(e['rss'] for e in enc) / gib:.2f} |"
    )
    print(f"| merge {len(enc)} shards by inverted list (driver) | {r['merge']['seconds']:.1f} | {r['merge']['rss'] / gib:.2f} |")
    print(f"| save the merged index (codes + segment compaction) | {r['merge']['save_s']:.1f} | (with merge) |")
    print(f"| load in a fresh process | {r['search']['load_s']:.1f} | {r['search']['rss_loaded'] / gib:.2f} |")
    print(f"| exact ground truth, brute force ({r['truth']['vectors']:,} vectors) | {r['truth']['seconds']:.1f} | {r['truth']['rss'] / gib:.2f} |")
    s = r["search"]
    print(
        f"\nSearch, {r['chunks']:,} chunks, top 10, a query at a time (peak RSS {s['rss'] / gib:.2f} GiB); exact top-1 cosine"
        f" {r['truth']['top1_cos']:.3f}, 10th {r['truth']['top10_cos']:.3f}\n"
    )
    print("| pass | nprobe | recall@10 | p50 ms | p99 ms |\n|---|---|---|---|---|")
    for label in [k for k in s if isinstance(s[k], dict)]:
        print(f"| {label} | {s[label]['nprobe']} | {s[label]['recall']:.4f} | {s[label]['p50_ms']:.1f} | {s[label]['p99_ms']:.1f} |")
    print(
        f"\nDisk: codes {r['disk']['codes'] / gib:.2f} GiB, float32 vectors {r['disk']['vectors'] / gib:.2f} GiB; the shards before the"
        f" merge {r['shards_disk'] / gib:.2f} GiB. Beside at the end: {r['beside_end']}"
    )


if __name__ == "__main__":
    main()
