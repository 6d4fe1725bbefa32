"""`lodex model check`: what lodex will do with a model directory, as one JSON-ready report (render.py prints it)."""

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console

from lodex.api.build_search import search_fusion
from lodex.api.cli.render import print_model_check
from lodex.api.index_policy import late_plan
from lodex.api.model.cache import cached_model, is_model_id, model_path, named_model
from lodex.api.model.imports import NAMED
from lodex.api.settings import Settings
from lodex.encoders.layer_stream import StreamedModel
from lodex.encoders.layer_weights import fp32_bytes, tensor_index
from lodex.encoders.model_files import bundled_model_dir
from lodex.encoders.model_info import Choice, read_model_dir, window
from lodex.encoders.model_languages import declared_languages
from lodex.encoders.model_probe import (
    FastProbe,
    Run,
    measure_exact,
    probe_fast,
    probe_texts,
)
from lodex.encoders.model_search import declared_search
from lodex.encoders.transformers_encoder import TransformersEncoder
from lodex.store.errors import LodexError
from lodex.store.manifest import IndexManifest

_MB = 1 << 20


def model_dir(settings: Settings, directory: Path | None) -> Path:
    """DIR (or a pulled hub id), else the configured encoder.model (resolved as the other commands resolve it), else the
    bundled model."""
    if directory is not None:
        path = directory.expanduser().resolve()
        if str(directory) == NAMED and not path.exists():
            return named_model(settings.encoder)
        if not path.exists() and is_model_id(str(directory)) and cached_model(settings.encoder, str(directory)).is_dir():
            return cached_model(settings.encoder, str(directory))
        return path
    return model_path(settings) if settings.encoder.model else bundled_model_dir()


def print_check(settings: Settings, directory: Path | None, as_json: bool) -> None:
    """The report on stdout, as text or one JSON object; a lodex error also as {"error": {"code", "message"}} with --json
    (then raised on, for the CLI's one line on stderr and exit code 2)."""
    try:
        report = check_model(settings, directory)
    except LodexError as exc:
        if as_json:
            print(json.dumps({"error": {"code": exc.code, "message": exc.one_line()}}))
        raise
    if as_json:
        print(json.dumps(report))
    else:
        print_model_check(Console(), report)


def check_model(settings: Settings, directory: Path | None) -> dict[str, Any]:
    """The report: the directory's declarations, lodex's choices with their sources, fast mode, speed and memory.
    A ModelError (one line, with the fix) for a directory lodex cannot use."""
    path = model_dir(settings, directory)
    info = read_model_dir(path)  # the broken-directory reasons, before any weights are read
    cfg = settings.encoder.model_copy(update={"model": "" if directory is None and not settings.encoder.model else str(path), "precision": "exact"})
    encoder = TransformersEncoder(cfg)
    config, tokenizer = encoder.model.config, encoder.tokenizer
    pooling = info.pooling(cfg.pooling)
    query, document = info.prefixes(cfg)
    late = late_plan(settings, encoder, IndexManifest.read(settings.data_dir))
    covered, source = declared_languages(cfg.model)
    search = _search_choice(settings, cfg.model)
    texts = probe_texts()
    exact = measure_exact(encoder, texts)
    streamed = isinstance(encoder.model, StreamedModel)
    weights, parameters, fast = _weights_and_fast(encoder, path, texts, exact)
    heads = int(getattr(config, "num_attention_heads", 0) or 0)
    width = min(encoder.max_length, cfg.batch_tokens)
    # a rough peak of one batch: a few copies of the hidden states, the feed-forward's inner states, the attention scores
    activations = 4 * cfg.batch_tokens * (4 * encoder.dim + int(getattr(config, "intermediate_size", 4 * encoder.dim) or 0) + heads * width)
    return {
        "model": str(path),
        "model_id": encoder.model_id,
        "architecture": info.architecture,
        "model_type": info.model_type,
        "kind": "decoder" if info.decoder else "encoder",
        "parameters": parameters,
        "dim": encoder.dim,
        "window": _choice(window(path, cfg.max_length, int(getattr(config, "max_position_embeddings", 512)), int(tokenizer.model_max_length))),
        "pooling": _choice(pooling),
        "query_prefix": _choice(query),
        "document_prefix": _choice(document),
        "eos": _choice(info.eos(cfg.append_eos, pooling.value, tokenizer)),
        "padding_side": tokenizer.padding_side,
        "languages": _choice(Choice(sorted(covered) if covered is not None else None, source)),
        "search": _choice(search),
        "late_chunking": {
            "setting": settings.chunking.late,
            "enabled": late is not None,
            "window_limit": encoder.window_limit,
            "window_tokens": late.window_tokens if late else None,
        },
        "configured_precision": settings.encoder.precision,
        "fast_mode": {k: v for k, v in asdict(fast).items() if k not in ("run", "model_bytes")} | {"texts": len(texts)},
        "tokens_per_s": {"exact": round(exact.tokens_per_s), "fast": round(fast.run.tokens_per_s) if fast.run and fast.available else None},
        "memory_mb": {
            "weights": round(weights / _MB, 1),
            "int8_model": round(fast.model_bytes / _MB, 1) if fast.model_bytes else None,
            "activations": round(activations / _MB, 1),
            "exact": round((weights + activations) / _MB, 1),
            # fast mode keeps the PyTorch model loaded too (its export is checked against it when loaded)
            "fast": round((weights + (fast.model_bytes or 0) + activations) / _MB, 1) if fast.available else None,
            # layer-streamed: the budget (the model's shell, two layers, activations) instead of the weights
            "streamed": round(encoder.model.budget / _MB, 1) if streamed else None,
            "largest_layer": round(encoder.model.layer_bytes / _MB, 1) if streamed else None,
        },
        "streamed": streamed,
    }


def _weights_and_fast(encoder: TransformersEncoder, path: Path, texts: list[str], exact: Run) -> tuple[int, int, FastProbe]:
    """The model's fp32 weight bytes, its parameters, and what fast mode gives for it (`exact`: the exact run's
    measurement on `texts`)."""
    model = encoder.model
    if isinstance(model, StreamedModel):  # nothing of it is whole in memory: sizes from the files' headers
        slots = tensor_index(path)
        return (
            fp32_bytes(slots),
            sum(s.numel for s in slots.values()),
            FastProbe(
                False,
                "the model is layer-streamed (encoder.stream_layers, or weights over encoder.memory_budget_mb): fast mode needs it whole in memory",
            ),
        )
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    return weights, sum(p.numel() for p in model.parameters()), probe_fast(encoder, texts, exact)


def _choice(choice: Choice) -> dict[str, Any]:
    return {"value": choice.value, "source": choice.source}


def _search_choice(settings: Settings, model: str) -> Choice:
    """The fusion and feedback weight hybrid search uses with this model, and why: what it declares for search.fusion
    and search.feedback_weight "auto", or the settings."""
    declared, source = declared_search(model)
    fusion = search_fusion(settings.search, declared)
    configured = [key for key in ("fusion", "feedback_weight") if getattr(settings.search, key) != "auto"]
    if configured:
        source = ", ".join(f"search.{key}" for key in configured) + (f"; {source}" if len(configured) < 2 else "")
    elif not declared:
        source += ": lodex's defaults"
    return Choice({"fusion": fusion.method, "feedback_weight": fusion.feedback_weight}, source)
