"""Load: 8 concurrent clients against `lodex serve` on loopback for 60 s, over ≥ 100,000 chunks, while indexing.

usage: python bench/serving/load.py [--clients 8] [--seconds 60] [--chunks 100000] [--commits-every S [--rounds N]] [--peer]
Builds a real index of Cranfield (real model), inflates it past --chunks with copies of its chunks
(pushed documents, their vectors jittered and re-normalized), starts `lodex serve` on a free loopback
port, copies the CISI collection into the watched folder (so the server indexes while it answers), and
runs the clients with keep-alive connections. Prints errors, p50/p99 latency, queries/s, the server's
RSS at start, every sixth of the run and at the end, and once the indexing is done (waiting up to --settle
seconds), and the latency of the same queries on an idle server measured first (baseline).
With --commits-every S, the clients run twice instead, in one server: with no indexing, then while a changed file is
written into the watched folder every S seconds (each one a small commit), and the ratio of the two p99s is printed;
with --rounds N, N such pairs alternate (windows of --seconds/N), each phase's latencies pooled, per-round ratios shown.
With --peer, no indexing: the same clients against a hand-rolled FastAPI + sentence-transformers + FAISS flat server over
the same chunks (bench/peers/peer_server.py, dense only), txtai's API in hybrid mode over them (bench/peers/txtai_peer.py, its index
built once under the work dir), then `lodex serve` in its default hybrid mode and in dense mode, each in turn on the same
index (bench/peers/peers.py); prints each row and lodex's queries/s over each peer's.
"""

import argparse
import http.client
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


from bench.harness import EVALDATA as EVAL  # noqa: E402
from bench.harness import LODEX_CLI, free_port, index_folder
from bench.harness import percentile_ms as pct
from bench.peers.peers import DENSE, FAISS, HYBRID, LODEX, TXTAI, Peer, build_txtai, peers  # noqa: E402
from bench.scale.inflate import inflate  # noqa: E402
from lodex.search.collections import load_collection, write_files  # noqa: E402
from lodex.store.lance_store import LanceStore  # noqa: E402


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def get_json(port: int, path: str) -> Any:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", path)
    return json.loads(conn.getresponse().read())


def wait_until_indexed(port: int, limit: float) -> float | None:
    """Seconds until the server says it is done indexing; None if not within `limit`."""
    started = time.monotonic()
    while time.monotonic() - started < limit:
        if not get_json(port, "/ready")["indexing"]:
            return time.monotonic() - started
        time.sleep(1)
    return None


def client(port: int, queries: list[str], until: float, latencies: list[float], errors: list[str], seed: int, peer: Peer = LODEX) -> None:
    rng = random.Random(seed)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    while time.monotonic() < until:
        q = urllib.parse.quote(rng.choice(queries))
        started = time.perf_counter()
        try:
            conn.request("GET", peer.search.format(q=q))
            response = conn.getresponse()
            body = response.read()
            if response.status != 200 or not peer.answered(json.loads(body)):
                errors.append(f"{response.status} {body[:200]!r}")
        except (OSError, http.client.HTTPException, ValueError) as exc:
            errors.append(repr(exc))
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            continue
        latencies.append(time.perf_counter() - started)


