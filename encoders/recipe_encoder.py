"""Fast mode without PyTorch: once the full encoder has exported, checked and measured the int8 model for this model
and CPU, it leaves a recipe (query_encoder.py); a later run of fast mode rebuilds its whole encoder from it (documents,
late chunking's windows and queries, on the same ONNX model, tokenizer and pooling, in the same session layout), and
starts in a fraction of a second where the full encoder imports PyTorch and transformers and checks the export again."""

import json
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from lodex.encoders.cpu import cpu_info, physical_cores
from lodex.encoders.fast_mode import FAST_BATCH_TOKENS
from lodex.encoders.fast_paths import FastPath, candidates, parse_path, remembered
from lodex.encoders.layer_stream import streaming_reason
from lodex.encoders.model_files import model_fingerprint
from lodex.encoders.onnx_model import OnnxModel, SessionPool, default_cache_dir
from lodex.encoders.padding import padded_inputs
from lodex.encoders.pooling import pool_spans
from lodex.encoders.query_encoder import OnnxQueryEncoder, recipe_path, settings_model_dir, tokenizer_of
from lodex.encoders.settings import EncoderSettings

_WARM = ["warm up", "a second, somewhat longer text to warm up"]


class RecipeEncoder(OnnxQueryEncoder):
    """Fast mode's encoder rebuilt from its recipe: the same vectors as the TransformersEncoder that left it."""

    def __init__(self, recipe: dict[str, Any], cfg: EncoderSettings) -> None:
        threads = cfg.threads or physical_cores()
        self.layout = parse_path(recipe["fast_path"]).layout
        super().__init__(recipe, threads, spin=True)
        self.batch_tokens = min(cfg.batch_tokens, FAST_BATCH_TOKENS)
        self.group_tokens = 2 * cfg.batch_tokens
        self._threads = threads
        self.parallel_calls = threads if self.layout == "sessions" else 1
        self._windows = tokenizer_of(recipe, recipe["window_limit"] - (self.eos_id is not None))
        self._pool: SessionPool | None = None
        self._pool_lock = threading.Lock()

    def runtime(self) -> str:
        return f"int8 ONNX Runtime (documents and queries), fast path {self.recipe['fast_path']} (remembered; PyTorch not loaded)"

    def _sessions(self) -> SessionPool | None:
        """The "sessions" layout's single-threaded sessions (made, and warmed, at the first batches that need them)."""
        if self.layout != "sessions":
            return None
        with self._pool_lock:
            if self._pool is None:
                self._pool = SessionPool(self.model.path, self._threads)
                list(self._pool.map(self._run, [_WARM] * self._threads))
        return self._pool

    def _embed_batches(self, batches: list[list[str]], kind: str) -> Iterable[np.ndarray]:
        if kind != "query" and len(batches) > 1 and (pool := self._sessions()) is not None:
            return pool.map(self._run, batches)
        return super()._embed_batches(batches, kind)

    def _window_batches(self, inputs: list[tuple[list[str], list[list[tuple[int, int]]], list[int]]]) -> Iterable[list[np.ndarray]]:
        if len(inputs) > 1 and (pool := self._sessions()) is not None:
            return pool.map(lambda model, args: self._window_batch(args[0], args[1], args[2], model), inputs)
        return super()._window_batches(inputs)

    def _window_batch(
        self, texts: list[str], spans: list[list[tuple[int, int]]], starts: list[int], model: OnnxModel | None = None
    ) -> list[np.ndarray]:
        """Late chunking's windows, tokenized as TransformersEncoder._window_inputs does, chunks pooled from their spans."""
        encoded = self._windows.encode_batch(texts)
        columns = padded_inputs(
            [e.ids for e in encoded],
            self.recipe["pad_id"],
            self.recipe["padding_side"] == "left",
            self.eos_id,
            {
                "token_type_ids": ([e.type_ids for e in encoded], 0),
                "offsets": ([e.offsets for e in encoded], (0, 0)),
                "special": ([e.special_tokens_mask for e in encoded], 1),
            },
        )
        batch = {name: columns[name] for name in self.recipe["inputs"]}
        hidden = (model or self.model)(batch)
        mask, special = batch["attention_mask"].astype(bool), columns["special"].astype(bool)
        return [
            pool_spans(hidden[i], mask[i], special[i], columns["offsets"][i], spans[i], (starts[i], len(texts[i])), self.pooling)
            for i in range(len(texts))
        ]

    def release_memory(self) -> None:
        tiny = padded_inputs([self.tokenizer.encode("").ids], self.recipe["pad_id"], False, self.eos_id)
        batch = {name: tiny[name] for name in self.recipe["inputs"]}
        self.model.release_memory(batch)
        if self._pool is not None:
            self._pool.release_memory(batch)


def load_fast_encoder(cfg: EncoderSettings, scheme: str | None) -> RecipeEncoder | None:
    """Fast mode's encoder from its recipe when `cfg` ([encoder], precision as the index keeps it, or "auto" for a new
    index) runs documents in fast mode and a full encoder has left a recipe for these settings, these weights and the
    fast path this CPU uses (among those of `scheme`, the int8 scheme of a fast-mode index: `IndexManifest`); None
    otherwise (the full encoder loads, and decides)."""
    if cfg.precision not in ("fast", "auto"):
        return None
    fast = cfg.model_copy(update={"precision": "fast"})
    try:
        path = settings_model_dir(fast)
        if cfg.precision == "auto" and streaming_reason(path, cfg.memory_budget_mb, cfg.stream_layers):
            return None  # "auto" encodes a layer-streamed model exactly
        fingerprint = model_fingerprint(path)
        recipe = json.loads(recipe_path(fast, fingerprint).read_text())
        if recipe.get("precision") != "fast" or not recipe.get("fast_path") or not Path(recipe["onnx"]).is_file():
            return None
        chosen: FastPath | None
        if cfg.fast_path != "auto":
            chosen = parse_path(cfg.fast_path)
        else:
            cpu, cache = cpu_info(), Path(cfg.cache_dir).expanduser() if cfg.cache_dir else default_cache_dir()
            chosen = remembered(cache, fingerprint, cpu, candidates(cpu, scheme) or candidates(cpu))
        if chosen is None or chosen.name != recipe["fast_path"]:
            return None  # never measured on this CPU, or measured to another path: the full encoder decides
        return RecipeEncoder(recipe, cfg)
    except (OSError, ValueError, KeyError, TypeError):
        return None
