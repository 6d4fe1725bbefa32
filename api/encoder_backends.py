"""The encoder backends by name (`encoder.backend`, or a plug-in's `module:callable`) and the [encoder] settings an index's encoder is built with."""

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import cast

from lodex.api.model.cache import model_path
from lodex.api.settings import EncoderSettings, Settings
from lodex.encoders.encoder import Encoder
from lodex.store.errors import ConfigError
from lodex.store.manifest import IndexManifest


def transformers_encoder(cfg: EncoderSettings, spill_dir: Path | None = None, quantization: str | None = None) -> Encoder:
    """The full encoder (PyTorch, or the ONNX model it exports), its streamed model spilled in `spill_dir`."""
    from lodex.encoders.transformers_encoder import TransformersEncoder

    return TransformersEncoder(cfg, spill_dir, quantization)


# Encoder backends by name (`encoder.backend`); tests register a deterministic fake here.
ENCODER_BACKENDS: dict[str, Callable[[EncoderSettings], Encoder]] = {"transformers": transformers_encoder}


def encoder_backend(name: str) -> Callable[[EncoderSettings], Encoder]:
    """A registered backend, or `module:callable` for a plug-in encoder (called with the [encoder] settings)."""
    if name in ENCODER_BACKENDS:
        return ENCODER_BACKENDS[name]
    module, _, attr = name.partition(":")
    if attr:
        try:
            return cast(Callable[[EncoderSettings], Encoder], getattr(importlib.import_module(module), attr))
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"cannot load encoder.backend {name!r}: {exc}", "check the module:callable path") from exc
    raise ConfigError(f"unknown encoder.backend {name!r}", f"use one of: {', '.join(ENCODER_BACKENDS)}, or module:callable")


def encoder_settings(settings: Settings, manifest: IndexManifest) -> EncoderSettings:
    """The [encoder] settings as the encoder takes them: a relative encoder.model resolved against the config file's
    folder (a hub id to its copy pulled by `lodex model pull`), and the precision the index of `manifest` keeps
    (`IndexManifest.precision`: "auto" resolved to the one it was built with; "auto" still for a new index)."""
    cfg = settings.encoder
    if cfg.model:
        cfg = cfg.model_copy(update={"model": str(model_path(settings))})
    if (precision := manifest.precision(cfg.precision)) != cfg.precision:
        cfg = cfg.model_copy(update={"precision": precision})
    return cfg
