"""Queries without PyTorch: once the full encoder has loaded (and checked) its ONNX query model, it leaves a recipe
next to it (the exact tokenizer, pooling, prefixes, the index origin it encodes for); a later `lodex search` rebuilds
the query encoder from that recipe with ONNX Runtime and the tokenizers library alone, seconds faster at a cold start,
with the same vectors."""

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from lodex.encoders.cpu import physical_cores
from lodex.encoders.encoder import Encoder
from lodex.encoders.model_files import bundled_model_dir, model_fingerprint
from lodex.encoders.onnx_model import OnnxModel, default_cache_dir
from lodex.encoders.padding import padded_inputs
from lodex.encoders.pooling import pool_states
from lodex.encoders.settings import EncoderSettings

RECIPE_VERSION = 2  # 2: the fast path recorded (fast mode's documents run from the recipe too)


def settings_model_dir(cfg: EncoderSettings) -> Path:
    return (Path(cfg.model).expanduser() if cfg.model else bundled_model_dir()).resolve()


def recipe_path(cfg: EncoderSettings, fingerprint: str) -> Path:
    """Where the recipe for these settings and these weights lives (any setting that changes query vectors is in its name)."""
    shaping = cfg.model_dump(
        include={
            "pooling",
            "normalize",
            "max_length",
            "query_prefix",
            "document_prefix",
            "precision",
            "fast_queries",
            "append_eos",
            "window_tokens",
            "fast_path",
        }
    )
    key = hashlib.blake2b(
        json.dumps([RECIPE_VERSION, str(settings_model_dir(cfg)), fingerprint, shaping], sort_keys=True).encode(), digest_size=10
    ).hexdigest()
    cache = Path(cfg.cache_dir).expanduser() if cfg.cache_dir else default_cache_dir()
    return cache / "queries" / f"{key}.json"


def save_recipe(encoder: Any, cfg: EncoderSettings, onnx_path: Path) -> None:
    """Record how `encoder` (a TransformersEncoder whose ONNX query model at `onnx_path` passed its check) encodes
    queries; best effort: a cache that cannot be written only costs the next cold start its speed."""
    path = recipe_path(cfg, encoder.fingerprint)
    recipe = {
        "onnx": str(onnx_path),
        "tokenizer": encoder.tokenizer.backend_tokenizer.to_str(),
        "inputs": list(encoder._inputs),
        "padding_side": encoder.tokenizer.padding_side,
        "pad_id": encoder.tokenizer.pad_token_id or 0,
        "eos_id": encoder.eos_id,
        "model_id": encoder.model_id,
        "fingerprint": encoder.fingerprint,
        "dim": encoder.dim,
        "pooling": encoder.pooling,
        "normalize": encoder.normalize,
        "max_length": encoder.max_length,
        "window_limit": encoder.window_limit,
        "special_tokens": encoder.special_tokens,
        "query_prefix": encoder.query_prefix,
        "document_prefix": encoder.document_prefix,
        "precision": encoder.precision,
        "origin": encoder.origin(),
        "runtime": encoder.runtime(),
        "fast_path": encoder.fast_path.name if encoder.precision == "fast" and encoder.fast_path is not None else None,
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(recipe))
        os.replace(tmp, path)
    except OSError:
        pass


def load_query_encoder(cfg: EncoderSettings) -> "OnnxQueryEncoder | None":
    """The query encoder of a recipe saved for these settings and the model's current weights, or None (no recipe, its
    ONNX model gone, or anything unreadable: the full encoder is loaded then)."""
    try:
        path = settings_model_dir(cfg)
        recipe = json.loads(recipe_path(cfg, model_fingerprint(path)).read_text())
        if not Path(recipe["onnx"]).is_file():
            return None
        return OnnxQueryEncoder(recipe, cfg.threads or physical_cores())
    except (OSError, ValueError, KeyError, TypeError):
        return None


class OnnxQueryEncoder(Encoder):
    """Encodes queries as the TransformersEncoder that wrote its recipe does (same tokenizer, ONNX model, pooling);
    it cannot encode documents through another runtime than the index's, so only queries are asked of it."""

    def __init__(self, recipe: dict[str, Any], threads: int, spin: bool = False) -> None:
        super().__init__()
        self.recipe = recipe
        self.eos_id: int | None = recipe["eos_id"]
        self.tokenizer = tokenizer_of(recipe, recipe["max_length"] - (self.eos_id is not None))  # inputs, cut as the model's
        self._whole = tokenizer_of(recipe, None)  # token spans of whole texts (the chunker's)
        for name in (
            "model_id",
            "fingerprint",
            "dim",
            "pooling",
            "normalize",
            "max_length",
            "window_limit",
            "special_tokens",
            "query_prefix",
            "document_prefix",
            "precision",
        ):
            setattr(self, name, recipe[name])
        self.model = OnnxModel(Path(recipe["onnx"]), threads, spin=spin)

    def origin(self) -> dict[str, Any]:
        return dict(self.recipe["origin"])

    def runtime(self) -> str:
        return str(self.recipe["runtime"])

    def token_spans(self, texts: list[str]) -> list[np.ndarray]:
        encoded = self._whole.encode_batch(texts, add_special_tokens=False)
        return [np.asarray(e.offsets, dtype=np.int64).reshape(-1, 2) for e in encoded]

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        return self._run(self.model, texts)

    def _run(self, model: OnnxModel, texts: list[str]) -> np.ndarray:
        """One batch through `model`: tokenized and padded as the full encoder does, pooled."""
        encoded = self.tokenizer.encode_batch(texts)
        columns = padded_inputs(
            [e.ids for e in encoded],
            self.recipe["pad_id"],
            self.recipe["padding_side"] == "left",
            self.eos_id,
            {"token_type_ids": ([e.type_ids for e in encoded], 0)},
        )
        batch = {name: columns[name] for name in self.recipe["inputs"]}
        return pool_states(model(batch), batch["attention_mask"], self.pooling)


def tokenizer_of(recipe: dict[str, Any], truncate: int | None) -> Any:
    """The recipe's tokenizer (the tokenizers library's), unpadded, cutting inputs at `truncate` tokens (None: never)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(recipe["tokenizer"])
    tokenizer.no_padding()
    if truncate is None:
        tokenizer.no_truncation()
    else:
        tokenizer.enable_truncation(truncate)
    return tokenizer
