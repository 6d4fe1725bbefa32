"""A push flood against a real `lodex serve`: parallel clients push documents as fast as they can while /health and
/search are timed; then SIGTERM, a restart, and a check that every push answered 202 is indexed.

    python bench/serving/push_flood.py --pushes 1000 --clients 8 --max-queued 200
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench.harness import LODEX_CLI, free_port, machine_line  # noqa: E402


class Serve:
    """A `lodex serve --no-watch` subprocess on a free loopback port."""

    def __init__(self, root: Path, data: Path, env: dict[str, str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = data.parent / f"serve-{self.port}.log"
        full = {**os.environ, "HF_HUB_OFFLINE": "1", "LODEX_DATA_DIR": str(data), **env}
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(
                [*LODEX_CLI, "serve", str(root), "--port", str(self.port), "--no-watch"], env=full, cwd=REPO, stdout=out, stderr=subprocess.STDOUT
            )

    def wait_ready(self, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"serve not ready: {self.log.read_text()[-2000:]}")

    def terminate(self, timeout: float = 120) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)


@dataclass
class Flood:
    """What a flood saw."""

    accepted: list[str] = field(default_factory=list)  # document ids answered 202
    refused: int = 0  # answered 429/503
    refused_without_retry_after: int = 0
    other: dict[int, int] = field(default_factory=dict)  # any other status → count
    health_ms: list[float] = field(default_factory=list)
    health_failures: int = 0
    search_ms: list[float] = field(default_factory=list)
    search_failures: int = 0
    spool_max: int = 0
    seconds: float = 0.0

    def p(self, values: list[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _pusher(url: str, names: list[str], text: str, flood: Flood, lock: threading.Lock, retry: bool) -> None:
    with httpx.Client(base_url=url, timeout=120) as client:
        todo = list(names)
        while todo:
            name = todo.pop(0)
            response = client.post("/documents", json={"name": name, "text": f"{name}. {text}"})
            with lock:
                if response.status_code == 202:
                    flood.accepted.append(response.json()["id"])
                elif response.status_code in (429, 503):
                    flood.refused += 1
                    flood.refused_without_retry_after += "retry-after" not in response.headers
                else:
                    flood.other[response.status_code] = flood.other.get(response.status_code, 0) + 1
            if retry and response.status_code in (429, 503):  # a polite client: again after Retry-After
                todo.insert(0, name)
                time.sleep(min(float(response.headers.get("retry-after", 1)), 5.0))


def _watcher(url: str, spool: Path, flood: Flood, stop: threading.Event) -> None:
    with httpx.Client(base_url=url, timeout=30) as client:
        last_search = 0.0
        while not stop.is_set():
            started = time.perf_counter()
            try:
                ok = client.get("/health").status_code == 200
            except httpx.HTTPError:
                ok = False
            flood.health_ms.append((time.perf_counter() - started) * 1000)
            flood.health_failures += not ok
            if started - last_search > 0.25:
                last_search = started
                t0 = time.perf_counter()
                try:
                    ok = client.get("/search", params={"q": "drag of swept wings", "k": 3}).status_code == 200
                except httpx.HTTPError:
                    ok = False
                flood.search_ms.append((time.perf_counter() - t0) * 1000)
                flood.search_failures += not ok
            flood.spool_max = max(flood.spool_max, sum(1 for _ in spool.glob("*.json")))
            stop.wait(0.02)


def flood(url: str, spool: Path, pushes: int, clients: int, text_chars: int, retry: bool = False) -> Flood:
    """Push `pushes` documents from `clients` threads at once while /health (every 20 ms) and /search are timed; with
    `retry`, a refused push is sent again after its Retry-After (until all are accepted)."""
    result, lock, stop = Flood(), threading.Lock(), threading.Event()
    text = ("Lift, drag and heat transfer of swept wings at transonic speed. " * (text_chars // 64 + 1))[:text_chars]
    names = [f"flood-{i:05d}" for i in range(pushes)]
    watcher = threading.Thread(target=_watcher, args=(url, spool, result, stop))
    watcher.start()
    started = time.monotonic()
    threads = [threading.Thread(target=_pusher, args=(url, names[c::clients], text, result, lock, retry)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    result.seconds = time.monotonic() - started
    stop.set()
    watcher.join()
    return result


def all_indexed(url: str, ids: list[str], timeout: float = 600) -> list[str]:
    """Wait until every id answers 200 (indexed); the ids still missing at the deadline."""
    deadline, left = time.monotonic() + timeout, list(ids)
    with httpx.Client(base_url=url, timeout=30) as client:
        while left and time.monotonic() < deadline:
            left = [i for i in left if client.get(f"/documents/{i}").status_code != 200]
            if left:
                time.sleep(0.5)
    return left


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pushes", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--max-queued", type=int, default=200, help="api.max_queued_pushes of the server")
    parser.add_argument("--text-chars", type=int, default=2000)
    parser.add_argument("--retry", action="store_true", help="clients send a refused push again after its Retry-After")
    args = parser.parse_args()

    print(machine_line())
    work = Path(tempfile.mkdtemp(prefix="lodex-flood-"))
    root, data = work / "docs", work / "data"
    root.mkdir()
    (root / "wings.md").write_text("# Wings\n\nSwept wings delay the drag rise at transonic Mach numbers.\n")
    env = {"LODEX_API__MAX_QUEUED_PUSHES": str(args.max_queued)}
    server = Serve(root, data, env)
    server.wait_ready()
    result = flood(server.url, data / "pushes", args.pushes, args.clients, args.text_chars, args.retry)
    waiting = sum(1 for _ in (data / "pushes").glob("*.json"))
    code = server.terminate()
    print(
        json.dumps(
            {
                "pushes": args.pushes,
                "retry": args.retry,
                "clients": args.clients,
                "max_queued_pushes": args.max_queued,
                "seconds": round(result.seconds, 1),
                "accepted": len(result.accepted),
                "refused_429_503": result.refused,
                "refused_without_retry_after": result.refused_without_retry_after,
                "other_statuses": result.other,
                "health_requests": len(result.health_ms),
                "health_failures": result.health_failures,
                "health_p50_ms": round(result.p(result.health_ms, 0.5), 1),
                "health_p99_ms": round(result.p(result.health_ms, 0.99), 1),
                "health_max_ms": round(max(result.health_ms), 1),
                "searches": len(result.search_ms),
                "search_failures": result.search_failures,
                "search_p50_ms": round(result.p(result.search_ms, 0.5), 1),
                "search_p99_ms": round(result.p(result.search_ms, 0.99), 1),
                "spool_max_files": result.spool_max,
                "spool_at_sigterm": waiting,
                "exit_code": code,
            },
            indent=1,
        )
    )
    again = Serve(root, data, env)
    again.wait_ready()
    missing = all_indexed(again.url, result.accepted)
    again.terminate()
    print(json.dumps({"after_restart_missing": len(missing), "accepted": len(result.accepted)}))


if __name__ == "__main__":
    main()
