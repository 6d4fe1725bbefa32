"""Encoding speed report: sentence-transformers vs lodex exact and fast modes vs end-to-end `lodex index`.

usage: python bench/indexing/encode.py [DATASET_DIR] [--docs N] [--bundle N] [--rounds R] [--pairs P]
Writes N abstracts of a BEIR collection as long documents, runs `lodex index` on them in a fresh
process (its tokens/s covers scan, read, chunk, encode and commit) in exact and fast mode, each with late chunking (the
default) and with plain chunking (LODEX_CHUNKING__LATE=false); then encodes exactly the chunks it stored with
sentence-transformers (batch 32) and with lodex's encoder in exact and fast mode, and late chunking's windows of the same
files with each mode's encoder, each in its own process. Prints the CPU's flags and fast mode's path choice, tokens/s,
the ratio to sentence-transformers, each process's peak RSS, the share of the machine's limit (the model's FLOPs per
token at the measured chunk lengths times tokens/s, over a large fp32 matrix multiply's GFLOP/s measured in the same
run), and each mode's end to end over its encoder alone on the same work.
Rounds alternate the order, and the best round of each is kept, since these machines are noisy.
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

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.harness import EVALDATA, LODEX_CLI, machine_line  # noqa: E402

DEFAULT_DATA = EVALDATA / "cranfield"


def _chunk_texts(data_dir: Path) -> tuple[list[str], int]:
    import lancedb

    table = lancedb.connect(str(data_dir / "lance")).open_table("chunks")
    rows = table.search().select(["text", "token_count"]).limit(None).to_arrow()
    return rows["text"].to_pylist(), int(sum(rows["token_count"].to_pylist()))


def worker(kind: str, data_dir: Path, folder: Path | None = None, pairs: int = 3) -> None:
    """Encode in this process and print {seconds, tokens} as JSON: the chunks stored in `data_dir` ("st", "exact", "fast"),
    or ("exact-windows", "fast-windows") the late-chunking windows lodex plans for the files of `folder`."""
    if kind.endswith("windows"):
        return _windows_worker(kind.split("-")[0], data_dir, folder)
    if kind.startswith("pair-"):
        assert folder is not None
        return pair_worker(kind.removeprefix("pair-"), data_dir, folder, pairs)
    texts, tokens = _chunk_texts(data_dir)
    if kind == "st":
        from sentence_transformers import SentenceTransformer

        from lodex.encoders.transformers_encoder import bundled_model_dir

        model = SentenceTransformer(str(bundled_model_dir()), device="cpu")
        model.encode(texts[:64], batch_size=32)  # warm-up
        started = time.perf_counter()
        model.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
    else:
        from lodex.encoders.settings import EncoderSettings
        from lodex.encoders.transformers_encoder import TransformersEncoder

        encoder = TransformersEncoder(EncoderSettings(precision=kind, cache_dir=str(data_dir.parent / "model-cache")))
        encoder.embed(texts[:64])
        started = time.perf_counter()
        encoder.embed(texts)
    print(json.dumps({"seconds": time.perf_counter() - started, "tokens": tokens}))


def _windows_worker(precision: str, scratch: Path, folder: Path | None) -> None:
    """Plan the files' windows as `lodex index` does (read, chunk, plan: not timed), then time the encoder alone on
    all of them (late chunking's encoder work, what `lodex index` with late chunking is compared with)."""
    assert folder is not None
    with _write_side(precision, True, scratch, folder) as side:
        windows, leads, tokens = _windows(side, folder)
        side.encoder.embed_windows(windows[:16], leads[:16])
        started = time.perf_counter()
        side.encoder.embed_windows(windows, leads)
    print(json.dumps({"seconds": time.perf_counter() - started, "tokens": tokens}))


def _write_side(precision: str, late: bool, scratch: Path, folder: Path):  # noqa: ANN202 - an Application (write role)
    """The write side `lodex index` opens, for this mode, on a scratch data dir."""
    from lodex.api.factory import open_app
    from lodex.api.settings import load_settings

    settings = load_settings(
        overrides={
            "encoder.precision": precision,
            "encoder.cache_dir": str(scratch.parent / "model-cache"),
            "index.data_dir": str(scratch),
            "chunking.late": late,
        }
    )
    return open_app(settings, "write", folder)


def _windows(side, folder: Path) -> tuple[list, list[str], int]:  # noqa: ANN001 - an Application (write role)
    """The late-chunking windows (and leads) `lodex index` plans for the files of `folder`, and their chunk tokens."""
    from lodex.indexer.encoding_jobs import TitleLead, encoder_jobs
    from lodex.indexer.prepared import Prepared
    from lodex.indexer.scanner import scan

    indexer = side.indexer
    lead = TitleLead(indexer.title_prefix)  # what the indexer puts before each chunk, as it builds it
    items = [p for p in indexer.preparer().prepared(scan(folder, indexer.rules).files, {}, {}) if isinstance(p, Prepared)]
    jobs = [job for job in encoder_jobs(items, side.encoder, lead) if job.window is not None]
    return [job.window for job in jobs], [lead(job.prepared.title) for job in jobs], int(sum(sum(p.rows["token_count"]) for p in items))


def pair_worker(mode: str, scratch: Path, folder: Path, repeats: int = 3) -> None:
    """End to end over encoder alone in one process, alternating `repeats` times (these machines drift by 10% from one
    minute to the next; a pair measured back to back shares the drift): the run `lodex index --rebuild` makes (scan,
    read, chunk, encode, commit, optimize, save) with the model already loaded, against the encoder alone on the same
    work. Prints the ratios."""
    from lodex.api.factory import open_app

    precision, late = mode.split("-")[0], not mode.endswith("plain")
    with _write_side(precision, late, scratch, folder) as side:
        settings, encoder = side.settings, side.encoder
        if late:
            windows, leads, _ = _windows(side, folder)
            alone = lambda: encoder.embed_windows(windows, leads)  # noqa: E731
        else:
            side.indexer.run(folder)
            texts = _chunk_texts(scratch)[0]
            alone = lambda: encoder.embed(texts)  # noqa: E731
    alone()  # warm-up
    ratios = []
    for _ in range(repeats):
        started = time.perf_counter()
        alone()
        alone_s = time.perf_counter() - started
        with open_app(settings, "write", folder, rebuild=True, encoder=encoder) as side:
            summary = side.indexer.run(folder)
        ratios.append(alone_s / summary.seconds)
    print(json.dumps({"ratios": ratios}))


def _chunk_lengths(data_dir: Path) -> list[int]:
    """Model input length of every stored chunk (its tokens plus [CLS] and [SEP])."""
    import lancedb

    table = lancedb.connect(str(data_dir / "lance")).open_table("chunks")
    return [n + 2 for n in table.search().select(["token_count"]).limit(None).to_arrow()["token_count"].to_pylist()]


def flops_per_token(lengths: list[int], layers: int = 6, width: int = 384, ffn: int = 1536) -> float:
    """Mean FLOPs per input token of a BERT encoder (all-MiniLM-L6-v2 by default) over sequences of these
    lengths: projections and feed-forward (2 * (4 d^2 + 2 d f) per token per layer) plus attention scores
    and mixing (2 * 2 L d per token per layer)."""
    dense = 2 * (4 * width * width + 2 * width * ffn)
    total = sum(layers * (dense * n + 4 * n * n * width) for n in lengths)
    return total / max(sum(lengths), 1)


def matmul_gflops(size: int = 4096, repeats: int = 5) -> float:
    """Best fp32 GFLOP/s of a size x size matrix multiply with torch on all physical cores."""
    import torch

    from lodex.encoders.cpu import physical_cores

    torch.set_num_threads(physical_cores())
    a, b = torch.randn(size, size), torch.randn(size, size)
    torch.mm(a, b)
    best = 0.0
    for _ in range(repeats):
        started = time.perf_counter()
        torch.mm(a, b)
        best = max(best, 2 * size**3 / (time.perf_counter() - started) / 1e9)
    return best


def _timed_child(cmd: list[str], env: dict[str, str]) -> tuple[str, float]:
    """Run a child; return its stdout and its own peak RSS (MiB), via wait4."""
    with tempfile.TemporaryFile(mode="w+") as errors:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=errors, text=True)
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            errors.seek(0)
            raise SystemExit(f"{' '.join(cmd[:5])} failed:\n{errors.read()[-2000:]}")
    return out, usage.ru_maxrss / 1024


