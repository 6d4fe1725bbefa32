"""Peak memory of `lodex index` on one very large text file plus many small files.

usage: python bench/indexing/memory.py [--big-mb 200] [--small 10000] [--precision exact|fast] [--model-every N] [--workdir DIR]
Builds a folder holding one BIG-MB plain-text file (abstracts of ../shared/evaldata, shuffled and
repeated) and SMALL small files (one abstract each), runs `lodex index` on it in a child process, and
prints the child's peak RSS (from wait4), the time, and the run summary. The big file is streamed:
read, decoded, chunked, encoded and committed in parts (index.stream_above_mb, index.flush_tokens).
--model-every N runs the real forward pass on one encoder batch in N and replaces it by a cheap hash of
each chunk on the others: the model, its runtime and their working memory are all there (every batch
has the full encoder.batch_tokens shape), and the whole pipeline runs at full scale in minutes instead
of hours. N = 1 (the default) is the plain run; 0 never runs the model (it is still loaded).
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.harness import EVALDATA, LODEX_CLI  # noqa: E402


def abstracts() -> list[str]:
    """Every non-empty abstract of the three evaluation collections."""
    texts = []
    for name in ("cranfield", "cisi", "med"):
        with (EVALDATA / name / "corpus.jsonl").open(encoding="utf-8") as fh:
            texts += [t for line in fh if line.strip() and (t := json.loads(line)["text"].strip())]
    return texts


def build_folder(folder: Path, big_mb: float, small: int, seed: int = 0) -> None:
    """One big .txt of about big_mb MiB and `small` one-abstract .txt files under folder/small/."""
    rng = random.Random(seed)
    texts = abstracts()
    folder.mkdir(parents=True, exist_ok=True)
    target = int(big_mb * 1024 * 1024)
    with (folder / "big.txt").open("w", encoding="utf-8") as fh:
        written, section = 0, 0
        while written < target:
            rng.shuffle(texts)
            for text in texts:
                line = f"Section {section}. {text}\n\n"
                fh.write(line)
                written += len(line.encode())
                section += 1
                if written >= target:
                    break
    (folder / "small").mkdir(exist_ok=True)
    for i in range(small):
        (folder / "small" / f"note-{i:05d}.txt").write_text(texts[i % len(texts)] + "\n", encoding="utf-8")


def sampled_encoder(cfg):  # noqa: ANN001, ANN201 - an encoder.backend plug-in (module:callable)
    """The real transformers encoder (model loaded, real tokenizer) that runs the model on one batch in
    $LODEX_BENCH_MODEL_EVERY and returns hashes of the text for the others."""
    import hashlib
    import itertools

    import numpy as np

    from lodex.api.encoder_backends import ENCODER_BACKENDS

    encoder = ENCODER_BACKENDS["transformers"](cfg)
    every = int(os.environ.get("LODEX_BENCH_MODEL_EVERY", "0"))
    counter, real = itertools.count(), encoder.embed_batch

    def embed_batch(texts: list[str]) -> np.ndarray:
        if every and next(counter) % every == 0:
            return real(texts)
        seeds = [int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "little") for t in texts]
        return np.stack([np.random.default_rng(s).standard_normal(encoder.dim).astype(np.float32) for s in seeds])

    encoder.embed_batch = embed_batch
    return encoder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--big-mb", type=float, default=200)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--precision", choices=["exact", "fast"], default="fast")
    parser.add_argument("--model-every", type=int, default=1, help="run the model on one encoder batch in N, hash the rest (0: never)")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the folder and index here (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lodex-memory-") as tmp:
        work = args.workdir or Path(tmp)
        folder, data = work / "docs", work / "data"
        if not (folder / "big.txt").exists():
            build_folder(folder, args.big_mb, args.small)
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "LODEX_ENCODER__PRECISION": args.precision,
            "LODEX_ENCODER__CACHE_DIR": str(work / "model-cache"),
            "PYTHONPATH": str(ROOT),
        }
        if args.model_every != 1:
            env["LODEX_ENCODER__BACKEND"] = "bench.indexing.memory:sampled_encoder"
            env["LODEX_BENCH_MODEL_EVERY"] = str(args.model_every)
        log = tempfile.TemporaryFile("w+")  # noqa: SIM115 - the child's stderr, shown if it fails
        started = time.monotonic()
        proc = subprocess.Popen(
            [*LODEX_CLI, "index", str(folder), "--json", "--data-dir", str(data)], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log, text=True
        )
        out = proc.stdout.read() if proc.stdout else ""
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.monotonic() - started
        if os.waitstatus_to_exitcode(status) != 0:
            log.seek(0)
            tail = log.read().replace("\r", "\n").strip().splitlines()[-3:]
            raise SystemExit(f"lodex index failed (exit {os.waitstatus_to_exitcode(status)}): " + " / ".join(tail))
        summary = json.loads(out)
    size = (args.big_mb, args.small)
    print(
        f"one {size[0]:.0f} MiB text file + {size[1]:,} small files, encoder precision {args.precision}"
        + (f" (model run on one encoder batch in {args.model_every}, the others hashed)" if args.model_every > 1 else "")
        + (" (forward pass replaced by a hash)" if args.model_every == 0 else "")
    )
    print(
        f"lodex index: {seconds:,.0f} s, {summary['added']:,} files, {summary['chunks']:,} chunks, "
        f"{summary['tokens']:,} tokens ({summary['tokens'] / max(summary['seconds'], 1e-9):,.0f} tokens/s), "
        f"{summary['failed']} failed"
    )
    print(f"peak RSS: {usage.ru_maxrss / 1024:,.0f} MiB")


if __name__ == "__main__":
    main()
