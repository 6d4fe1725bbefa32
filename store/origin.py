"""The index's origin: which encoder and chunking built it, recorded with it and checked on open."""

import json
import os
from importlib import metadata
from pathlib import Path
from typing import Any

from lodex.store.errors import OriginMismatchError, StoreError

ORIGIN_FILE = "origin.json"
# Keys that must match for vectors to be comparable; the rest (library versions, dates) is informative.
_MUST_MATCH = (
    "model_id", "model_fingerprint", "dim", "pooling", "normalize", "max_length", "precision", "quantization",
    "query_prefix", "document_prefix", "chunk_tokens", "chunk_overlap", "title_prefix",
)
_LIBRARIES = ("lodex", "torch", "transformers", "tokenizers", "lancedb", "faiss-cpu", "pyarrow")


def library_versions() -> dict[str, str]:
    """Installed versions of the libraries whose behaviour shapes the index."""
    versions = {}
    for name in _LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def make_origin(encoder_origin: dict[str, Any], chunk_tokens: int, chunk_overlap: int, title_prefix: bool = False) -> dict[str, Any]:
    """The full origin record for an index built with this encoder and chunking (title_prefix recorded only
    when on, so indexes from before the option open unchanged)."""
    origin = {**encoder_origin, "chunk_tokens": chunk_tokens, "chunk_overlap": chunk_overlap, "libraries": library_versions()}
    return origin | ({"title_prefix": True} if title_prefix else {})


def read_origin(data_dir: Path) -> dict[str, Any] | None:
    """The recorded origin, or None for a data dir that holds no index yet."""
    path = data_dir / ORIGIN_FILE
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise StoreError(f"cannot read {path}: {exc}", "restore it or rebuild with `lodex index --rebuild`") from exc


def write_json_atomic(path: Path, value: Any) -> None:
    """Write JSON through a temporary file and rename, so readers never see half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value, indent=2, sort_keys=True))
    os.replace(tmp, path)


def check_origin(stored: dict[str, Any], current: dict[str, Any], data_dir: Path) -> None:
    """Raise OriginMismatchError when `current` cannot search or extend an index built with `stored`."""
    diffs = [f"{key}: index has {stored.get(key)!r}, configured {current.get(key)!r}"
             for key in _MUST_MATCH if stored.get(key) != current.get(key)]
    if diffs:
        raise OriginMismatchError(
            f"the index in {data_dir} was built with other encoder or chunking settings ({'; '.join(diffs)})",
            "restore the settings it was built with, use another --data-dir, or rebuild it with `lodex index --rebuild`",
        )
