"""Embedding load beside searches: clients send POST /v1/embeddings requests of 256 texts (1,000 requests in all, 8
clients) while 8 clients search, against a real `lodex serve` (the bundled MiniLM) over a small index. Prints the CPU's
flags, then search p50/p99 with no embedding load and with it, their ratio, and the answers by status (besides 200,
only 429 is allowed: a refused request is sent again after its Retry-After).

    python bench/serving/embed_load.py                      # 1,000 requests of 256 texts
    python bench/serving/embed_load.py --requests 40        # quick mode
    python bench/serving/embed_load.py --max-queued 1024 --slice 16   # the server's api.max_queued_embed_inputs, api.embed_slice_inputs
"""

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.harness import index_folder, machine_line  # noqa: E402
from bench.serving.push_flood import Serve  # noqa: E402

TOPICS = [
    "swept wings and the drag rise at transonic speed",
    "heat transfer through a hypersonic boundary layer",
    "stabilizing fins of sounding rockets",
    "flutter of thin panels in supersonic flow",
    "laminar separation bubbles on airfoils",
    "shock waves ahead of blunt bodies",
    "vortex lift of slender delta wings",
    "buffeting of tails in the wake of a wing",
]
QUERIES = [
    "drag of swept wings",
    "hypersonic heat transfer",
    "rocket fin stability",
    "panel flutter",
    "separation bubble",
    "blunt body shock standoff",
    "delta wing vortex lift",
    "tail buffeting",
    "transonic drag rise",
    "boundary layer transition",
]


@dataclass
class Phase:
    """Search latencies and statuses seen in one phase."""

    ms: list[float] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)

    def p(self, q: float) -> float:
        ordered = sorted(self.ms)
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1) if ordered else float("nan")

    def summary(self) -> dict[str, Any]:
        return {"searches": len(self.ms), "p50_ms": self.p(0.5), "p99_ms": self.p(0.99), "statuses": dict(self.statuses)}


def write_folder(root: Path, documents: int = 24) -> None:
    """A small folder of notes, a few paragraphs each, on the topics the queries ask about."""
    rng = random.Random(7)
    root.mkdir(parents=True)
    for i in range(documents):
        topic = TOPICS[i % len(TOPICS)]
        paragraphs = [f"Note {i}, part {j}: measurements of {topic}; " + ", ".join(rng.sample(TOPICS, 3)) + "." for j in range(6)]
        (root / f"note-{i:02d}.md").write_text(f"# {topic.capitalize()} ({i})\n\n" + "\n\n".join(paragraphs) + "\n")


def texts_of(request: int, inputs: int) -> list[str]:
    """One request's texts: sentences of 5 to 60 words, different in every request."""
    rng = random.Random(request)
    return [f"request {request} text {i}: " + " ".join(rng.choice(TOPICS) for _ in range(rng.randint(1, 8))) for i in range(inputs)]


def searcher(url: str, phase: Phase, stop: threading.Event, count: int | None, seed: int) -> None:
    """Search until `stop` (or `count` searches), timing each."""
    rng = random.Random(seed)
    with httpx.Client(base_url=url, timeout=120) as client:
        done = 0
        while not stop.is_set() and (count is None or done < count):
            started = time.perf_counter()
            try:
                status = str(client.get("/search", params={"q": rng.choice(QUERIES), "k": 5}).status_code)
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            phase.ms.append((time.perf_counter() - started) * 1000)
            phase.statuses[status] += 1
            done += 1


def embedder(url: str, model: str, work: list[int], inputs: int, statuses: Counter[str], lock: threading.Lock) -> None:
    """Send the requests of `work` (shared by the clients), each again after its Retry-After while it answers 429."""
    with httpx.Client(base_url=url, timeout=600) as client:
        while True:
            with lock:
                if not work:
                    return
                request = work.pop()
            while True:
                try:
                    response = client.post("/v1/embeddings", json={"model": model, "input": texts_of(request, inputs)})
                    status = str(response.status_code)
                except httpx.HTTPError as exc:
                    response, status = None, type(exc).__name__
                with lock:
                    statuses[status] += 1
                if response is None or response.status_code != 429:
                    break
                time.sleep(min(float(response.headers.get("retry-after", 1)), 5.0))


