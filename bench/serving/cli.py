"""Cold `lodex search` from a shell: wall time of a fresh process, p50 of N runs, three ways.

usage: python bench/serving/cli.py [--runs N] [--docs DIR]
  before      the full encoder loaded in the process (PyTorch + transformers), as `lodex search` did before the recipe
  no server   `lodex search --local`: the query encoder rebuilt from its recipe (ONNX Runtime + tokenizers, no PyTorch)
  server      `lodex search` while a `lodex serve` of the same data dir runs: the server answers over loopback
Indexes DIR (default: two of samples/) into a temporary data dir first; the CPU's line is printed with the figures.
"""

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.harness import LODEX_CLI, machine_line  # noqa: E402

QUERY = "pressure distribution on a swept wing in a wind tunnel"
_BEFORE = """
import os, sys
from lodex.api.settings import load_settings
from lodex.api.factory import build_encoder, open_app
from lodex.api.cli.render import print_search
from rich.console import Console
settings = load_settings(None, {"index.data_dir": os.environ["LODEX_DATA_DIR"]})
with open_app(settings, "read", encoder=build_encoder(settings)) as index:
    print_search(Console(), index.search(sys.argv[1]))
"""


def _timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[2:4])} failed: {done.stderr.strip().splitlines()[-1:]}")
    return time.perf_counter() - started


def _p50(command: list[str], env: dict[str, str], runs: int) -> float:
    return statistics.median(_timed(command, env) for _ in range(runs))


def main() -> None:

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--docs", type=Path, default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lodex-cli-bench-"))
    docs = args.docs
    if docs is None:
        docs = work / "docs"
        docs.mkdir()
        for name in sorted(p.name for p in (ROOT / "samples").iterdir() if p.suffix in (".md", ".txt"))[:2]:
            shutil.copy(ROOT / "samples" / name, docs / name)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LODEX_DATA_DIR": str(work / "data"), "LODEX_ENCODER__CACHE_DIR": str(work / "cache")}
    lodex = LODEX_CLI
    _timed([*lodex, "index", str(docs)], env)
    _timed([*lodex, "search", QUERY, "--local"], env)  # exports the ONNX query model once, leaving its recipe
    before = _p50([sys.executable, "-c", _BEFORE, QUERY], env, args.runs)
    alone = _p50([*lodex, "search", QUERY, "--local"], env, args.runs)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [*lodex, "serve", str(docs), "--port", str(port), "--no-watch"], env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=2)
                break
            except OSError:
                time.sleep(0.3)
        served = _p50([*lodex, "search", QUERY], env, args.runs)
    finally:
        server.terminate()
        server.wait(timeout=60)
        shutil.rmtree(work, ignore_errors=True)
    print(machine_line())
    print(f"cold `lodex search`, p50 of {args.runs} fresh processes (wall):")
    print(f"  before (PyTorch encoder loaded)        {before:6.2f} s")
    print(f"  no server (recipe: ONNX + tokenizers)  {alone:6.2f} s   {before / alone:4.1f}x faster")
    print(f"  a lodex serve running                  {served:6.2f} s   {before / served:4.1f}x faster")


if __name__ == "__main__":
    main()
