"""Layer-streamed encoding of a model larger than its memory budget: peak RSS, speed and vectors against the same model
in memory.

usage: python bench/indexing/streamed.py [--chunks 20000] [--chunk-tokens 128] [--budget-mb 400] [--layers 28] [--hidden 1024]
                                [--sample 64] [--workdir DIR]
Builds a random BERT (LAYERS x HIDDEN, 16 heads, 4*HIDDEN feed-forward; 28 x 1024 = 1.54 GB of float32 weights) once
in WORKDIR, then encodes CHUNKS synthetic chunks of about CHUNK_TOKENS tokens in child processes, handed to the
encoder in groups as the indexer hands them (max(2 * batch_tokens, encoder.group_tokens) tokens): (a) the bundled
MiniLM in memory, the process's own baseline (torch, Lance, tokenizer); (b) the big model in memory; (c) the big model
layer-streamed with encoder.memory_budget_mb = BUDGET, weights in the page cache; (d) the same with the weight files
evicted from the page cache first (cold). Prints each child's peak RSS (VmHWM), streamed - baseline against BUDGET +
one batch's activations, tokens/s (with the CPU's flags) and the time 20,000 x 128-token chunks would take, and the
cosine between streamed and in-memory vectors of the first SAMPLE chunks.
"""

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.harness import machine_line, peak_rss_mib  # noqa: E402

WORDS = (
    "wing lift drag flow boundary layer heat transfer pressure shock wave laminar turbulent plate cylinder velocity "
    "surface temperature model test tunnel number mach reynolds jet stream free body angle attack edge leading "
    "trailing section theory experiment result method solution equation data load stress buckling panel shell "
    "cell blood patient treatment study effect dose tissue growth library information retrieval index search "
    "system user document query term weight"
).split()
FULL_CHUNKS, FULL_TOKENS = 20_000, 128


def chunks(n: int, tokens: int, seed: int = 0) -> list[str]:
    """n synthetic chunks of `tokens` words (one token each with the MiniLM vocabulary)."""
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=tokens)) for _ in range(n)]


def build_model(path: Path, layers: int, hidden: int) -> Path:
    """A random BERT of `layers` x `hidden`, saved once with the bundled tokenizer."""
    if (path / "config.json").exists():
        return path
    import torch
    from transformers import AutoModel, BertConfig

    from tests.tiny_models import save_with_tokenizer

    torch.manual_seed(0)
    config = BertConfig(
        hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=16, intermediate_size=4 * hidden, max_position_embeddings=512
    )
    return save_with_tokenizer(AutoModel.from_config(config).eval(), path, 512)


def worker(args: argparse.Namespace) -> None:
    """One run in this process: load the encoder, encode the chunks in indexer-sized groups, print one JSON line."""
    import numpy as np

    import lodex.store.lance_store  # noqa: F401 - the baseline holds Lance too, as `lodex index` does
    from lodex.encoders.settings import EncoderSettings
    from lodex.encoders.transformers_encoder import TransformersEncoder
    from lodex.indexer.encoding_jobs import GROUP_BATCHES

    workdir = Path(args.workdir)
    cfg = {
        "baseline": EncoderSettings(),
        "memory": EncoderSettings(model=str(workdir / "model"), memory_budget_mb=1 << 20),
        "streamed": EncoderSettings(model=str(workdir / "model"), memory_budget_mb=args.budget_mb),
    }[args.worker.removesuffix("-cold")]
    start = time.perf_counter()
    encoder = TransformersEncoder(cfg, spill_dir=workdir / "data")
    loaded = time.perf_counter() - start
    texts = chunks(args.chunks, args.chunk_tokens)
    lengths = encoder.token_lengths(texts)
    budget = max(encoder.batch_tokens * GROUP_BATCHES, encoder.group_tokens)
    sample, first, start, i = [], 0, time.perf_counter(), 0
    while first < len(texts):
        end, used = first, 0
        while end < len(texts) and (end == first or used + lengths[end] <= budget):
            used, end = used + lengths[end], end + 1
        vectors = encoder.embed(texts[first:end], lengths=lengths[first:end])
        sample.append(vectors[: max(0, args.sample - first)])
        first, i = end, i + 1
    seconds = time.perf_counter() - start
    np.save(workdir / f"{args.worker}.npy", np.concatenate(sample))
    print(
        json.dumps(
            {
                "rss": peak_rss_mib(),
                "seconds": seconds,
                "load": loaded,
                "tokens": sum(lengths),
                "groups": i,
                "batch_tokens": encoder.batch_tokens,
                "streamed": type(encoder.model).__name__ == "StreamedModel",
            }
        )
    )


