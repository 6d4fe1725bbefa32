"""Past one writer, simulated: documents/s against N simulated machines for today's single writer (every vector
gathered to one committer, a commit per flush of index.flush_tokens through lodex's LanceStore.commit) and for fragment
writes (each machine writes its flushes as Lance fragments, one committer appends all waiting fragments in one commit),
on a moto S3 server in its own process with latency, refused requests, lost replies and a rival writer injected.

Each machine is a thread whose encoder sleeps for the real encoder's measured time per token (calibrated at start on the
bundled MiniLM, exact and fast, over real chunks; or `--per-token-us`), so 128 machines fit two cores; their writes are
real Lance writes of lodex's rows (384-dimension vectors, real text). Every run ends with a check of the index: every
chunk once, every document once (the rival's included), nothing else.

usage: python bench/scale/scaleout.py [--machines 1,2,4,8,16,32,64,128] [--mode exact] [--per-token-us US]
                                [--flushes 2.5] [--latency-ms 0] [--refuse 0] [--lose 0] [--rival-every-s 0] [--json OUT]
       python bench/scale/scaleout.py --quick     (seconds: 1 and 4 machines, small flushes, every fault on; a check, not a figure)
Needs the test extra (moto[server]). Prints the CPU's flags, the load average and each run's CPU seconds beside the figures.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time
from contextlib import ExitStack
from dataclasses import asdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.harness import OUT, machine_line  # noqa: E402
from bench.scale.scaleout_designs import Point, run_point  # noqa: E402
from bench.scale.scaleout_s3 import Endpoint, s3_server  # noqa: E402
from bench.scale.scaleout_work import CHARS_PER_TOKEN, Workload, passages  # noqa: E402

DESIGNS = ("single", "fragments")
MEAN_DOC_TOKENS = 17.5 * 94  # scaleout_work's documents: 6–29 chunks of 60–128 tokens


def calibrate(precision: str, texts: int = 96, rounds: int = 2) -> tuple[float, float]:
    """(seconds per token of a machine of this kind given to the bundled MiniLM in this mode, and the wall seconds
    per token measured here) over real chunks of ~100 tokens, the best of `rounds` after a warm-up. The first is the
    encoder's CPU seconds per token over the cores it runs on: what a dedicated machine's wall time would be, which a
    shared machine's wall clock cannot show (other sessions' load stretches it many times)."""
    from lodex.encoders.cpu import physical_cores
    from lodex.encoders.settings import EncoderSettings
    from lodex.encoders.transformers_encoder import TransformersEncoder

    encoder = TransformersEncoder(EncoderSettings(precision=precision, cache_dir=str(OUT / "model-cache")))  # type: ignore[arg-type]
    chunks = [p[: int(100 * CHARS_PER_TOKEN)] for p in passages()][:texts]
    tokens = sum(encoder.token_lengths(chunks))
    encoder.embed(chunks[:16])
    cpu = wall = float("inf")
    for _ in range(rounds):
        started, cpu_started = time.perf_counter(), time.process_time()
        encoder.embed(chunks)
        wall, cpu = min(wall, time.perf_counter() - started), min(cpu, time.process_time() - cpu_started)
    return cpu / physical_cores() / tokens, wall / tokens


def sweep(args: argparse.Namespace, work: Workload) -> list[Point]:
    """Each design at each machine count, each on a fresh S3 server (`--quick`: one for all) with the faults asked
    for; designs alternate which goes first, so that the shared machine's load falls on both alike."""
    points = []
    with ExitStack() as shared:
        endpoint = shared.enter_context(s3_server()) if args.quick else None
        for i, machines in enumerate(args.machines):
            for design in args.designs if i % 2 == 0 else args.designs[::-1]:
                with ExitStack() as own:
                    point = measure(args, work, design, machines, endpoint or own.enter_context(s3_server()))
                points.append(point)
                print(_line(point), file=sys.stderr, flush=True)
                if args.json:
                    with open(args.json, "a", encoding="utf-8") as out:
                        out.write(json.dumps(asdict(point) | {"docs_per_s": point.docs_per_s}, default=str) + "\n")
    return points


def measure(args: argparse.Namespace, work: Workload, design: str, machines: int, endpoint: Endpoint) -> Point:
    """One run, with the faults it met and the load average before it noted."""
    if not endpoint.filesystem().get_file_info("bench").type:
        endpoint.create_bucket("bench")
    endpoint.set_faults(args.latency_ms, args.refuse, args.lose, seed=machines)
    load = os.getloadavg()[0]
    point = run_point(design, machines, work, endpoint, f"{design}-{machines}", args.rival_every_s)
    point.tries |= {f"s3 {key}": n for key, n in endpoint.counts().items() if key.startswith(("refused", "lost", "answered"))}
    point.tries["load average before"] = round(load)
    endpoint.set_faults()
    return point


def _line(p: Point) -> str:
    seconds = [c.seconds for c in p.commits]
    return (
        f"{p.design:9} N={p.machines:3d}: {p.docs_per_s:8.1f} docs/s in {p.seconds:6.1f} s, {len(p.commits)} commits "
        f"(mean {statistics.mean(seconds):.3f} s), check {'ok' if p.check.get('ok') else 'FAILED'} {p.check}, {p.tries}, "
        f"cpu {p.cpu_s}"
    )


def knee(points: list[Point], base: float) -> tuple[int, float]:
    """(the largest N still at >= 80% of linear, and the throughput the design levels off at)."""
    kept = [p.machines for p in points if p.docs_per_s >= 0.8 * base * p.machines]
    return (max(kept) if kept else 0), max(p.docs_per_s for p in points)


