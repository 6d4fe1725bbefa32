"""Layer-streamed encoding, for models larger than memory: every pending batch goes through one layer before the next
layer is read from disk (so the weights are read once per call, not per batch); the next layer is prefetched while the
current one computes, and activations beyond the memory budget spill to a file."""

import logging
import os
import shutil
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from lodex.encoders.errors import ModelError
from lodex.encoders.layer_arch import Skeleton
from lodex.encoders.layer_cache import LayerCache
from lodex.encoders.layer_weights import Prefetcher, TensorSlot, fp32_bytes, read_tensor, tensor_index
from lodex.encoders.settings import EncoderSettings
from lodex.store.heap import release_freed
from lodex.store.system_memory import available_bytes

SPILL_PREFIX = "lodex-stream-spill-"
# Tokens per call (~500 chunks of 128): reading the weights once per call then costs under 2% of the compute even from
# a cold disk (1.5 GB model, bench/indexing/streamed.py), while a stop request or a kill waits for or loses one call's work.
GROUP_TOKENS, GROUP_TOKENS_MIN = 1 << 16, 1 << 14
MIN_AGREEMENT = 0.99  # compressed layers: mean cosine to float32, as fast mode's gate
log = logging.getLogger(__name__)


def memory_budget(budget_mb: int) -> int:
    """The memory budget in bytes: `budget_mb`, or (0) half the memory available at start."""
    return budget_mb << 20 if budget_mb > 0 else available_bytes(4 << 30) // 2


def streaming_reason(model_dir: Path, budget_mb: int, forced: bool) -> str:
    """Why this model should be streamed ('' when it loads whole): forced, or its float32 weights exceed the budget."""
    if forced:
        return "encoder.stream_layers = true"
    try:
        size = fp32_bytes(tensor_index(model_dir))
    except ModelError:
        return ""  # no safetensors: it loads whole, as before
    budget = memory_budget(budget_mb)
    return f"its float32 weights ({size >> 20} MiB) exceed the memory budget ({budget >> 20} MiB)" if size > budget else ""


def clear_spills(spill_dir: Path) -> None:
    """Remove spill files left by runs that were killed (their process gone)."""
    for path in spill_dir.glob(f"{SPILL_PREFIX}*.bin"):
        pid = path.stem.removeprefix(SPILL_PREFIX).partition("-")[0]
        if not (pid.isdigit() and int(pid) != os.getpid() and Path(f"/proc/{pid}").exists()):
            path.unlink(missing_ok=True)


class Activations:
    """The hidden states of every pending batch between layers: in memory, or in a spill file (read and written by
    offset, not memory-mapped, so the spilled part never counts in the process's RSS)."""

    def __init__(self, shapes: list[tuple[int, ...]], limit: int, spill_dir: Path) -> None:
        sizes = [int(np.prod(s)) * 4 for s in shapes]
        self.shapes, self.offsets = shapes, np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64).tolist()
        self.ram: list[Any] = [None] * len(shapes)
        self.path: Path | None = None
        self.fd = -1
        if self.offsets[-1] > limit:
            spill_dir.mkdir(parents=True, exist_ok=True)
            self.path = spill_dir / f"{SPILL_PREFIX}{os.getpid()}-{threading.get_ident()}.bin"
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)

    def put(self, index: int, hidden: Any) -> None:
        """Keep batch `index`'s hidden states."""
        if self.fd < 0:
            self.ram[index] = hidden
            return
        data = np.ascontiguousarray(hidden.numpy(), dtype=np.float32).data.cast("B")
        written = 0
        while written < len(data):
            written += os.pwrite(self.fd, data[written:], self.offsets[index] + written)

    def get(self, index: int) -> Any:
        """Batch `index`'s hidden states."""
        import torch

        if self.fd < 0:
            return self.ram[index]
        array = np.empty(self.shapes[index], dtype=np.float32)
        view, done = array.data.cast("B"), 0
        while done < len(view):
            n = os.preadv(self.fd, [view[done:]], self.offsets[index] + done)
            if n <= 0:
                raise OSError(f"the spill file {self.path} is shorter than written")
            done += n
        return torch.from_numpy(array)

    def close(self) -> None:
        """Drop the hidden states and remove the spill file."""
        self.ram = [None] * len(self.shapes)
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.path is not None:
            self.path.unlink(missing_ok=True)


