"""The real encoder: a local Hugging Face model run with transformers on CPU (default: bundled MiniLM)."""

import logging
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from lodex.encoders.cpu import physical_cores
from lodex.encoders.encoder import Encoder
from lodex.encoders.errors import ModelError
from lodex.encoders.fast_mode import FastMode
from lodex.encoders.fast_paths import FastPath, Trial
from lodex.encoders.layer_stream import StreamedModel
from lodex.encoders.model_files import bundled_model_dir
from lodex.encoders.model_info import ModelInfo, read_model_dir, window
from lodex.encoders.model_loading import load_model
from lodex.encoders.onnx_model import OnnxModel, SessionPool, model_inputs
from lodex.encoders.padding import padded_inputs
from lodex.encoders.pooling import pool_spans, pool_states, token_offsets
from lodex.encoders.settings import EncoderSettings
from lodex.encoders.tokenizer_copies import TokenizerCopies
from lodex.store.errors import ConfigError
from lodex.store.heap import release_freed

BUNDLED_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"


class TransformersEncoder(FastMode, Encoder):
    """AutoModel + AutoTokenizer from a local directory; mean, cls or last-token pooling."""

    def __init__(self, cfg: EncoderSettings | None = None, spill_dir: Path | None = None, quantization: str | None = None) -> None:
        """The model of `cfg` ([encoder] settings, precision as the index keeps it; their defaults when None: the bundled
        model, as users get it); `spill_dir`: where a layer-streamed model's activations spill beyond its memory budget
        (the data dir); `quantization`: the int8 scheme of the fast-mode index it encodes for (`IndexManifest`), if any."""
        cfg = cfg or EncoderSettings()
        model_dir, threads = cfg.model or None, cfg.threads
        precision, fast_queries = cfg.precision, cfg.fast_queries
        cache_dir = cfg.cache_dir or None
        super().__init__(batch_tokens=cfg.batch_tokens)
        import torch

        bundled = not model_dir
        path = bundled_model_dir() if not model_dir else Path(model_dir).expanduser()
        info = read_model_dir(path)  # a ModelError with the reason for a broken directory, before any weights are read
        torch.set_num_threads(threads or physical_cores())
        self.tokenizer, self.fingerprint, self.model = load_model(path, info, cfg, spill_dir)
        streamed = isinstance(self.model, StreamedModel)
        if not streamed:
            info.check_weights(self.model)  # a streamed model's layers are checked against the files as they are read
        if not getattr(self.tokenizer, "is_fast", False):
            raise ModelError(f"the model in {path} has no fast tokenizer (tokenizer.json)", "use a model with tokenizer.json")
        self._torch = torch
        self._tokenizers = TokenizerCopies(self.tokenizer)  # one per concurrent caller, kept across threads
        self._copy_lock = threading.Lock()
        self._take_declarations(info, cfg, path, bundled, streamed)
        if precision not in ("auto", "exact", "fast"):
            raise ConfigError(f"unknown encoder.precision {precision!r}", 'use "auto", "exact" or "fast"')
        chosen = precision == "auto"  # fast unless its int8 path is refused on this CPU and model (or the model streams)
        self.precision = ("exact" if streamed else "fast") if chosen else precision
        self.fast_refused = "the model is layer-streamed" if chosen and streamed else ""  # why "auto" took exact mode
        self._settings = cfg.model_copy(update={"precision": self.precision})  # the recipe of a later `lodex search` names it
        self._cache_dir = Path(cache_dir).expanduser() if cache_dir else None
        self._threads = threads or physical_cores()
        self._fast: OnnxModel | None = None
        self._queries: OnnxModel | None = None  # exact mode: float32 (or int8: fast_queries) ONNX for queries, loaded at the first one
        self.fast_queries = fast_queries
        self._query_fallback = isinstance(self.model, StreamedModel)  # streamed: no ONNX export, queries stream too
        if isinstance(self.model, StreamedModel):
            self.layer_weights, self.group_tokens = cfg.layer_weights, self.model.group_tokens()
        self._query_lock = threading.Lock()
        self.fast_path: FastPath | None = None  # fast mode's path (weights and layout), configured or chosen by measurement
        self.fast_source = ""  # "configured", "measured now", "measured before on this CPU"
        self.fast_trials: list[Trial] = []  # the measurements that chose it (empty when configured or remembered)
        self._pool: SessionPool | None = None  # the "sessions" layout's single-threaded sessions, made at the first batch
        if self.precision == "fast":
            try:
                self._start_fast(cfg, path, quantization)
            except ModelError as exc:
                if not chosen:
                    raise
                self._fall_back_to_exact(exc.one_line())

    def _take_declarations(self, info: ModelInfo, cfg: EncoderSettings, path: Path, bundled: bool, streamed: bool) -> None:
        """The model's id, dimension, pooling, window, EOS id and prompts: lodex's settings where they say, else what the
        model directory declares (`info`)."""
        imported = info.config.get("lodex_import")  # `lodex model import`'s record: the model's own id
        self.model_id = BUNDLED_MODEL_ID if bundled else str(imported["model"]) if isinstance(imported, dict) and imported.get("model") else path.name
        self.dim = int(self.model.config.hidden_size)
        self.pooling = info.pooling(cfg.pooling).value
        self.normalize = cfg.normalize
        self.max_length = window(
            path, cfg.max_length, int(getattr(self.model.config, "max_position_embeddings", 512)), int(self.tokenizer.model_max_length)
        ).value
        self.window_limit = min(int(getattr(self.model.config, "max_position_embeddings", 512)), int(self.tokenizer.model_max_length))
        self.eos_id: int | None = info.eos(cfg.append_eos, self.pooling, self.tokenizer).value  # appended to every input when not None
        self.special_tokens = len(self.tokenizer("")["input_ids"]) + (self.eos_id is not None)
        self.query_prefix, self.document_prefix = (choice.value for choice in info.prefixes(cfg))  # lodex config, else the model's prompts
        self._inputs = model_inputs(self.model.skeleton.model if streamed else self.model, self.tokenizer)

    def origin(self) -> dict[str, Any]:
        """The base record, plus fast mode's quantization scheme (indexes from another scheme are refused) and the
        end-of-sequence id appended to inputs (recorded only when one is, so earlier indexes open unchanged)."""
        return (
            super().origin()
            | ({"quantization": self.fast_path.scheme} if self.fast_path else {})
            | ({"eos_token": self.eos_id} if self.eos_id is not None else {})
        )

    def runtime(self) -> str:
        if self.precision == "fast" and self.fast_path is not None:
            return f"int8 ONNX Runtime (documents and queries), fast path {self.fast_path.name} ({self.fast_source})"
        queries = "int8 ONNX Runtime" if self.fast_queries else "fp32 ONNX Runtime"
        refused = f" (fast mode refused: {self.fast_refused})" if self.fast_refused else ""
        return f"fp32 PyTorch for documents{refused}, {queries} for queries"

    def token_spans(self, texts: list[str]) -> list[np.ndarray]:
        with self._tokenizers.borrow() as tokenizer:
            return token_offsets(tokenizer, texts)

    def tokenizer_only(self) -> Encoder:
        from lodex.encoders.tokenizer_only import TokenizerOnly

        return TokenizerOnly(self)

    def release_memory(self) -> None:
        with self._tokenizers.borrow() as tokenizer:
            if self._fast is not None:
                self._fast.release_memory(tokenizer([""], return_tensors="np"))
            if self._pool is not None:
                self._pool.release_memory(tokenizer([""], return_tensors="np"))
        release_freed()

    def _query_model(self) -> "OnnxModel | None":
        """The ONNX model for queries: int8 in fast mode (or with fast_queries); in exact mode the same float32 weights (same vectors to
        1e-6, one runtime call per batch instead of one per layer), exported at the first query; None (PyTorch
        then) when it cannot be had."""
        if self._fast is not None or self._queries is not None or self._query_fallback:
            return self._fast or self._queries
        with self._query_lock:
            if self._queries is None and not self._query_fallback:
                try:
                    self._queries = self._checked_onnx_model(int8=self.fast_queries, spin=False)
                    self._save_recipe(self._queries)
                except Exception as exc:  # noqa: BLE001 - a model the exporter or the runtime cannot take: PyTorch answers
                    self._query_fallback = True
                    reason = exc.one_line() if isinstance(exc, ModelError) else f"{type(exc).__name__}: {exc}".splitlines()[0]
                    logging.getLogger(__name__).warning("queries are encoded with PyTorch: %s", reason)
        return self._queries

    def _save_recipe(self, model: "OnnxModel") -> None:
        """Leave what a later `lodex search` needs to encode queries as this encoder does, without PyTorch."""
        from lodex.encoders.query_encoder import save_recipe

        save_recipe(self, self._settings, model.path)

    def _tokenize(self, texts: list[str], tensors: str) -> dict[str, Any]:
        """A padded batch (on the tokenizer's padding side) of the model's inputs, the EOS id appended when the encoder appends one."""
        with self._tokenizers.borrow() as tokenizer:
            if self.eos_id is None:
                batch = tokenizer(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors=tensors)
            else:
                encoded = tokenizer(texts, truncation=True, max_length=self.max_length - 1)
                for key, tail in (("input_ids", self.eos_id), ("attention_mask", 1), ("token_type_ids", 0)):
                    if key in encoded:
                        encoded[key] = [row + [tail] for row in encoded[key]]
                batch = tokenizer.pad(encoded, return_tensors=tensors)
        return {name: batch[name] for name in self._inputs}

    def _onnx_batch(self, model: "OnnxModel", texts: list[str]) -> np.ndarray:
        batch = self._tokenize(texts, "np")
        return pool_states(model(batch), batch["attention_mask"], self.pooling)

    def _query_batch(self, texts: list[str]) -> np.ndarray:
        model = self._query_model()
        return self.embed_batch(texts) if model is None else self._onnx_batch(model, texts)

    def _embed_batches(self, batches: list[list[str]], kind: str) -> Iterable[np.ndarray]:
        if kind != "query" and len(batches) > 1 and (pool := self._sessions()) is not None:
            return pool.map(self._onnx_batch, batches)
        if not isinstance(self.model, StreamedModel):
            return super()._embed_batches(batches, kind)
        encoded = [self._tokenize(b, "pt") for b in batches]
        return self.model.run(encoded, lambda i, hidden: pool_states(hidden.float().numpy(), encoded[i]["attention_mask"].numpy(), self.pooling))

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        return self._torch_batch(texts) if self._fast is None else self._onnx_batch(self._fast, texts)

    def _window_batches(self, inputs: list[tuple[list[str], list[list[tuple[int, int]]], list[int]]]) -> Iterable[list[np.ndarray]]:
        if len(inputs) > 1 and (pool := self._sessions()) is not None:
            return pool.map(lambda model, args: self._window_batch(args[0], args[1], args[2], model), inputs)
        if not isinstance(self.model, StreamedModel):
            return super()._window_batches(inputs)
        prepared = [self._window_inputs(texts) for texts, _, _ in inputs]  # all windows through each layer at once

        def pooled(i: int, hidden: Any) -> list[np.ndarray]:  # a torch tensor
            (texts, spans, starts), (batch, offsets, special) = inputs[i], prepared[i]
            mask = batch["attention_mask"].astype(bool)
            return [
                pool_spans(hidden[j].float().numpy(), mask[j], special[j], offsets[j], spans[j], (starts[j], len(texts[j])), self.pooling)
                for j in range(len(texts))
            ]

        return self.model.run([{k: self._torch.from_numpy(v) for k, v in batch.items()} for batch, _, _ in prepared], pooled)

    def _window_batch(
        self, texts: list[str], spans: list[list[tuple[int, int]]], starts: list[int], model: OnnxModel | None = None
    ) -> list[np.ndarray]:
        batch, offsets, special = self._window_inputs(texts)
        if (model := model or self._fast) is not None:
            hidden = model(batch)
        else:
            with self._torch.inference_mode():
                hidden = self.model(**{k: self._torch.from_numpy(v) for k, v in batch.items()}).last_hidden_state.float().numpy()
        mask = batch["attention_mask"].astype(bool)
        return [pool_spans(hidden[i], mask[i], special[i], offsets[i], spans[i], (starts[i], len(texts[i])), self.pooling) for i in range(len(texts))]

    def _window_inputs(self, texts: list[str]) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """Late chunking's batch (tokenized as `_tokenize` does, up to the model's window), with each token's char
        offsets and a mask of its special tokens (the appended EOS and the padding among them)."""
        with self._tokenizers.borrow() as tokenizer:
            encoded = tokenizer(
                texts,
                truncation=True,
                max_length=self.window_limit - (self.eos_id is not None),
                return_offsets_mapping=True,
                return_special_tokens_mask=True,
            )
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        columns = padded_inputs(
            encoded["input_ids"],
            pad,
            self.tokenizer.padding_side == "left",
            self.eos_id,
            {"offsets": (encoded["offset_mapping"], (0, 0)), "special": (encoded["special_tokens_mask"], 1)},
        )
        return {name: columns[name] for name in self._inputs}, columns["offsets"], columns["special"].astype(bool)

    def _torch_batch(self, texts: list[str]) -> np.ndarray:
        batch = self._tokenize(texts, "pt")
        with self._torch.inference_mode():
            hidden = self.model(**batch).last_hidden_state
        return pool_states(hidden.float().numpy(), batch["attention_mask"].numpy(), self.pooling)