def run(args: argparse.Namespace, mode: str) -> dict:
    """A child process for `mode`; its JSON line."""
    command = [
        sys.executable,
        __file__,
        "--worker",
        mode,
        "--workdir",
        args.workdir,
        "--chunks",
        str(args.chunks),
        "--chunk-tokens",
        str(args.chunk_tokens),
        "--budget-mb",
        str(args.budget_mb),
        "--sample",
        str(args.sample),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        sys.exit(f"{mode} run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=FULL_CHUNKS)
    parser.add_argument("--chunk-tokens", type=int, default=FULL_TOKENS)
    parser.add_argument("--budget-mb", type=int, default=400)
    parser.add_argument("--layers", type=int, default=28)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--sample", type=int, default=64)
    parser.add_argument("--workdir", default="")
    parser.add_argument("--worker", default="")
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    import numpy as np

    from lodex.encoders.layer_weights import evict, fp32_bytes, tensor_index

    args.workdir = args.workdir or tempfile.mkdtemp(prefix="lodex-streamed-")
    model = build_model(Path(args.workdir) / "model", args.layers, args.hidden)
    size = fp32_bytes(tensor_index(model))
    print(machine_line())
    print(f"model: random BERT {args.layers} x {args.hidden}, {size / 1e9:.2f} GB float32 in {model}")
    print(f"input: {args.chunks:,} chunks of ~{args.chunk_tokens} tokens; memory_budget_mb = {args.budget_mb}")
    figures = {}
    for mode in ("baseline", "memory", "streamed", "streamed-cold"):
        if mode == "streamed-cold":
            evict(sorted(model.glob("*.safetensors")))
        figures[mode] = result = run(args, mode)
        print(
            f"{mode:>14}: peak RSS {result['rss']:7,.0f} MiB  load {result['load']:5.1f} s  encode {result['seconds']:7.1f} s  "
            f"{result['tokens'] / result['seconds']:7,.0f} tokens/s  ({result['groups']} groups, streamed: {result['streamed']})"
        )
    base, memory = figures["baseline"], figures["memory"]
    hidden = args.hidden
    tokens, width = figures["streamed"]["batch_tokens"], args.chunk_tokens + 2  # one batch: q k v, context, output, 2 x ffn, scores
    activations = (tokens * 13 * hidden + 2 * (tokens // width) * 16 * width * width) * 4 / 2**20
    print(
        f"streamed - baseline: {figures['streamed']['rss'] - base['rss']:,.0f} MiB (cold {figures['streamed-cold']['rss'] - base['rss']:,.0f}); "
        f"limit {args.budget_mb} MiB budget + {activations:,.0f} MiB one batch's activations = {args.budget_mb + activations:,.0f} MiB; "
        f"in memory - baseline: {memory['rss'] - base['rss']:,.0f} MiB"
    )
    speed = {m: figures[m]["tokens"] / figures[m]["seconds"] for m in figures}
    print(
        f"throughput vs in memory: warm {speed['streamed'] / speed['memory']:.2f}x, cold {speed['streamed-cold'] / speed['memory']:.2f}x "
        f"({machine_line().split('; ')[1]})"
    )
    full = FULL_CHUNKS * (FULL_TOKENS + 2)
    print(
        f"{FULL_CHUNKS:,} chunks of {FULL_TOKENS} tokens would take: in memory {full / speed['memory'] / 3600:.1f} h, "
        f"streamed {full / speed['streamed'] / 3600:.1f} h (at these tokens/s)"
    )
    ref = np.load(Path(args.workdir) / "memory.npy")
    for mode in ("streamed", "streamed-cold"):
        out = np.load(Path(args.workdir) / f"{mode}.npy")
        cos = (out * ref).sum(axis=1) / (np.linalg.norm(out, axis=1) * np.linalg.norm(ref, axis=1))
        print(f"cosine {mode} vs in memory on {len(ref)} chunks: min {cos.min():.6f}, mean {cos.mean():.6f}")
    return None


if __name__ == "__main__":
    main()
