"""Tensors read straight from safetensors files by offset (no memory map kept, so nothing lingers in the RSS), and the
next tensors prefetched into the page cache while the current ones compute."""

import json
import os
import struct
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lodex.encoders.errors import ModelError

# safetensors dtype names -> numpy dtypes (bfloat16 is read as its raw 16 bits and widened by hand).
_DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "BF16": np.uint16,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}
_READ_CHUNK = 1 << 22


@dataclass(frozen=True)
class TensorSlot:
    """Where one tensor lies: its file, dtype name, shape and byte range."""

    path: Path
    dtype: str
    shape: tuple[int, ...]
    start: int
    end: int

    @property
    def numel(self) -> int:
        """Number of elements."""
        return int(np.prod(self.shape)) if self.shape else 1


def read_header(path: Path) -> dict[str, TensorSlot]:
    """The tensors of one safetensors file by name, from its header alone."""
    with path.open("rb") as fh:
        (size,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(size))
    base = 8 + size
    return {
        name: TensorSlot(path, info["dtype"], tuple(info["shape"]), base + info["data_offsets"][0], base + info["data_offsets"][1])
        for name, info in header.items()
        if name != "__metadata__"
    }


def tensor_index(model_dir: Path) -> dict[str, TensorSlot]:
    """Every tensor of a model directory's safetensors files, by name."""
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise ModelError(
            f"the model in {model_dir} has no .safetensors weights",
            "streaming reads safetensors files: convert the model, or set encoder.stream_layers = false",
        )
    index: dict[str, TensorSlot] = {}
    for path in files:
        index.update(read_header(path))
    return index


def fp32_bytes(slots: dict[str, TensorSlot]) -> int:
    """Size of these weights in float32 (what they take once loaded for CPU inference)."""
    return sum(4 * s.numel for s in slots.values() if s.dtype.startswith(("F", "BF")))


def read_tensor(slot: TensorSlot) -> Any:  # a torch.Tensor (float weights come back as float32)
    """One tensor read from its file (float weights widened to float32)."""
    import torch

    raw = torch.empty(slot.end - slot.start, dtype=torch.uint8)  # torch's allocator: aligned for its kernels, not zero-filled
    view = raw.numpy().data.cast("B")
    with slot.path.open("rb", buffering=0) as fh:
        fh.seek(slot.start)
        done = 0
        while done < len(view):
            n = fh.readinto(view[done:])
            if not n:
                raise ModelError(f"{slot.path} is shorter than its header says", "re-download or rebuild the model files")
            done += n
    array: np.ndarray = raw.numpy().view(_DTYPES[slot.dtype]).reshape(slot.shape)
    if slot.dtype == "BF16":
        array = (array.astype(np.uint32) << 16).view(np.float32)
    elif slot.dtype in ("F16", "F64"):
        array = array.astype(np.float32)
    return torch.from_numpy(array)  # shares `raw`'s memory: freed with it


def _warm(slots: list[TensorSlot]) -> None:
    """Ask the kernel for these byte ranges and read them through once, so they sit in the page cache."""
    scratch = bytearray(_READ_CHUNK)
    for slot in slots:
        try:
            fd = os.open(slot.path, os.O_RDONLY)
        except OSError:
            continue
        try:
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(fd, slot.start, slot.end - slot.start, os.POSIX_FADV_WILLNEED)
            offset = slot.start
            while offset < slot.end:
                n = os.preadv(fd, [memoryview(scratch)[: min(_READ_CHUNK, slot.end - offset)]], offset)
                if n <= 0:
                    break
                offset += n
        finally:
            os.close(fd)


class Prefetcher:
    """Reads the next layer's bytes into the page cache on a background thread while the current layer computes."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None

    def start(self, slots: list[TensorSlot]) -> None:
        """Begin warming these tensors (waiting for the previous warm-up first)."""
        self.wait()
        self._thread = threading.Thread(target=_warm, args=(slots,), name="lodex-layer-prefetch", daemon=True)
        self._thread.start()

    def wait(self) -> None:
        """Block until the current warm-up is done."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None


def evict(paths: list[Path]) -> None:
    """Drop these files from the page cache (a cold start, for benchmarks); no root needed."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
