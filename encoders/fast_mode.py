"""Fast mode of the transformers encoder: its int8 ONNX model on a path configured, remembered or chosen by measurement,
checked against PyTorch (the fidelity gate), its session pool, and the fall-back to exact encoding when refused."""

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lodex.encoders.cpu import cpu_info
from lodex.encoders.errors import ModelError
from lodex.encoders.fast_paths import FastPath, Trial, candidates, choose, parse_path, remember, remembered
from lodex.encoders.onnx_model import OnnxModel, SessionPool, default_cache_dir, load_onnx_model
from lodex.encoders.pooling import pool_states, row_cosines
from lodex.encoders.settings import EncoderSettings
from lodex.encoders.smoothing import calibration_batches, calibration_texts, input_ranges

# Inputs of other lengths than the export's sample, to check an ONNX model against PyTorch when it is loaded
# (an exporter can bake a traced length into a graph: its vectors would be wrong, silently).
_CHECK_TEXTS = ["a", "How are lift and drag of a swept wing measured in a transonic wind tunnel?", "Boundary layers. " * 60]
FAST_GATE = 0.95  # the lowest cosine of int8 vectors to PyTorch's on _CHECK_TEXTS for fast mode to be used
FAST_BATCH_TOKENS = 1_024  # fast mode's padded tokens per document batch (encoder.batch_tokens caps it)


@dataclass
class StartPasses:
    """A fast-mode start's PyTorch passes, each made at its first need and shared by every path measured, exported and
    checked in that start: the check texts' vectors, and one pass over the calibration texts that gives both their
    vectors (the fidelity measurement's reference) and each linear layer's input ranges (the int8 export's smoothing)."""

    checks: np.ndarray | None = None
    ranges: dict[str, Any] | None = None  # by linear layer (torch tensors)
    calibration: np.ndarray | None = None


