"""The servers bench/serving/load.py --peer runs in turn: how to start each, ask it a query, and tell that it is ready."""

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.harness import LODEX_CLI

ROOT = Path(__file__).resolve().parents[2]


def lodex_ready(body: Any) -> bool:
    """A lodex (or bench/peers/peer_server.py) /ready answer with no indexing to do."""
    return isinstance(body, dict) and body.get("indexing") is False


def has_results(body: Any) -> bool:
    return isinstance(body, dict) and "results" in body


def is_list(body: Any) -> bool:
    return isinstance(body, list)


@dataclass(frozen=True)
class Peer:
    """A server under test: `cmd` (its port appended by `command`), the search path ({q}: the URL-quoted query),
    the path polled at start until `ready` says so, and the check of a search's JSON answer."""

    name: str
    cmd: list[str]
    env: dict[str, str] = field(default_factory=dict)
    search: str = "/search?k=10&q={q}"
    ready_path: str = "/ready"
    ready: Callable[[Any], bool] = lodex_ready
    answered: Callable[[Any], bool] = has_results
    port_flag: bool = True  # the port as `--port N` (lodex) or as a last argument

    def command(self, port: int) -> list[str]:
        return [*self.cmd, "--port", str(port)] if self.port_flag else [*self.cmd, str(port)]


LODEX = Peer("lodex serve", [])  # bench/serving/load.py's own runs: the defaults above

FAISS = "fastapi + sentence-transformers + faiss flat (dense)"
TXTAI = "txtai api, hybrid (dense + bm25)"
HYBRID = "lodex serve, hybrid (default)"
DENSE = "lodex serve, dense"


def build_txtai(data: Path, work: Path, env: dict[str, str]) -> dict:
    """Build txtai's index of the chunks in `data` under `work`/txtai (reused when the chunks have not changed)."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "peers" / "txtai_peer.py"), "build", str(data), str(work / "txtai")],
        env=env,
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def peers(folder: Path, data: Path, work: Path) -> list[Peer]:
    """The servers to compare, in the order run: two peers, then lodex hybrid and dense on the same index."""
    python, bench = sys.executable, ROOT / "bench" / "peers"
    return [
        Peer(FAISS, [python, str(bench / "peer_server.py"), str(data)], port_flag=False),
        Peer(
            TXTAI,
            [python, str(bench / "txtai_peer.py"), "serve", str(work / "txtai")],
            port_flag=False,
            search="/search?limit=10&query={q}",
            ready_path="/count",
            ready=lambda body: isinstance(body, int) and body > 0,
            answered=is_list,
        ),
        Peer(HYBRID, [*LODEX_CLI, "serve", str(folder)]),
        Peer(DENSE, [*LODEX_CLI, "serve", str(folder)], {"LODEX_SEARCH__MODE": "dense"}),
    ]
