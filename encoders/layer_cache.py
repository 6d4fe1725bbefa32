"""Compressed per-layer copies of a model's weights, cached on disk once: int8 (per output channel, symmetric) or int4
(groups of 32, packed two per byte); checked against the model at every start and rebuilt when incomplete or stale."""

import json
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np

from lodex.encoders.layer_weights import TensorSlot, read_header, read_tensor

CACHE_VERSION = 1
GROUP = 32  # int4: weights per scale
_MIN_NUMEL = 1024  # smaller tensors (norms, biases) stay float32
log = logging.getLogger(__name__)


def _compressed(slot: TensorSlot) -> bool:
    return len(slot.shape) >= 2 and slot.numel >= _MIN_NUMEL and slot.dtype.startswith(("F", "BF"))


def expected_tensors(name: str, slot: TensorSlot, scheme: str) -> dict[str, list[int]]:
    """The stored tensors (name -> shape) of one weight under `scheme`."""
    if not _compressed(slot):
        return {name: list(slot.shape)}
    rows, cols = slot.shape[0], slot.numel // slot.shape[0]
    if scheme == "int8":
        return {f"{name}.q8": [rows, cols], f"{name}.scale": [rows]}
    groups = -(-cols // GROUP)
    return {f"{name}.q4": [rows, groups * GROUP // 2], f"{name}.scale": [rows, groups]}


def compress(name: str, weight: Any, scheme: str) -> dict[str, Any]:
    """One float32 weight (a torch tensor) as the tensors `scheme` stores."""
    import torch

    if weight.dim() < 2 or weight.numel() < _MIN_NUMEL:
        return {name: weight.contiguous()}
    rows = weight.reshape(weight.shape[0], -1)
    if scheme == "int8":
        scale = rows.abs().amax(dim=1).clamp(min=1e-12) / 127
        return {f"{name}.q8": torch.round(rows / scale[:, None]).clamp(-127, 127).to(torch.int8), f"{name}.scale": scale}
    cols = rows.shape[1]
    padded = torch.nn.functional.pad(rows, (0, -cols % GROUP)).reshape(rows.shape[0], -1, GROUP)
    scale = padded.abs().amax(dim=2).clamp(min=1e-12) / 7
    q = (torch.round(padded / scale[..., None]).clamp(-8, 7) + 8).to(torch.uint8).reshape(rows.shape[0], -1)
    return {f"{name}.q4": (q[:, 0::2] | (q[:, 1::2] << 4)).contiguous(), f"{name}.scale": scale.contiguous()}


def decompress(stored: dict[str, Any], shapes: dict[str, list[int]]) -> dict[str, Any]:
    """The float32 weights (name -> tensor of the model's shape) back from a layer's stored tensors."""
    import torch

    weights = {}
    for name, shape in shapes.items():
        if name in stored:
            weights[name] = stored[name]
        elif f"{name}.q8" in stored:
            weights[name] = (stored[f"{name}.q8"].float() * stored[f"{name}.scale"][:, None]).reshape(shape)
        else:
            packed = stored[f"{name}.q4"]
            q = torch.stack([packed & 15, packed >> 4], dim=2).reshape(packed.shape[0], -1, GROUP).float() - 8
            rows = (q * stored[f"{name}.scale"][..., None]).reshape(packed.shape[0], -1)
            weights[name] = rows[:, : int(np.prod(shape[1:]))].reshape(shape).contiguous()
    return weights


class LayerCache:
    """The `scheme` copies of a model's layers in `root`/<fingerprint>-<scheme>/: a file per layer, manifest last."""

    def __init__(self, root: Path, fingerprint: str, scheme: str, layers: list[dict[str, TensorSlot]]) -> None:
        self.dir = root / f"{fingerprint}-{scheme}"
        self.fingerprint, self.scheme, self.layers = fingerprint, scheme, layers
        self.expected = [{k: v for n, s in layer.items() for k, v in expected_tensors(n, s, scheme).items()} for layer in layers]

    def file(self, index: int) -> Path:
        """Layer `index`'s file."""
        return self.dir / f"layer-{index:04d}.safetensors"

    def manifest(self) -> dict[str, Any]:
        """The manifest as written (empty when there is none)."""
        try:
            return cast(dict[str, Any], json.loads((self.dir / "manifest.json").read_text()))
        except (OSError, ValueError):
            return {}

    def problem(self) -> str:
        """Why the cache cannot be used as it is ('' when it can)."""
        manifest = self.manifest()
        if not manifest:
            return "not built yet" if not self.dir.exists() else "incomplete (no manifest)"
        if manifest.get("fingerprint") != self.fingerprint or manifest.get("version") != CACHE_VERSION:
            return "built from other weights"
        if len(manifest.get("layers", [])) != len(self.layers):
            return f"{len(manifest.get('layers', []))} layers cached, the model has {len(self.layers)}"
        for i, expected in enumerate(self.expected):
            try:
                found = {n: list(s.shape) for n, s in read_header(self.file(i)).items()}
            except (OSError, ValueError):
                return f"layer {i}: file missing or unreadable"
            if found != expected:
                wrong = min(n for n in set(found) | set(expected) if found.get(n) != expected.get(n))
                return f"layer {i}: {wrong} has shape {found.get(wrong)}, the model needs {expected.get(wrong)}"
            if os.path.getsize(self.file(i)) != max((s.end for s in read_header(self.file(i)).values()), default=0):
                return f"layer {i}: file truncated"
        return ""

    def ensure(self, gate: Callable[[], float]) -> float:
        """Use the cache, or (re)build it first, saying why; `gate` measures its agreement with float32 once built.
        Returns that agreement (mean cosine), recorded in the manifest."""
        for stale in self.dir.parent.glob(f"{self.dir.name}.tmp-*"):
            pid = stale.name.rpartition("-")[2]
            if not (pid.isdigit() and Path(f"/proc/{pid}").exists()):
                shutil.rmtree(stale, ignore_errors=True)  # a build killed midway (another process's build in progress stays)
        why = self.problem()
        if why:
            (log.info if why == "not built yet" else log.warning)("%s layer cache in %s %s: rebuilding it", self.scheme, self.dir, why)
            self._build()
        manifest = self.manifest()
        if "agreement" not in manifest:
            manifest["agreement"] = gate()
            _write_json(self.dir / "manifest.json", manifest)
        return float(manifest["agreement"])

    def _build(self) -> None:
        from safetensors.torch import save_file

        tmp = self.dir.with_name(f"{self.dir.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for i, layer in enumerate(self.layers):
            stored: dict[str, Any] = {}
            for name, slot in layer.items():
                stored.update(compress(name, read_tensor(slot), self.scheme))
            save_file(stored, str(tmp / self.file(i).name))
        shapes = [{n: list(s.shape) for n, s in layer.items()} for layer in self.layers]
        _write_json(tmp / "manifest.json", {"version": CACHE_VERSION, "fingerprint": self.fingerprint, "scheme": self.scheme, "layers": shapes})
        shutil.rmtree(self.dir, ignore_errors=True)
        try:
            os.replace(tmp, self.dir)
        except OSError:  # another process put its build there meanwhile: the same bytes, use that one
            shutil.rmtree(tmp, ignore_errors=True)

    def load(self, index: int) -> dict[str, Any]:
        """Layer `index`'s float32 weights, decompressed."""
        stored = {n: read_tensor(s) for n, s in read_header(self.file(index)).items()}
        return decompress(stored, {n: list(s.shape) for n, s in self.layers[index].items()})

    def slots(self, index: int) -> list[TensorSlot]:
        """Where layer `index`'s stored bytes lie (to prefetch them)."""
        return list(read_header(self.file(index)).values())


def _write_json(path: Path, value: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value, indent=1))
    os.replace(tmp, path)