class FastMode:
    """The fast-mode half of `TransformersEncoder` (a mixin: the encoder owns the model, tokenizer and batching that
    these methods use, and sets the attributes declared here)."""

    model: Any
    tokenizer: Any
    fingerprint: str
    max_length: int
    pooling: str
    eos_id: int | None
    _inputs: list[str]
    precision: str
    fast_refused: str
    batch_tokens: int
    group_tokens: int
    parallel_calls: int
    _settings: EncoderSettings
    _cache_dir: Path | None
    _threads: int
    _fast: OnnxModel | None
    _pool: SessionPool | None
    _copy_lock: Any
    fast_path: FastPath | None
    fast_source: str
    fast_trials: list[Trial]
    _passes: StartPasses | None = None  # set while fast mode starts (the model is nobody else's yet)

    if TYPE_CHECKING:  # the encoder's own methods (stubs here would shadow the base class's)

        def _save_recipe(self, model: OnnxModel) -> None: ...
        def _torch_batch(self, texts: list[str]) -> np.ndarray: ...
        def _onnx_batch(self, model: OnnxModel, texts: list[str]) -> np.ndarray: ...
        def plan_batches(self, lengths: list[int]) -> list[list[int]]: ...
        def token_lengths(self, texts: list[str]) -> list[int]: ...

    def _start_fast(self, cfg: EncoderSettings, path: Path, scheme: str | None) -> None:
        """Fast mode's int8 model on its path, its sessions loaded, its query recipe left; a ModelError with the reason
        when this model or CPU has no faithful int8 path."""
        # int8 ONNX Runtime runs faster on small batches (its attention and elementwise steps stay in cache): 1,024 tokens
        # gave 13,600 tokens/s a session against 11,300 at 4,096 (Sapphire Rapids, MiniLM, 128-token chunks)
        self.batch_tokens = min(cfg.batch_tokens, FAST_BATCH_TOKENS)
        self.group_tokens = 2 * cfg.batch_tokens  # as exact mode: fewer waits for a group's slowest batch ("sessions")
        self._passes = StartPasses()
        try:
            self._fast = self._fast_model(cfg.fast_path, scheme)
            if self.fast_path is not None and self.fast_path.layout == "sessions":
                self.parallel_calls = self._threads  # the indexer keeps each session busy with a group of its own
                self._sessions()  # loaded with the model, not in the first run's time
            self._save_recipe(self._fast)
        except Exception as exc:  # noqa: BLE001 - an architecture the exporter or the runtime cannot take: refused with the reason
            if isinstance(exc, ModelError):
                raise
            raise ModelError(
                f"fast mode is not available for the model in {path}: its int8 ONNX export failed "
                f"({f'{type(exc).__name__}: {exc}'.splitlines()[0][:200]})",
                'set encoder.precision = "exact"',
            ) from exc
        finally:
            self._passes = None

    def _fall_back_to_exact(self, reason: str) -> None:
        """encoder.precision = "auto" on a model or CPU whose int8 path is refused: documents are encoded exactly."""
        self.precision, self.fast_refused, self._settings = "exact", reason, self._settings.model_copy(update={"precision": "exact"})
        self._fast, self._pool, self.fast_path, self.fast_source = None, None, None, ""
        self.batch_tokens, self.group_tokens, self.parallel_calls = self._settings.batch_tokens, 0, 1
        logging.getLogger(__name__).info("documents are encoded exactly: %s", reason)

    def _fast_model(self, configured: str, scheme: str | None) -> "OnnxModel":
        """Fast mode's int8 model (for queries, and for documents in the "threads" layout), on the configured path, else on
        the one remembered or chosen by measurement for this model and CPU among the paths of the index's `scheme`."""
        if configured != "auto":
            self.fast_path, self.fast_source = parse_path(configured), "configured"
            return self._checked_onnx_model(int8=True, spin=True, reduce_range=self.fast_path.reduce_range)
        cpu, cache = cpu_info(), self._cache_dir or default_cache_dir()
        paths = candidates(cpu, scheme) or candidates(cpu)  # an index of a scheme this lodex does not make: the origin check says so
        chosen, self.fast_source = remembered(cache, self.fingerprint, cpu, paths), "measured before on this CPU"
        if chosen is None:
            self.fast_source = "measured now"
            chosen, self.fast_trials = choose(paths, self._measure_path)
            remember(cache, self.fingerprint, cpu, paths, chosen, self.fast_trials)
        self.fast_path = chosen
        return self._checked_onnx_model(int8=True, spin=True, reduce_range=chosen.reduce_range)

    def _measure_path(self, path: FastPath) -> tuple[float, float, float]:
        """A fast path's fidelity (mean and lowest cosine to PyTorch on the check and calibration texts) and its time to
        encode them (best of two, after a warm-up: the fidelity run warms the "threads" layout's session, the
        "sessions" layout's pool is warmed as fast mode warms it)."""
        model = self._onnx_model(int8=True, spin=True, reduce_range=path.reduce_range)
        texts = _CHECK_TEXTS + calibration_texts()
        exact = np.concatenate([self._check_vectors(), self._calibration_vectors()])
        cosines = row_cosines(self._onnx_batch(model, texts), exact)
        batches = [[texts[i] for i in batch] for batch in self.plan_batches(self.token_lengths(texts))]
        pool = SessionPool(model.path, self._threads) if path.layout == "sessions" else None
        if pool is not None:
            list(pool.map(self._onnx_batch, [_CHECK_TEXTS[:2]] * self._threads))
        best = float("inf")
        for _ in range(2):
            started = time.perf_counter()
            if pool is not None:
                list(pool.map(self._onnx_batch, batches))
            else:
                for batch in batches:
                    self._onnx_batch(model, batch)
            best = min(best, time.perf_counter() - started)
        return float(cosines.mean()), float(cosines.min()), best

    def _check_vectors(self) -> np.ndarray:
        """PyTorch's vectors of the check texts (once in a start)."""
        if self._passes is None:
            return self._torch_batch(_CHECK_TEXTS)
        if self._passes.checks is None:
            self._passes.checks = self._torch_batch(_CHECK_TEXTS)
        return self._passes.checks

    def _calibration_ranges(self) -> dict[str, Any]:
        """Smoothing's input ranges of the model, from the start's one pass over the calibration texts (hooked: the
        model is nobody else's yet), whose outputs are kept as the texts' vectors where it feeds the model what the
        encoder feeds it (no EOS appended, no tokenizer output the model does not declare)."""
        passes = self._passes
        assert passes is not None, "smoothed with the start's pass only while fast mode starts"
        if passes.ranges is None:
            seen: list[np.ndarray] = []

            def keep(inputs: Any, hidden: Any) -> None:  # torch tensors
                if self.eos_id is None and sorted(inputs.keys()) == sorted(self._inputs):
                    seen.append(pool_states(hidden.float().numpy(), inputs["attention_mask"].numpy(), self.pooling))

            passes.ranges = input_ranges(self.model, self.tokenizer, self.max_length, keep)
            if passes.calibration is None and len(seen) == len(calibration_batches()):
                passes.calibration = np.concatenate(seen)
        return passes.ranges

    def _calibration_vectors(self) -> np.ndarray:
        """PyTorch's vectors of the calibration texts: the start's pass's, else encoded (once in a start)."""
        passes = self._passes
        assert passes is not None, "measured while fast mode starts"
        if passes.calibration is None:
            passes.calibration = np.concatenate([self._torch_batch(batch) for batch in calibration_batches()])
        return passes.calibration

    def _onnx_model(self, int8: bool, spin: bool, reduce_range: bool) -> OnnxModel:
        """The cached (or newly exported) ONNX model; an int8 export in a start smoothed by the start's calibration pass."""
        ranges = self._calibration_ranges if int8 and self._passes is not None else None
        return load_onnx_model(
            self.model,
            self.tokenizer,
            self.fingerprint,
            self._cache_dir,
            self._threads,
            int8=int8,
            max_length=self.max_length,
            spin=spin,
            reduce_range=reduce_range,
            ranges=ranges,
        )

    def _sessions(self) -> SessionPool | None:
        """The "sessions" layout's pool (made at the first document batch), or None in the "threads" layout."""
        if self._pool is None and self._fast is not None and self.fast_path is not None and self.fast_path.layout == "sessions":
            with self._copy_lock:
                made = self._pool is None
                self._pool = self._pool or SessionPool(self._fast.path, self._threads)
            if made:  # warmed (outside the lock)
                list(self._pool.map(self._onnx_batch, [_CHECK_TEXTS[:2]] * self._threads))
        return self._pool

    def _checked_onnx_model(self, int8: bool, spin: bool, reduce_range: bool = False) -> "OnnxModel":
        """The cached (or newly exported) ONNX model, checked against PyTorch: a ModelError unless its vectors keep a
        cosine of 0.95 (int8) or 0.9999 (float32) to PyTorch's."""
        model = self._onnx_model(int8, spin, reduce_range)
        if (agreement := self._agreement(model)) < (FAST_GATE if int8 else 0.9999):
            raise ModelError(
                f"the {'int8' if int8 else 'float32'} ONNX export does not reproduce the model (cosine {agreement:.6f} to PyTorch)",
                'set encoder.precision = "exact"' if self.precision == "fast" else "",
            )
        return model

    def _agreement(self, model: "OnnxModel") -> float:
        """The lowest cosine between an ONNX model's vectors and PyTorch's, on inputs of several lengths."""
        ours, reference = self._onnx_batch(model, _CHECK_TEXTS), self._check_vectors()
        cosines = row_cosines(ours, reference)
        return float(cosines.min())