def run_searches(url: str, clients: int, count: int | None, stop: threading.Event) -> tuple[Phase, list[threading.Thread]]:
    phase = Phase()
    threads = [threading.Thread(target=searcher, args=(url, phase, stop, count, i)) for i in range(clients)]
    for thread in threads:
        thread.start()
    return phase, threads


def measure(url: str, args: argparse.Namespace) -> dict[str, Any]:
    """The idle phase (searches alone), then the loaded one (searches while the embedding clients run)."""
    model = httpx.get(url + "/v1/models", timeout=30).json()["data"][0]["id"]
    documents = httpx.get(url + "/ready", timeout=30).json()["documents"]
    httpx.post(url + "/v1/embeddings", json={"model": model, "input": texts_of(-1, 8)}, timeout=120).raise_for_status()
    for count in (2, args.baseline_searches):  # a warm-up round (not counted), then the idle phase
        idle, threads = run_searches(url, args.search_clients, count, threading.Event())
        for thread in threads:
            thread.join()
    stop, statuses, lock = threading.Event(), Counter[str](), threading.Lock()
    work = list(range(args.requests))
    loaded, searchers = run_searches(url, args.search_clients, None, stop)
    started = time.monotonic()
    senders = [threading.Thread(target=embedder, args=(url, model, work, args.inputs, statuses, lock)) for _ in range(args.embed_clients)]
    for thread in senders:
        thread.start()
    for thread in senders:
        thread.join()
    seconds = time.monotonic() - started
    stop.set()
    for thread in searchers:
        thread.join()
    unexpected = {s: n for s, n in statuses.items() if s not in ("200", "429")}
    failed_searches = {s: n for s, n in (idle.statuses + loaded.statuses).items() if s != "200"}
    return {
        "model": model,
        "documents": documents,
        "requests": args.requests,
        "inputs_per_request": args.inputs,
        "embed_clients": args.embed_clients,
        "search_clients": args.search_clients,
        "idle": idle.summary(),
        "loaded": loaded.summary(),
        "p50_ratio": round(loaded.p(0.5) / idle.p(0.5), 2),
        "p99_ratio": round(loaded.p(0.99) / idle.p(0.99), 2),
        "embed_statuses": dict(statuses),
        "embedded_texts_per_s": round(args.requests * args.inputs / seconds, 1),
        "loaded_seconds": round(seconds, 1),
        "ok": not unexpected and not failed_searches and statuses["200"] == args.requests,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1000, help="embedding requests in all")
    parser.add_argument("--inputs", type=int, default=256, help="texts per embedding request")
    parser.add_argument("--embed-clients", type=int, default=8)
    parser.add_argument("--search-clients", type=int, default=8)
    parser.add_argument("--baseline-searches", type=int, default=50, help="searches per client with no embedding load")
    parser.add_argument("--max-queued", type=int, help="the server's api.max_queued_embed_inputs (default: its own)")
    parser.add_argument("--slice", type=int, help="the server's api.embed_slice_inputs (default: its own)")
    parser.add_argument("--work-dir", type=Path, help="where the folder, index and server log go (default: a new temporary dir)")
    args = parser.parse_args(argv)
    print(machine_line())
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="lodex-embed-load-"))
    root, data = work / "docs", work / "data"
    write_folder(root)
    env = {"LODEX_API__MAX_BODY_KB": "8192"}
    env |= {"LODEX_API__MAX_QUEUED_EMBED_INPUTS": str(args.max_queued)} if args.max_queued else {}
    env |= {"LODEX_API__EMBED_SLICE_INPUTS": str(args.slice)} if args.slice else {}
    index_folder(root, {**os.environ, "HF_HUB_OFFLINE": "1", "LODEX_DATA_DIR": str(data), **env})
    server = Serve(root, data, env)
    try:
        server.wait_ready()
        report = measure(server.url, args)
    finally:
        server.terminate()
    print(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    sys.exit(0 if main()["ok"] else 1)