# (name, what it measures, how it runs): index runs are `lodex index` in a fresh process (precision, late chunking);
# the others are encoder workers. Ratios: each mode's end to end over its own encoder doing the same work.
INDEX_RUNS = {
    "index-exact": ("exact", "true"),
    "index-exact-plain": ("exact", "false"),
    "index-fast": ("fast", "true"),
    "index-fast-plain": ("fast", "false"),
}
MODES = ("exact-plain", "fast-plain", "exact-late", "fast-late")
LABELS = {
    "st": "sentence-transformers encode() (baseline)",
    "exact": "lodex encoder, exact mode (fp32)",
    "fast": "lodex encoder, fast mode (int8 ONNX)",
    "exact-windows": "  exact encoder on late chunking's windows",
    "fast-windows": "  fast encoder on late chunking's windows",
    "index-exact": "lodex index, exact, late chunking",
    "index-exact-plain": "lodex index, exact, plain chunking",
    "index-fast": "lodex index, fast, late chunking",
    "index-fast-plain": "lodex index, fast, plain chunking",
}
# end to end / its encoder: (index run, encoder run)
PAIRS = (("index-exact-plain", "exact"), ("index-fast-plain", "fast"), ("index-exact", "exact-windows"), ("index-fast", "fast-windows"))


def _round(folder: Path, tmp: Path, round_: int, env: dict[str, str]) -> dict[str, tuple[float, float]]:
    """One round: every index run and every encoder worker, each in its own process; {name: (tokens/s, peak RSS MiB)}."""
    results: dict[str, tuple[float, float]] = {}
    cache = str(tmp / "model-cache")
    for name, (precision, late) in INDEX_RUNS.items():
        run_env = {**env, "LODEX_ENCODER__PRECISION": precision, "LODEX_CHUNKING__LATE": late, "LODEX_ENCODER__CACHE_DIR": cache}
        out, rss = _timed_child([*LODEX_CLI, "index", str(folder), "--json", "--data-dir", str(tmp / f"{name}-{round_}")], run_env)
        summary = json.loads(out)
        results[name] = (summary["tokens"] / summary["seconds"], rss)
    steps = ["st", "exact", "fast", "exact-windows", "fast-windows"]
    for step in steps if round_ % 2 == 0 else steps[::-1]:
        data = tmp / (f"scratch-{step}-{round_}" if step.endswith("windows") else f"index-exact-plain-{round_}")
        out, rss = _timed_child([sys.executable, __file__, "--worker", step, "--data", str(data), "--folder", str(folder)], env)
        result = json.loads(out)
        results[step] = (result["tokens"] / result["seconds"], rss)
    print(f"round {round_ + 1}: " + ", ".join(f"{k} {v[0]:,.0f}" for k, v in results.items()) + " tokens/s", file=sys.stderr)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset", type=Path, nargs="?", default=DEFAULT_DATA)
    parser.add_argument("--docs", type=int, default=600, help="abstracts to use")
    parser.add_argument("--bundle", type=int, default=25)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--pairs", type=int, default=3, help="back-to-back pairs per mode (median printed)")
    parser.add_argument("--worker", choices=[*LABELS, *(f"pair-{m}" for m in MODES)])
    parser.add_argument("--data", type=Path)
    parser.add_argument("--folder", type=Path)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker, args.data, args.folder, args.pairs)

    from lodex.search.collections import load_collection, write_files

    collection = load_collection(args.dataset)
    collection.docs = dict(list(collection.docs.items())[: args.docs])
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    best: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="lodex-encode-") as tmp:
        folder = Path(tmp) / "docs"
        write_files(collection, folder, bundle=args.bundle)
        for round_ in range(args.rounds):
            for key, value in _round(folder, Path(tmp), round_, env).items():
                if value[0] > best.get(key, (0.0, 0.0))[0]:
                    best[key] = value
        pairs = {}
        for mode in MODES:
            out, _ = _timed_child(
                [
                    sys.executable,
                    __file__,
                    "--worker",
                    f"pair-{mode}",
                    "--data",
                    str(Path(tmp) / f"pair-{mode}"),
                    "--folder",
                    str(folder),
                    "--pairs",
                    str(args.pairs),
                ],
                env,
            )
            pairs[mode] = json.loads(out)["ratios"]
            print(f"{mode}: end to end / encoder alone, back to back: " + ", ".join(f"{r:.3f}" for r in pairs[mode]), file=sys.stderr)
        lengths = _chunk_lengths(Path(tmp) / "index-exact-plain-0")
        choice = next(Path(tmp, "model-cache").glob("*-fast-path.json"), None)
        choices = json.loads(choice.read_text()) if choice is not None else {}
        gflops = matmul_gflops()
    st_rate = best["st"][0]
    per_token = flops_per_token(lengths)
    print(
        f"{args.docs} abstracts of {args.dataset.name} as long documents of {args.bundle}; {sum(lengths) - 2 * len(lengths):,} chunk "
        f"tokens; best of {args.rounds} round(s); {os.cpu_count()} CPUs"
    )
    print(machine_line())
    if choices:
        print(
            "fast path: "
            + "; ".join(
                f"{entry['path']} chosen of "
                + ", ".join(f"{t['path']} {t['seconds']:.3f} s" if t["seconds"] else f"{t['path']} ({t['error']})" for t in entry["trials"])
                for entry in choices.values()
            )
        )
    print(
        f"machine: fp32 matmul {gflops:,.1f} GFLOP/s; model: {per_token / 1e6:.1f} MFLOP/token at a mean "
        f"{sum(lengths) / len(lengths):.0f} tokens per chunk"
    )
    print(f"{'':48s} {'tokens/s':>10s} {'vs ST':>7s} {'% of fp32 peak':>15s} {'peak RSS':>10s}")
    for key in LABELS:
        rate, rss = best[key]
        share = f"{100 * rate * per_token / (gflops * 1e9):14.0f}%" if key in ("st", "exact", "fast") else f"{'':15s}"
        print(f"{LABELS[key]:48s} {rate:10,.0f} {rate / st_rate:6.2f}x {share} {rss:8.0f} MiB")
    print(
        "end to end / its encoder on the same work (chunk tokens/s over chunk tokens/s): "
        + ", ".join(f"{LABELS[run].removeprefix('lodex index, ')} {best[run][0] / best[enc][0]:.2f}x" for run, enc in PAIRS)
    )
    print("(late chunking's windows add context tokens around each chunk: the window rows' tokens/s count chunk tokens only)")
    print(
        f"the same, measured back to back in one process (median of {args.pairs} pairs; the rows above are separate processes minutes "
        "apart): " + ", ".join(f"{mode} {statistics.median(r):.2f}x ({min(r):.2f}-{max(r):.2f})" for mode, r in pairs.items())
    )


if __name__ == "__main__":
    main()