def run_clients(port: int, queries: list[str], clients: int, seconds: float, peer: Peer = LODEX) -> tuple[list[float], list[str], float]:
    latencies: list[float] = []
    errors: list[str] = []
    until = time.monotonic() + seconds
    threads = [threading.Thread(target=client, args=(port, queries, until, latencies, errors, i, peer)) for i in range(clients)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, errors, time.monotonic() - started


def keep_changing(folder: Path, every: float, stop: threading.Event, start: int = 0) -> int:
    """Rewrite one of the folder's files every `every` seconds (a line appended, a different file each time, from the
    `start`-th) until `stop`; how many were written. The folder's own files, or those of its subfolders (bench/scale/scale.py's
    work dirs)."""
    files = sorted(folder.glob("*.txt")) or sorted(folder.rglob("*.txt"))
    written = 0
    while not stop.wait(every):
        path = files[(start + written) % len(files)]
        with path.open("a", encoding="utf-8") as fh:
            fh.write(f"\nrevision {start + written} of this note.\n")
        written += 1
    return written


def summary(latencies: list[float], errors: list[str], seconds: float) -> dict:
    return {
        "requests": len(latencies) + len(errors),
        "errors": len(errors),
        "p50_ms": round(pct(latencies, 0.5), 1),
        "p99_ms": round(pct(latencies, 0.99), 1),
        "qps": round(len(latencies) / seconds, 1),
    }


def with_commits(port: int, folder: Path, queries: list[str], args: argparse.Namespace) -> dict:
    """p99 of the clients with no indexing, then while a changed file is committed every `args.commits_every` s; with
    `args.rounds` > 1, that many such pairs of windows of `args.seconds / rounds` each, alternating, the latencies of each
    phase pooled (a drift over the run, such as the page cache filling after the start, then falls on both phases)."""
    rounds = max(1, args.rounds)
    seconds = args.seconds / rounds
    phases: dict[str, tuple[list[float], list[str], float]] = {"no_indexing": ([], [], 0.0), "commits": ([], [], 0.0)}
    written, per_round = 0, []

    def add(phase: str, got: tuple[list[float], list[str], float]) -> dict:
        lat, err, took = phases[phase]
        phases[phase] = (lat + got[0], err + got[1], took + got[2])
        return summary(*got)

    for _ in range(rounds):
        quiet = add("no_indexing", run_clients(port, queries, args.clients, seconds))
        stop = threading.Event()
        count: list[int] = []
        changer = threading.Thread(
            target=lambda count=count, stop=stop, written=written: count.append(keep_changing(folder, args.commits_every, stop, written)), daemon=True
        )
        changer.start()
        busy = add("commits", run_clients(port, queries, args.clients, seconds))
        stop.set()
        changer.join()
        written += count[0] if count else 0
        wait_until_indexed(port, args.settle)
        per_round.append(round(busy["p99_ms"] / quiet["p99_ms"], 2) if quiet["p99_ms"] else None)
    quiet, busy = summary(*phases["no_indexing"]), summary(*phases["commits"])
    return {
        "no_indexing": quiet,
        "commits": busy,
        "files_changed": written,
        "p99_ratio": round(busy["p99_ms"] / quiet["p99_ms"], 2) if quiet["p99_ms"] else None,
        **({"rounds": rounds, "p99_ratio_per_round": per_round} if rounds > 1 else {}),
    }


def start_server(cmd: list[str], env: dict[str, str], port: int, log_path: Path, peer: Peer = LODEX) -> subprocess.Popen:
    """Start a server and wait until it answers /ready with no indexing to do (a lodex server's startup reconciliation
    done: a reused --workdir's last CISI copy goes), or what `peer` polls instead."""
    log = open(log_path, "w+")  # noqa: SIM115 - the server's output, read when it fails to start
    server = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 1800
    while True:
        try:
            if peer.ready(get_json(port, peer.ready_path)):
                return server
        except (OSError, ValueError, KeyError):  # not listening yet, or not ready (an error body)
            pass
        if time.monotonic() > deadline or server.poll() is not None:
            server.kill()
            raise SystemExit("server did not start:\n" + log_path.read_text()[-3000:])
        time.sleep(0.5)


def compare_peers(folder: Path, data: Path, env: dict[str, str], queries: list[str], args: argparse.Namespace, tmp: Path) -> dict:
    """The clients against each peer, then lodex hybrid and dense, one server at a time, no indexing."""
    txtai_index = build_txtai(data, folder.parent, env)
    rows = {}
    for peer in peers(folder, data, folder.parent):
        port = free_port()
        server = start_server(peer.command(port), {**env, **peer.env}, port, tmp / "server.log", peer)
        try:
            run_clients(port, queries, 2, 5, peer)  # warm-up
            row = summary(*run_clients(port, queries, args.clients, args.seconds, peer))
            rows[peer.name] = {**row, "rss_mib": round(rss_mib(server.pid))}
        finally:
            server.terminate()
            server.wait(timeout=120)
    ratios = {
        f"lodex_{mode}_over_{name}": round(rows[lodex]["qps"] / rows[peer]["qps"], 2) if rows[peer]["qps"] else None
        for mode, lodex in (("hybrid", HYBRID), ("dense", DENSE))
        for name, peer in (("faiss", FAISS), ("txtai", TXTAI))
    }
    return {"rows": rows, **ratios, "txtai_index": txtai_index}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--no-indexing", action="store_true", help="no indexing during the load (to compare)")
    parser.add_argument("--workdir", type=Path, help="keep the built index here and re-use it on later runs")
    parser.add_argument(
        "--commits-every",
        type=float,
        default=0,
        metavar="S",
        help="compare p99 with no indexing and with a changed file committed every S seconds (no CISI copy)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        metavar="N",
        help="with --commits-every: N alternating pairs of windows (no indexing, commits) of --seconds/N each, pooled",
    )
    parser.add_argument("--peer", action="store_true", help="compare with a FastAPI + sentence-transformers + FAISS server and txtai's API")
    parser.add_argument(
        "--settle", type=float, default=600, help="after the load, wait up to this long for the indexing to finish, then read RSS again"
    )
    args = parser.parse_args()
    cran = load_collection(EVAL / "cranfield")
    queries = list(cran.queries.values())
    with tempfile.TemporaryDirectory(prefix="lodex-load-") as tmp:
        work = args.workdir or Path(tmp)
        folder, data = work / "docs", work / "data"
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "LODEX_DATA_DIR": str(data)}
        shutil.rmtree(folder / "incoming", ignore_errors=True)
        if not (data / "origin.json").exists():
            write_files(cran, folder)
            index_folder(folder, env)
            inflate(data, args.chunks)
        if args.peer:
            print(
                json.dumps(
                    {
                        "chunks": LanceStore(data, 384).chunks.count_rows(),
                        "clients": args.clients,
                        "seconds": args.seconds,
                        **compare_peers(folder, data, env, queries, args, Path(tmp)),
                    },
                    indent=1,
                )
            )
            return
        port = free_port()
        server = start_server([*LODEX_CLI, "serve", str(folder), "--port", str(port)], env, port, Path(tmp) / "serve.log")
        try:
            chunks = get_json(port, "/stats")["chunks"]
            run_clients(port, queries, 2, 5)  # warm-up
            if args.commits_every:
                print(
                    json.dumps(
                        {
                            "chunks_at_start": chunks,
                            "clients": args.clients,
                            "seconds": args.seconds,
                            "commits_every_s": args.commits_every,
                            **with_commits(port, folder, queries, args),
                        },
                        indent=1,
                    )
                )
                return
            idle, idle_errors, idle_s = run_clients(port, queries, 1, 15)
            rss_start = rss_mib(server.pid)
            extra = work / "cisi"
            shutil.rmtree(extra, ignore_errors=True)
            if not args.no_indexing:
                write_files(load_collection(EVAL / "cisi"), extra)
                shutil.move(str(extra), str(folder / "incoming"))  # the server indexes these while it answers
            samples: list[float] = []
            sampler_stop = threading.Event()

            def sample() -> None:
                while not sampler_stop.wait(args.seconds / 6):
                    samples.append(round(rss_mib(server.pid)))

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            latencies, errors, seconds = run_clients(port, queries, args.clients, args.seconds)
            sampler_stop.set()
            rss_end = rss_mib(server.pid)
            stats = get_json(port, "/stats")
            settled_s = None if args.no_indexing else wait_until_indexed(port, args.settle)
            rss_settled = None if settled_s is None else round(rss_mib(server.pid))
        finally:
            server.terminate()
            server.wait(timeout=120)
    print(
        json.dumps(
            {
                "chunks_at_start": chunks,
                "documents_at_end": stats["documents"],
                "chunks_at_end": stats["chunks"],
                "clients": args.clients,
                "seconds": round(seconds, 1),
                "requests": len(latencies) + len(errors),
                "errors": len(errors),
                "p50_ms": round(pct(latencies, 0.5), 1),
                "p99_ms": round(pct(latencies, 0.99), 1),
                "qps": round(len(latencies) / seconds, 1),
                "rss_start_mib": round(rss_start),
                "rss_during_mib": samples,
                "rss_end_mib": round(rss_end),
                "indexing_done_after_s": None if settled_s is None else round(settled_s, 1),
                "rss_indexing_done_mib": rss_settled,
                "baseline_idle_1_client": {
                    "p50_ms": round(pct(idle, 0.5), 1),
                    "p99_ms": round(pct(idle, 0.99), 1),
                    "qps": round(len(idle) / idle_s, 1),
                    "errors": len(idle_errors),
                },
                "first_errors": errors[:3],
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