def _keep_hidden(store: Activations, b: int, hidden: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Batch `b`'s input to the first layer, kept for it."""
    store.put(b, hidden)


def _run_layer(store: Activations, b: int, layer: Any, _: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Batch `b`'s activations through `layer` (its masks and position embeddings in `args`/`kwargs`)."""
    store.put(b, layer(store.get(b), *args, **kwargs))


class StreamedModel:
    """A transformer run a layer at a time from its weight files (float32, or a compressed per-layer copy)."""

    def __init__(self, model_dir: Path, fingerprint: str, budget_mb: int, layer_weights: str, cache_dir: Path, spill_dir: Path) -> None:
        slots = tensor_index(model_dir)
        self.skeleton = Skeleton(model_dir, slots)
        self.config = self.skeleton.config
        self.layer_slots = [self.skeleton.layer_slots(i) for i in range(len(self.skeleton.layers))]
        self.budget = memory_budget(budget_mb)
        self.layer_bytes = max((fp32_bytes(s) for s in self.layer_slots), default=0)
        self.spill_dir = spill_dir
        self.cache: LayerCache | None = None
        self._lock = threading.Lock()
        clear_spills(spill_dir)
        if layer_weights != "fp32":
            self.cache = LayerCache(cache_dir / "layers", fingerprint, layer_weights, self.layer_slots)
            agreement = self.cache.ensure(self._agreement)
            if agreement < MIN_AGREEMENT:
                raise ModelError(
                    f"{layer_weights} layers do not reproduce the model (mean cosine {agreement:.4f} to float32, below {MIN_AGREEMENT})",
                    'set encoder.layer_weights = "int8"' if layer_weights == "int4" else 'set encoder.layer_weights = "fp32"',
                )

    def group_tokens(self) -> int:
        """Tokens worth handing `run` at once: many (the weights are read once per call), bounded by a quarter of the
        spill folder's free space."""
        try:
            free = shutil.disk_usage(self.spill_dir if self.spill_dir.exists() else self.spill_dir.parent).free
        except OSError:
            free = 0
        return max(GROUP_TOKENS_MIN, min(GROUP_TOKENS, free // 4 // (4 * int(self.config.hidden_size))))

    def _slots(self, index: int) -> list[TensorSlot]:
        return self.cache.slots(index) if self.cache is not None else list(self.layer_slots[index].values())

    def _load(self, index: int, compressed: bool) -> dict[str, Any]:
        if compressed and self.cache is not None:
            return self.cache.load(index)
        return {name: read_tensor(slot) for name, slot in self.layer_slots[index].items()}

    def __call__(self, **batch: Any) -> SimpleNamespace:
        """One batch's last_hidden_state, as a transformers model returns it."""
        return SimpleNamespace(last_hidden_state=self.run([batch], lambda i, hidden: hidden)[0])

    def run(self, batches: list[dict[str, Any]], finish: Callable[[int, Any], Any], compressed: bool = True) -> list[Any]:
        """Every batch (tokenizer outputs, torch tensors) through every layer, a layer at a time; `finish(i, hidden)`
        turns batch i's last hidden state into what is kept (its pooled vectors)."""
        import torch

        with self._lock, torch.inference_mode():
            shapes = [(*b["input_ids"].shape, int(self.config.hidden_size)) for b in batches]
            limit = max(0, self.budget - self.skeleton.shell_bytes - 2 * self.layer_bytes)
            store = Activations(shapes, limit, self.spill_dir)
            prefetch = Prefetcher()
            try:
                prefetch.start(self._slots(0))
                for b, batch in enumerate(batches):  # the embeddings: the model's own forward up to its first layer
                    self.skeleton.at_layer(batch, 0, partial(_keep_hidden, store, b))
                for index in range(len(self.skeleton.layers)):
                    prefetch.wait()
                    layer = self.skeleton.real_layer(index, self._load(index, compressed))
                    if index + 1 < len(self.skeleton.layers):
                        prefetch.start(self._slots(index + 1))
                    for b, batch in enumerate(batches):
                        self.skeleton.at_layer(batch, index, partial(_run_layer, store, b, layer))
                    del layer
                    release_freed()
                return [finish(b, self.skeleton.after_layers(batch, store.get(b))) for b, batch in enumerate(batches)]
            finally:
                prefetch.wait()
                store.close()

    def _agreement(self) -> float:
        """Mean cosine between mean-pooled outputs with compressed and with float32 layers, on a few random inputs."""
        import torch

        generator = torch.Generator().manual_seed(0)
        batches = []
        for length in (8, 40, 120):
            ids = torch.randint(0, int(self.config.vocab_size), (2, length), generator=generator)
            mask = torch.ones_like(ids)
            mask[1, length // 2 :] = 0
            batches.append({"input_ids": ids, "attention_mask": mask})

        def pooled(b: int, hidden: Any) -> Any:
            mask = batches[b]["attention_mask"][..., None].float()
            return (hidden * mask).sum(1) / mask.sum(1)

        exact = torch.cat(self.run(batches, pooled, compressed=False))
        approx = torch.cat(self.run(batches, pooled, compressed=True))
        return float(torch.nn.functional.cosine_similarity(exact, approx, dim=1).mean())


def open_streamed(model_dir: Path, cfg: EncoderSettings, fingerprint: str, spill_dir: Path | None) -> StreamedModel | None:
    """The layer-streamed model when `cfg` ([encoder] settings) forces it or the model exceeds the memory budget, else
    None (the model loads whole)."""
    import tempfile

    from lodex.encoders.onnx_model import default_cache_dir
    from lodex.store.errors import ConfigError

    reason = streaming_reason(model_dir, cfg.memory_budget_mb, cfg.stream_layers)
    if not reason:
        return None
    if cfg.precision == "fast":  # "auto" takes exact mode for a streamed model
        raise ConfigError(
            f'encoder.precision = "fast" cannot run a layer-streamed model ({reason})',
            'set encoder.precision = "exact" and encoder.layer_weights = "int8" for compressed streamed layers',
        )
    log.info("the model in %s is layer-streamed from disk: %s", model_dir, reason)
    return StreamedModel(
        model_dir,
        fingerprint,
        cfg.memory_budget_mb,
        cfg.layer_weights,
        Path(cfg.cache_dir).expanduser() if cfg.cache_dir else default_cache_dir(),
        spill_dir or Path(tempfile.gettempdir()),
    )
