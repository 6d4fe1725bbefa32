"""The encoder's transformer run by ONNX Runtime, exported once and cached: int8 weights (fast mode), or float32
(exact mode's queries: one runtime call per batch, about twice as fast as PyTorch on a few short queries)."""

import copy
import inspect
import logging
import os
import queue
import tempfile
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np

from lodex.encoders.errors import ModelError
from lodex.encoders.smoothing import SCHEME, smoothed_copy

# The export's own version, in its cache file names: a model exported by an earlier lodex is exported again (v2: eager
# attention, see _export_attention).
EXPORT = "v2"
FP32 = "fp32"  # the name's last part for an exported float32 model (an int8 one ends in its quantization scheme)


def default_cache_dir() -> Path:
    """Where exported models live: $XDG_CACHE_HOME/lodex or ~/.cache/lodex."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lodex"


class OnnxModel:
    """last_hidden_state of a Hugging Face encoder, computed by an ONNX Runtime session."""

    def __init__(self, path: Path, threads: int, spin: bool = True) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        # Memory patterns are planned and kept per input shape; with batches of every length they pile up
        # (hundreds of MB over a long run) and measured no faster here.
        options.enable_mem_pattern = False
        if not spin:  # idle runtime threads sleep at once instead of spinning on a core the rest of the process needs
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.path = path
        self.alone = not path.stem.endswith(f"-{FP32}")  # int8 (dynamic activations), as load_onnx_model names: inputs alone

    def __call__(self, batch: dict[str, np.ndarray], run_options: Any = None) -> np.ndarray:
        """(batch, tokens, hidden) float32 for the tokenizer's numpy output. An int8 model runs each input alone,
        without its padding: its activations are quantized with one scale per tensor, measured on the run's whole
        input, so in a batch a text's vector would depend on the texts beside it (cosine 0.9988 on average, down to
        0.997, to the same text alone) and a search's results on the queries that came with it; alone, the same text
        always gives the same vector, at 0.96-0.99x the batched speed here (docs/benchmarks.md, encoding speed)."""
        feeds = {name: batch[name].astype(np.int64, copy=False) for name in self.inputs}
        if not self.alone or len(feeds["attention_mask"]) < 2:
            return cast(np.ndarray, self.session.run(None, feeds, run_options)[0])
        mask = feeds["attention_mask"]
        if not mask.any(axis=1).all():  # an input without tokens (none of lodex's): as one batch
            return cast(np.ndarray, self.session.run(None, feeds, run_options)[0])
        out: np.ndarray | None = None
        for i, row in enumerate(mask):
            real = np.flatnonzero(row)
            span = slice(int(real[0]), int(real[-1]) + 1)
            hidden = self.session.run(None, {name: value[i : i + 1, span] for name, value in feeds.items()}, run_options)[0]
            if out is None:
                out = np.zeros((len(mask), mask.shape[1], hidden.shape[-1]), np.float32)
            out[i, span] = hidden[0]
        assert out is not None
        return out

    def release_memory(self, tiny_batch: dict[str, np.ndarray]) -> None:
        """Hand the runtime's working memory (its arena: hundreds of MB after large batches) back: one
        tiny run that shrinks the arena when it ends."""
        import onnxruntime as ort

        options = ort.RunOptions()
        options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        self(tiny_batch, options)


T = TypeVar("T")
R = TypeVar("R")


class SessionPool:
    """Whole batches run in parallel, on one single-threaded session per core (fast mode's "sessions" layout)."""

    def __init__(self, path: Path, workers: int) -> None:
        self.models = [OnnxModel(path, 1) for _ in range(workers)]
        self._free: queue.SimpleQueue[OnnxModel] = queue.SimpleQueue()
        for model in self.models:
            self._free.put(model)
        self._executor = ThreadPoolExecutor(workers, thread_name_prefix="lodex-onnx")

    def map(self, fn: Callable[[OnnxModel, T], R], items: list[T]) -> Iterator[R]:
        """fn(a free session, item) for every item, results in order."""

        def run(item: T) -> R:
            model = self._free.get()
            try:
                return fn(model, item)
            finally:
                self._free.put(model)

        return self._executor.map(run, items)

    def release_memory(self, tiny_batch: dict[str, np.ndarray]) -> None:
        """Each session's working memory handed back (see OnnxModel.release_memory)."""
        for model in self.models:
            model.release_memory(tiny_batch)


def model_inputs(model: Any, tokenizer: Any) -> list[str]:
    """The tokenizer's outputs the model takes (a decoder takes no token_type_ids), in the order the export names them."""
    accepted = inspect.signature(model.forward).parameters
    return [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in tokenizer.model_input_names and n in accepted]


def load_onnx_model(
    model: Any,
    tokenizer: Any,
    fingerprint: str,
    cache_dir: Path | None,
    threads: int,
    int8: bool,
    max_length: int = 512,
    spin: bool = True,
    reduce_range: bool = False,
    ranges: Callable[[], dict[str, Any]] | None = None,
) -> OnnxModel:
    """The ONNX model for this encoder: from the cache, or exported from the loaded torch model into the cache
    first (once: ~5 s; int8 ~20 s: smoothed activations, per-channel int8 weights, dynamic int8 activations);
    `reduce_range`: 7-bit int8 weights (see fast_paths.WEIGHTS); `ranges`: the model's smoothing.input_ranges, if
    the caller has them (else an int8 export measures them)."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError as exc:
        raise ModelError(
            "onnxruntime is not installed (fast mode and quick query encoding need it)",
            'reinstall lodex (pip install -e .), or set encoder.precision = "exact"',
        ) from exc
    cache = cache_dir or default_cache_dir()
    path = cache / f"{fingerprint[:20]}-{EXPORT}-{(SCHEME + ('-r7' if reduce_range else '')) if int8 else FP32}.onnx"
    if not path.exists():
        try:
            cache.mkdir(parents=True, exist_ok=True)
            _export(model, tokenizer, path, int8, max_length, reduce_range, ranges)
        except OSError as exc:
            raise ModelError(f"cannot write the ONNX model to {cache}: {exc.strerror or exc}", "set encoder.cache_dir to a writable folder") from exc
    return OnnxModel(path, threads, spin)


def _export_attention(model: Any) -> Any:
    """The model (a copy: the encoder's own keeps its attention) with eager attention for the export, where the model has
    it: torch exports SDPA with a boolean mask as a mask-to-float Where before and a NaN guard (Where(IsNaN)) after every
    softmax, which took 29% of the int8 model's time here; eager attention adds one float mask (the same function)."""
    try:
        model.set_attn_implementation("eager")
    except (AttributeError, ValueError, ImportError):
        pass  # no choice of attention in this model: exported as it is
    return model


def _export(
    model: Any,
    tokenizer: Any,
    path: Path,
    int8: bool,
    max_length: int,
    reduce_range: bool = False,
    ranges: Callable[[], dict[str, Any]] | None = None,
) -> None:
    """torch → ONNX (fp32, dynamic batch and length) → int8 weights when asked (of the smoothed model),
    written atomically to `path`."""
    import torch

    if int8:  # the ranges measured once for the smoothing: the caller's, when it has them
        model = smoothed_copy(model, tokenizer, max_length, ranges=ranges() if ranges else None)
    else:
        model = copy.deepcopy(model)
    model = _export_attention(model)
    names = model_inputs(model, tokenizer)

    class Hidden(torch.nn.Module):  # type: ignore[misc]  # torch is typed Any (pyproject: not analysed)
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *args: Any) -> Any:
            return self.inner(**dict(zip(names, args))).last_hidden_state

    sample = tokenizer(["a short sentence", "and another, somewhat longer sentence"], padding=True, return_tensors="pt")
    axes = {name: {0: "batch", 1: "tokens"} for name in [*names, "hidden"]}
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".export-") as tmp:
        exported = Path(tmp) / "model.onnx"
        with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                Hidden(model).eval(),
                tuple(sample[n] for n in names),
                str(exported),
                dynamo=False,
                opset_version=17,
                input_names=names,
                output_names=["hidden"],
                dynamic_axes=axes,
            )
        if int8:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quantized = Path(tmp) / "model.int8.onnx"
            logging.disable(logging.WARNING)  # the quantizer's advice lines are not for users
            try:
                quantize_dynamic(str(exported), str(quantized), weight_type=QuantType.QInt8, per_channel=True, reduce_range=reduce_range)
            finally:
                logging.disable(logging.NOTSET)
            exported = quantized
        os.replace(exported, path)