def report(points: list[Point], work: Workload, args: argparse.Namespace) -> None:
    """The tables: throughput and % of linear against N for both designs, then what the committers did."""
    by = {(p.design, p.machines): p for p in points}
    per_machine = 1 / (MEAN_DOC_TOKENS * work.per_token_s)
    print(f"{'N':>4} {'ideal docs/s':>13} " + " ".join(f"{d + ' docs/s':>18} {'% linear':>9} {'steady':>7}" for d in args.designs))
    for n in args.machines:
        cells = []
        for design in args.designs:
            p, base = by[(design, n)], by[(design, args.machines[0])].docs_per_s / args.machines[0]
            cells.append(f"{p.docs_per_s:18.1f} {100 * p.docs_per_s / (base * n):8.0f}% {p.steady_docs_per_s():7.1f}")
        print(f"{n:4d} {per_machine * n:13.1f} " + " ".join(cells))
    print()
    print(
        f"{'design':10} {'N':>4} {'commits':>8} {'commit s p50':>13} {'p95':>7} {'chunks s p50':>13} {'docs s p50':>11} "
        f"{'busy':>6} {'frags/commit':>13} {'rows/commit':>12} {'docs/commit':>12} {'manifest KB':>12} {'cpu s (this, s3)':>17} {'check':>6}"
    )
    for p in points:
        s = sorted(c.seconds for c in p.commits)
        chunks, rest = statistics.median(c.chunks_s for c in p.commits), statistics.median(c.seconds - c.chunks_s for c in p.commits)
        print(
            f"{p.design:10} {p.machines:4d} {len(s):8d} {statistics.median(s):13.3f} {s[math.ceil(0.95 * len(s)) - 1]:7.3f} "
            f"{chunks:13.3f} {rest:11.3f} {100 * sum(s) / p.seconds:5.0f}% {statistics.mean(c.fragments for c in p.commits):13.1f} "
            f"{statistics.mean(c.rows for c in p.commits):12.0f} {statistics.mean(c.docs for c in p.commits):12.1f} "
            f"{p.manifest_bytes / 1024:12.1f} {p.cpu_s['harness']:8.0f},{p.cpu_s['s3']:7.0f} {'ok' if p.check['ok'] else 'FAIL':>6}"
        )
    print()
    for design in args.designs:
        mine = [p for p in points if p.design == design]
        last, top = knee(mine, mine[0].docs_per_s / mine[0].machines)
        print(f"{design}: >= 80% of linear up to N = {last}; the most measured {top:.1f} docs/s")


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--machines", default="1,2,4,8,16,32,64,128", help="simulated machine counts, the first the baseline")
    parser.add_argument("--designs", default=",".join(DESIGNS), help="single, fragments or both")
    parser.add_argument("--mode", choices=("exact", "fast"), default="exact", help="which calibrated encoder cost the sweep uses")
    parser.add_argument("--per-token-us", type=float, default=0.0, help="the encoder's µs per token (0: calibrate both modes here)")
    parser.add_argument("--flush-tokens", type=int, default=131_072, help="index.flush_tokens: a flush, a fragment")
    parser.add_argument("--flushes", type=float, default=2.5, help="each machine's share of the folder, in flushes")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="added to every S3 request")
    parser.add_argument("--refuse", type=float, default=0.0, help="share of S3 requests refused (503) before they are served")
    parser.add_argument("--lose", type=float, default=0.0, help="share of S3 requests served whose reply is lost (500)")
    parser.add_argument("--rival-every-s", type=float, default=0.0, help="a rival writer commits a document this often (0: none)")
    parser.add_argument("--json", help="append each run as a JSON line here")
    parser.add_argument("--quick", action="store_true", help="1 and 4 machines, tiny flushes, every fault: a check of the harness")
    args = parser.parse_args(argv)
    if args.quick:
        args.machines, args.per_token_us, args.flush_tokens, args.flushes = "1,4", args.per_token_us or 2.0, 4096, 1.5
        args.latency_ms, args.refuse, args.lose, args.rival_every_s = 5.0, 0.03, 0.03, 0.1
    args.machines = [int(n) for n in args.machines.split(",")]
    args.designs = args.designs.split(",")
    return args


def main(argv: list[str] | None = None) -> list[Point]:
    args = parse(argv)
    print(f"{machine_line()}; load average {os.getloadavg()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    per_token_s = args.per_token_us / 1e6
    if not per_token_s:
        measured = {mode: calibrate(mode) for mode in ("exact", "fast")}
        print(
            "calibrated on the bundled MiniLM (CPU time over the cores; wall time here in brackets): "
            + ", ".join(f"{mode} {1e6 * s:.1f} µs/token = {1 / s:,.0f} tokens/s ({1e6 * w:.1f} µs/token)" for mode, (s, w) in measured.items())
            + f"; the sweep uses {args.mode}"
        )
        per_token_s = measured[args.mode][0]
    work = Workload(per_token_s, args.flush_tokens, max(1, round(args.flushes * args.flush_tokens / MEAN_DOC_TOKENS)))
    print(
        f"encoder stand-in {1e6 * per_token_s:.1f} µs/token; flush {work.flush_tokens} tokens; {work.docs_per_machine} documents "
        f"a machine; S3 faults: {args.latency_ms} ms a request, {args.refuse:.0%} refused, {args.lose:.0%} replies lost; "
        f"rival commit every {args.rival_every_s or '-'} s"
    )
    points = sweep(args, work)
    report(points, work, args)
    return points


if __name__ == "__main__":
    main()
