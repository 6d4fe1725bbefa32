"""Freshness: time from a file write until `search` (in another process) returns the new content.

usage: python bench/serving/freshness.py [--edits 30] [--files 6] [--tokens 5000]
Starts `lodex watch` on a folder of long documents (~5,000 tokens each, built from Cranfield
abstracts), then edits one paragraph of one file at a time (new text from MED abstracts) and polls a
searcher in this process until the edited file comes first with a passage holding the new text.
With --rewrite, every paragraph changes, so the whole file is encoded again. Prints p50/p95 of write→searchable, next to the watcher's quiet period and the time the encoder takes
to encode one whole file in this run (the cost a full re-encode would add).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.harness import EVALDATA as EVAL  # noqa: E402
from bench.harness import LODEX_CLI
from lodex.api.settings import Settings  # noqa: E402
from lodex.encoders.encoder import Encoder  # noqa: E402
from lodex.search.collections import load_collection  # noqa: E402
from lodex.store.errors import LodexError  # noqa: E402


def _shares_words(passage: str, new_words: str, run: int = 8) -> bool:
    """True when the passage holds a run of `run` consecutive words of the new paragraph."""
    words = passage.split()
    return any(" ".join(words[j : j + run]) in new_words for j in range(max(len(words) - run + 1, 0)))


def _documents(settings: Settings, encoder: Encoder) -> int:
    """Documents in the index another process writes, read as `lodex search` reads it (0 while there is none yet)."""
    from lodex.api.factory import open_app

    try:
        with open_app(settings, "read", encoder=encoder) as index:
            return index.documents(limit=1).total
    except LodexError:
        return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--edits", type=int, default=30)
    parser.add_argument("--files", type=int, default=6)
    parser.add_argument("--tokens", type=int, default=5000, help="approximate tokens per file")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--rewrite", action="store_true", help="replace every paragraph of the file, not one")
    args = parser.parse_args()

    from lodex.api.factory import build_encoder, open_app

    encoder = build_encoder(Settings())
    cran = [t for _, t in load_collection(EVAL / "cranfield").docs.values() if t.strip()]
    med = [t for _, t in load_collection(EVAL / "med").docs.values() if t.strip()]
    with tempfile.TemporaryDirectory(prefix="lodex-fresh-") as tmp:
        folder, data = Path(tmp) / "docs", Path(tmp) / "data"
        folder.mkdir()
        files: list[list[str]] = []
        cursor = 0
        for f in range(args.files):
            paragraphs, tokens = [], 0
            while tokens < args.tokens:
                paragraphs.append(cran[cursor])
                tokens += len(encoder.token_spans([cran[cursor]])[0])
                cursor += 1
            files.append(paragraphs)
            (folder / f"report-{f}.txt").write_text("\n\n".join(paragraphs))
        started = time.perf_counter()
        encoder.embed(files[0])
        full_encode_s = time.perf_counter() - started
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "LODEX_DATA_DIR": str(data)}
        log = open(Path(tmp) / "watch.log", "w+")  # noqa: SIM115
        watcher = subprocess.Popen([*LODEX_CLI, "watch", str(folder)], env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log, text=True)
        try:
            deadline = time.monotonic() + 600
            reader = Settings(index={"data_dir": str(data)}, search={"passages": 1})
            while not (data / "origin.json").exists() or _documents(reader, encoder) < args.files:
                if time.monotonic() > deadline or watcher.poll() is not None:
                    raise SystemExit(f"watch did not index the folder: {Path(log.name).read_text()[-2000:]}")
                time.sleep(0.5)
            with open_app(reader, "read", encoder=encoder) as index:  # its searcher reads each version committed
                time.sleep(2)
                latencies = []
                for i in range(args.edits):
                    f = i % args.files
                    new = med[i]
                    new_words = " ".join(new.split())
                    paragraphs = list(files[f])
                    if args.rewrite:  # every paragraph changes, so every chunk must be encoded again
                        paragraphs = [f"{p.rstrip(' .')} (revision {i})." for p in paragraphs]
                    paragraphs[len(paragraphs) // 2 + (i // args.files) % 3] = new
                    (folder / f"report-{f}.txt").write_text("\n\n".join(paragraphs))
                    written = time.perf_counter()
                    while True:
                        hits = index.searcher.search(new, k=1).results  # (an abstract may be longer than api.max_query_chars)
                        if hits and hits[0].path == f"report-{f}.txt" and _shares_words(hits[0].passages[0].text, new_words):
                            break
                        if time.perf_counter() - written > args.timeout:
                            top = [(h.path, h.passages[0].text[:80]) for h in hits]
                            raise SystemExit(
                                f"edit {i} not searchable after {args.timeout} s; top: {top}; watch log:\n{Path(log.name).read_text()[-3000:]}"
                            )
                        time.sleep(0.05)
                    latencies.append(time.perf_counter() - written)
                    files[f] = paragraphs
                    print(f"edit {i + 1:2d}: report-{f}.txt searchable after {latencies[-1]:.2f} s", file=sys.stderr)
                    time.sleep(0.3)
        finally:
            watcher.terminate()
            watcher.wait(timeout=60)
    latencies.sort()
    p95 = latencies[min(len(latencies) - 1, int(round(0.95 * (len(latencies) - 1))))]
    print(
        json.dumps(
            {
                "edits": len(latencies),
                "p50_s": round(statistics.median(latencies), 3),
                "p95_s": round(p95, 3),
                "min_s": round(latencies[0], 3),
                "max_s": round(latencies[-1], 3),
                "quiet_s": 1.0,
                "mode": "rewrite" if args.rewrite else "paragraph",
                "full_file_encode_s": round(full_encode_s, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
