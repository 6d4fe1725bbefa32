"""Measurements of a loaded model for `lodex model check`: tokens/s exact and fast, and fast mode's fidelity and gate."""

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lodex.encoders.errors import ModelError
from lodex.encoders.fast_mode import FAST_GATE
from lodex.encoders.onnx_model import OnnxModel
from lodex.encoders.smoothing import calibration_texts
from lodex.encoders.transformers_encoder import TransformersEncoder


@dataclass
class Run:
    """Vectors of the probe texts (L2-normalized) and the rate they were computed at."""

    vectors: np.ndarray
    tokens_per_s: float


@dataclass
class FastProbe:
    """Whether fast mode (int8 ONNX) serves this model, and how close its vectors come to exact ones."""

    available: bool
    reason: str = ""
    gate_cosine: float | None = None  # the lowest cosine on the load-time check texts; fast mode needs FAST_GATE
    mean_cosine: float | None = None  # on the probe texts
    min_cosine: float | None = None
    run: Run | None = None
    model_bytes: int | None = None


def probe_texts() -> list[str]:
    """The built-in text set: the calibration paragraphs, alone and four at a time."""
    return calibration_texts()


def measure(encoder: TransformersEncoder, texts: list[str], embed: Callable[[list[str]], np.ndarray]) -> Run:
    """Vectors of `texts` through `embed` (one padded batch → pooled rows), batched as the encoder batches documents;
    timed after a warm-up call (a runtime's first call sets itself up)."""
    lengths = encoder.token_lengths(texts)
    out = np.zeros((len(texts), encoder.dim), dtype=np.float32)
    embed(texts[:2])
    start = time.perf_counter()
    for batch in encoder.plan_batches(lengths):
        out[batch] = embed([texts[i] for i in batch])
    seconds = max(time.perf_counter() - start, 1e-9)
    out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
    return Run(out, sum(lengths) / seconds)


def measure_exact(encoder: TransformersEncoder, texts: list[str]) -> Run:
    """The PyTorch (exact mode) vectors and rate."""
    return measure(encoder, texts, encoder._torch_batch)


def probe_fast(encoder: TransformersEncoder, texts: list[str], exact: Run) -> FastProbe:
    """Export (or take from the cache) the int8 model fast mode would use, and check it as fast mode does."""
    try:
        model = encoder._onnx_model(int8=True, spin=False, reduce_range=False)
    except ModelError as exc:
        return FastProbe(False, exc.message)
    except Exception as exc:  # noqa: BLE001 - an architecture the exporter cannot take: that is the answer
        return FastProbe(False, f"its int8 ONNX export failed ({_reason(exc)})")
    try:
        return _compare(encoder, model, texts, exact)
    except Exception as exc:  # noqa: BLE001 - an exported graph the runtime cannot run
        return FastProbe(False, f"ONNX Runtime cannot run its int8 export ({_reason(exc)})", model_bytes=model.path.stat().st_size)


def _compare(encoder: TransformersEncoder, model: OnnxModel, texts: list[str], exact: Run) -> FastProbe:
    gate = encoder._agreement(model)
    run = measure(encoder, texts, lambda batch: encoder._onnx_batch(model, batch))
    cosines = (run.vectors * exact.vectors).sum(axis=1)
    probe = FastProbe(gate >= FAST_GATE, "", gate, float(cosines.mean()), float(cosines.min()), run, model.path.stat().st_size)
    if not probe.available:
        probe.reason = f"its int8 vectors keep a cosine of only {gate:.4f} to exact ones (fast mode needs {FAST_GATE})"
    return probe


def _reason(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
