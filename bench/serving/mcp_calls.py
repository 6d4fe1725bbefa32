"""`lodex mcp` under a long session: N search tool calls over one stdio session, the server process's RSS after the
first 100 and after the last, and the p50 latency of a call against GET /search of a `lodex serve` of the same index.

usage: python bench/serving/mcp_calls.py [--calls N] [--docs DIR]
Indexes DIR (default: samples/) with the configured model (the bundled one) into a temporary data dir first; the
CPU's line is printed with the figures.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.harness import LODEX_CLI, machine_line  # noqa: E402

QUERIES = [
    "pressure distribution on a swept wing",
    "heat transfer in a boundary layer",
    "buckling of thin shells",
    "shock waves",
    "laminar flow transition",
    "vibration of plates",
    "supersonic inlet",
    "turbulent skin friction",
    "wind tunnel tests",
    "heated cylinder in cross flow",
    "slender body theory",
    "boundary layer separation",
    "flutter of wings",
    "hypersonic flow",
    "viscous drag",
    "jet noise",
    "stagnation point heating",
    "compressible flow",
    "thermal stress",
    "aerodynamic loads",
]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def children() -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        found |= {int(p) for p in (task / "children").read_text().split()}
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--docs", type=Path, default=ROOT / "samples")
    args = parser.parse_args()
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from typer.testing import CliRunner

    from lodex.api.cli import app
    from tests.test_serve import Server

    data = Path(tempfile.mkdtemp(prefix="lodex-mcp-bench-")) / "data"
    assert CliRunner().invoke(app, ["index", str(args.docs), "--data-dir", str(data)]).exit_code == 0
    server = Server(args.docs, data, "--no-watch")
    server.wait_ready()
    params = StdioServerParameters(
        command=LODEX_CLI[0],
        args=[*LODEX_CLI[1:], "mcp", "--data-dir", str(data)],
        cwd=str(ROOT),
        env={"HF_HUB_OFFLINE": "1", "HOME": os.environ.get("HOME", "/tmp")},
    )
    before = children()
    figures: dict[str, float] = {}

    async def session() -> list[float]:
        times = []
        async with stdio_client(params) as (read, write), ClientSession(read, write) as mcp:
            await mcp.initialize()
            pid = max(children() - before)
            for i in range(args.calls):
                started = time.perf_counter()
                result = await mcp.call_tool("search", {"query": QUERIES[i % len(QUERIES)], "k": 10})
                times.append(time.perf_counter() - started)
                assert not result.is_error
                if i == 99:
                    figures["rss_after_100_mib"] = rss_kib(pid) / 1024
            figures["rss_after_all_mib"] = rss_kib(pid) / 1024
        return times

    try:
        mcp_times = anyio.run(session)
        api_times = []
        with httpx.Client(base_url=server.url) as api:
            for i in range(args.calls):
                started = time.perf_counter()
                assert api.get("/search", params={"q": QUERIES[i % len(QUERIES)], "k": 10}).status_code == 200
                api_times.append(time.perf_counter() - started)
    finally:
        server.stop()
    print(machine_line())
    print(
        f"{args.calls} search calls over one stdio session: p50 {statistics.median(mcp_times) * 1000:.1f} ms, "
        f"p90 {statistics.quantiles(mcp_times, n=10)[-1] * 1000:.1f} ms"
    )
    print(
        f"GET /search, same queries, keep-alive: p50 {statistics.median(api_times) * 1000:.1f} ms, "
        f"p90 {statistics.quantiles(api_times, n=10)[-1] * 1000:.1f} ms"
    )
    print(f"lodex mcp RSS: {figures['rss_after_100_mib']:.1f} MiB after 100 calls, {figures['rss_after_all_mib']:.1f} MiB after {args.calls}")


if __name__ == "__main__":
    main()
