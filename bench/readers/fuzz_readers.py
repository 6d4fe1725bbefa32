"""Run thousands of hostile files (tests/fuzz_files) through lodex's readers, each in a forked child under a deadline
and an address-space limit, and print per format: cases, read, failed (by reason), hangs, memory blow-ups, crashes,
slowest file and peak RSS.

usage: python bench/readers/fuzz_readers.py [--formats pdf,xlsx] [--generators a,b] [--seeds 0:200] [--timeout 20]
                                   [--memory-mb 2048] [--cases pdf/lzw_bomb/3,...] [--verbose]
A case that hangs, blows memory or crashes prints its id (format/generator/seed): `--cases ID` runs it alone.
Reads with the default ReadLimits, as `lodex index` does (the text extraction step, without chunking or encoding).
The generators are listed in tests/fuzz_files (GENERATORS); tests/test_reader_fuzz.py lists those that need the
per-file budget (NEEDS_BUDGET_GENERATORS). Thousands of corruption cases in ~10 minutes on 2 cores:
    python bench/readers/fuzz_readers.py --generators flip,truncate,splice,fixture_flip,fixture_truncate,fixture_splice --seeds 0:30
"""

import argparse
import gc
import importlib
import os
import re
import resource
import select
import signal
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from lodex.indexer.readers.readers import BY_FORMAT, extract  # noqa: E402
from tests.fuzz_files import FORMATS, RAW_REASON, Case, cases  # noqa: E402


@dataclass
class Outcome:
    case: Case
    kind: str  # read, failed, raw (a Python exception or a library's words as the reason), timeout, memory, crash
    detail: str
    seconds: float
    rss_mb: float


@dataclass
class Table:
    cases: int = 0
    kinds: Counter = field(default_factory=Counter)
    reasons: Counter = field(default_factory=Counter)
    slowest: tuple[float, str] = (0.0, "")
    peak: tuple[float, str] = (0.0, "")


def _child(case: Case, data: bytes, memory_mb: int, out: int) -> None:
    """In the forked child: read the file, write one line (kind, detail), exit without cleanup."""
    gc.freeze()  # the parent's objects stay out of the child's collections (no copy-on-write of its whole heap)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
        try:
            got = extract(case.name, data)
            line = f"read\t{len(got.text)} chars as {got.format}"
        except MemoryError:
            line = "memory\tMemoryError"
        except RecursionError as exc:
            line = f"raw\tRecursionError: {exc}"
        except Exception as exc:  # noqa: BLE001 — what the pipeline would record
            from lodex.indexer.errors import ReadError
            from lodex.store.errors import LodexError

            if isinstance(exc, ReadError):
                reason = exc.message
            elif isinstance(exc, LodexError):
                reason = exc.one_line()
            else:
                reason = f"{type(exc).__name__}: {exc}"
            line = f"{'raw' if RAW_REASON.search(reason) or not reason.strip() else 'failed'}\t{reason}"
        os.write(out, " ".join(line.split("\n"))[:2000].encode("utf-8", "replace") + b"\n")
    finally:
        os._exit(0)


def run_case(case: Case, timeout: float, memory_mb: int) -> Outcome:
    """Build the case here, read it in a forked child; kill the child at the deadline."""
    data = case.build()
    read_end, write_end = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        _child(case, data, memory_mb, write_end)
    os.close(write_end)
    ready, _, _ = select.select([read_end], [], [], timeout)
    line = os.read(read_end, 4096).decode("utf-8", "replace") if ready else ""
    if not ready:
        os.kill(pid, signal.SIGKILL)
    _, status, usage = os.wait4(pid, 0)
    seconds = time.monotonic() - started
    os.close(read_end)
    rss = usage.ru_maxrss / 1024
    if not ready:
        return Outcome(case, "timeout", f"no answer within {timeout:.0f} s", seconds, rss)
    if not line:
        sig = -status if status < 0 else os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        return Outcome(case, "crash", f"died (signal {sig}, status {status})", seconds, rss)
    kind, _, detail = line.rstrip("\n").partition("\t")
    return Outcome(case, kind, detail, seconds, rss)


def reason_kind(detail: str) -> str:
    """A failure reason without its numbers and names, to count alike reasons together."""
    short = re.sub(r"\d[\d,.]*", "N", detail)
    short = re.sub(r"'[^']*'|\"[^\"]*\"|\S+\.(?:xml|xhtml|opf|rels)\b", "…", short)
    return short[:70]


def _parse_range(text: str) -> range:
    start, _, stop = text.partition(":")
    return range(int(start), int(stop)) if stop else range(int(start), int(start) + 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--generators", default="")
    parser.add_argument("--seeds", default="0:20", help="a range start:stop (default 0:20)")
    parser.add_argument("--cases", default="", help="comma-separated case ids fmt/generator/seed (instead of the above)")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds per case before it counts as a hang")
    parser.add_argument("--memory-mb", type=int, default=2048, help="address-space limit of each case's process")
    parser.add_argument("--verbose", action="store_true", help="a line per case")
    args = parser.parse_args()
    for fmt in BY_FORMAT:  # import every reader (and its library) once, before forking
        importlib.import_module(BY_FORMAT[fmt][1])
    if args.cases:
        chosen = [Case.parse(c) for c in args.cases.split(",")]
    else:
        chosen = list(cases(tuple(args.formats.split(",")), _parse_range(args.seeds), tuple(g for g in args.generators.split(",") if g)))
    tables: dict[str, Table] = defaultdict(Table)
    bad: list[Outcome] = []
    started = time.monotonic()
    for case in chosen:
        got = run_case(case, args.timeout, args.memory_mb)
        table = tables[case.fmt]
        table.cases += 1
        table.kinds[got.kind] += 1
        if got.kind in ("failed", "raw"):
            table.reasons[reason_kind(got.detail)] += 1
        table.slowest = max(table.slowest, (got.seconds, case.id))
        table.peak = max(table.peak, (got.rss_mb, case.id))
        if got.kind in ("raw", "timeout", "memory", "crash"):
            bad.append(got)
        if args.verbose or got.kind in ("timeout", "memory", "crash"):
            print(f"  {case.id:42} {got.kind:8} {got.seconds:6.1f} s {got.rss_mb:7.0f} MB  {got.detail[:110]}", flush=True)
    print(f"\n{len(chosen)} cases in {time.monotonic() - started:.0f} s; timeout {args.timeout:.0f} s, address space {args.memory_mb} MB per case\n")
    print(
        f"{'format':7} {'cases':>6} {'read':>6} {'failed':>6} {'raw':>5} {'hang':>5} {'memory':>6} {'crash':>5} "
        f"{'slowest':>8} {'peak RSS':>9}  slowest case / peak case"
    )
    for fmt, t in sorted(tables.items()):
        k = t.kinds
        print(
            f"{fmt:7} {t.cases:6} {k['read']:6} {k['failed']:6} {k['raw']:5} {k['timeout']:5} {k['memory']:6} "
            f"{k['crash']:5} {t.slowest[0]:7.1f}s {t.peak[0]:7.0f}MB  {t.slowest[1]} / {t.peak[1]}"
        )
    print("\nfailure reasons (numbers and names elided):")
    for fmt, t in sorted(tables.items()):
        for reason, n in t.reasons.most_common():
            print(f"  {fmt:6} {n:5}  {reason}")
    if bad:
        print("\ncases that hang, blow memory, crash or fail with a raw exception:")
        for got in bad:
            print(f"  {got.case.id:42} {got.kind:8} {got.seconds:6.1f} s {got.rss_mb:7.0f} MB  {got.detail[:100]}")


if __name__ == "__main__":
    main()
