"""`lodex index --ray` against the local path on one folder, in one run: `lodex index --rebuild` locally, then on a
local Ray cluster (started once, its start timed apart) with 1 and with 2 encoder actors; and what the one writer spends
per commit (a flush of index.flush_tokens), in a local folder and on a moto S3 store, from which docs/scaling.md
works out where the single commit becomes the limit.

usage: python bench/scale/cluster.py [FOLDER] [--docs N] [--rounds 3] [--backend transformers] [--no-moto] [--writes]
--writes: only the two ways a Ray run's chunk rows are written (index.ray_writes "driver" and "fragments"), with 2 actors:
documents/s and the commits each made.
Without FOLDER: the first N abstracts of ../shared/evaldata/cranfield (default all 1,400) written as long documents of 25
(as bench/indexing/encode.py does): a folder big enough that Ray's start (its workers, each actor's model) is not most of the run.
Needs the cluster extra (Ray Data) and, for the S3 figure, the test extra (moto[server]). Prints the CPU flags too.
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.harness import EVALDATA, machine_line  # noqa: E402
from bench.scale.object_store import moto_s3  # noqa: E402
from lodex.api.factory import open_app  # noqa: E402
from lodex.api.settings import load_settings  # noqa: E402


def run(
    folder: Path,
    data_dir: str,
    backend: str,
    engine: str = "local",
    actors: int = 0,
    cpus: float = 1.0,
    cache: Path | None = None,
    flush_tokens: int = 0,
    writes: str = "driver",
) -> dict[str, Any]:
    """One `lodex index --rebuild` of `folder`: its seconds (model loads on the actors included, not the driver's),
    tokens/s, and the commits of its one writer (count, seconds each)."""
    overrides = {
        "index.data_dir": data_dir,
        "encoder.backend": backend,
        "index.engine": engine,
        "index.ray_actors": actors,
        "index.ray_cpus_per_actor": cpus,
        "index.ray_writes": writes,
    }
    if cache is not None:
        overrides["storage.cache_dir"] = str(cache)
    if flush_tokens:
        overrides["index.flush_tokens"] = flush_tokens
    settings = load_settings(None, overrides)
    with open_app(settings, "write", folder, rebuild=True) as side:
        commits: list[float] = []
        commit = side.store.commit

        def timed(*args: Any) -> None:
            started = time.perf_counter()
            commit(*args)
            if args[0] is not None:  # a flush (the run's last commit deletes only)
                commits.append(time.perf_counter() - started)

        fragments = side.store.commit_fragments

        def timed_fragments(*args: Any) -> None:
            started = time.perf_counter()
            fragments(*args)
            commits.append(time.perf_counter() - started)

        side.store.commit = timed  # type: ignore[method-assign]
        side.store.commit_fragments = timed_fragments  # type: ignore[method-assign]
        started = time.perf_counter()
        summary = side.indexer.run(folder)
        seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "tokens": summary.tokens,
        "chunks": summary.chunks,
        "tokens_per_s": summary.tokens / seconds,
        "commits": len(commits),
        "commit_s": sum(commits) / max(len(commits), 1),
        "docs_per_s": summary.added / seconds,
    }


def cranfield_folder(folder: Path, docs: int) -> Path:
    """The first `docs` abstracts of Cranfield written into `folder` as long documents of 25 abstracts each."""
    from lodex.search.collections import load_collection, write_files

    collection = load_collection(EVALDATA / "cranfield")
    collection.docs = dict(list(collection.docs.items())[:docs])
    write_files(collection, folder, bundle=25)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", nargs="?", type=Path, help="the folder to index (default: Cranfield as long documents)")
    parser.add_argument("--docs", type=int, default=1_400, help="Cranfield abstracts in the default folder")
    parser.add_argument("--backend", default="transformers", help="encoder.backend (tests.fakes:fake_encoder: the plumbing alone)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each mode; the fastest of each is shown")
    parser.add_argument("--no-moto", action="store_true", help="skip the commit timing on a moto S3 store")
    parser.add_argument("--writes", action="store_true", help="only index.ray_writes driver against fragments, 2 actors")
    args = parser.parse_args()
    scratch = tempfile.TemporaryDirectory(prefix="lodex-cluster-")
    folder = args.folder.resolve() if args.folder else cranfield_folder(Path(scratch.name) / "docs", args.docs)
    os.environ["PYTHONPATH"] = str(ROOT)  # Ray's workers import tests.fakes for a fake backend
    import ray

    cores = os.cpu_count() or 1
    modes = {
        "local": ("local", 0, 1.0, "driver"),
        "ray, 1 actor": ("ray", 1, cores - 0.5, "fragments"),
        "ray, 2 actors": ("ray", 2, (cores - 0.5) / 2, "fragments"),
    }
    if args.writes:
        modes = {f"ray, 2 actors, {w}": ("ray", 2, (cores - 0.5) / 2, w) for w in ("driver", "fragments")}
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in modes}  # the model's threads split between the actors,
    with tempfile.TemporaryDirectory() as tmp:  # half a CPU left to the reading tasks
        started = time.perf_counter()
        ray.init(num_cpus=cores, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
        ray_start = time.perf_counter() - started
        try:  # the modes in turn, each round in another order: a shared machine's load falls on each alike
            for n in range(args.rounds):
                for name in list(modes)[n % len(modes) :] + list(modes)[: n % len(modes)]:
                    engine, actors, cpus, writes = modes[name]
                    rounds[name].append(run(folder, f"{tmp}/{n}-{engine}{actors}{writes}", args.backend, engine, actors, cpus, writes=writes))
        finally:
            ray.shutdown()
        results = {name: min(runs, key=lambda r: r["seconds"]) for name, runs in rounds.items()}  # the least disturbed
        if not args.no_moto and not args.writes:
            with moto_s3() as bucket:
                # the fake encoder and small flushes: many commits, the store's cost alone
                results["local, moto S3"] = run(folder, f"{bucket}/local", "tests.fakes:fake_encoder", cache=Path(tmp) / "cache", flush_tokens=2048)
    local = results.get("local") or next(iter(results.values()))
    print(
        f"{machine_line()}; encoder.backend {args.backend}; folder {args.folder or f'Cranfield, {args.docs} abstracts in files of 25'} "
        f"({local['chunks']} chunks, {local['tokens']} tokens encoded); Ray local cluster start {ray_start:.1f} s (not counted)"
    )
    print(f"{'':28}{'seconds':>9}{'docs/s':>8}{'tokens/s':>10}{'x first':>9}{'commits':>9}{'s/commit':>10}")
    for name, r in results.items():
        ratio = f"{r['tokens_per_s'] / local['tokens_per_s']:9.2f}" if "moto" not in name else f"{'(fake)':>9}"
        print(f"{name:28}{r['seconds']:9.1f}{r['docs_per_s']:8.2f}{r['tokens_per_s']:10.0f}{ratio}{r['commits']:9d}{r['commit_s']:10.3f}")
    print("all rounds (seconds):", {name: [round(r["seconds"], 1) for r in runs] for name, runs in rounds.items()})


if __name__ == "__main__":
    main()
