"""The index's origin: which encoder and chunking built it, recorded with it and checked on open."""

import json
import os
from importlib import metadata
from pathlib import Path
from typing import Any

from lodex.store.errors import OriginMismatchError, StoreError
from lodex.store.manifest import ORIGIN_FILE, IndexManifest
from lodex.store.object_store import ObjectStore
from lodex.text.terms import TERMS_VERSION

# Keys that must match for vectors to be comparable; the rest (library versions, dates) is informative.
_MUST_MATCH = (
    "model_id",
    "model_fingerprint",
    "dim",
    "pooling",
    "normalize",
    "max_length",
    "precision",
    "quantization",
    "query_prefix",
    "document_prefix",
    "eos_token",
    "chunk_tokens",
    "chunk_overlap",
    "title_prefix",
    "late_chunking",
    "layer_weights",
    "chunk_rule",
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


def make_origin(
    encoder_origin: dict[str, Any],
    chunk_tokens: int,
    chunk_overlap: int,
    title_prefix: bool = False,
    readers: dict[str, str] | None = None,
    late: dict[str, Any] | None = None,
    rule: dict[str, Any] | None = None,
    whole_vector: int = 0,
) -> dict[str, Any]:
    """The full origin record for an index built with this encoder and chunking (title_prefix, late chunking's
    windows, a chunk rule other than the legacy one and whole-text document vectors recorded only when on, so indexes
    from before those options open unchanged) and these format readers ({format: version})."""
    origin = {
        **encoder_origin,
        "chunk_tokens": chunk_tokens,
        "chunk_overlap": chunk_overlap,
        "libraries": library_versions(),
        "keyword_terms": TERMS_VERSION,
    }
    return (
        origin
        | ({"title_prefix": True} if title_prefix else {})
        | ({"readers": dict(readers)} if readers else {})
        | ({"late_chunking": dict(late)} if late else {})
        | ({"chunk_rule": dict(rule)} if rule else {})
        | ({"document_vector": {"whole_tokens": whole_vector}} if whole_vector else {})
    )


def write_json_atomic(path: Path, value: Any) -> None:
    """Write JSON through a temporary file and rename, so readers never see half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value, indent=2, sort_keys=True))
    os.replace(tmp, path)


def check_origin(stored: dict[str, Any], current: dict[str, Any], data_dir: Path | str) -> None:
    """Raise OriginMismatchError when `current` cannot search or extend an index built with `stored`."""
    diffs = [f"{key}: index has {stored.get(key)!r}, configured {current.get(key)!r}" for key in _MUST_MATCH if stored.get(key) != current.get(key)]
    if diffs:
        raise OriginMismatchError(
            f"the index in {data_dir} was built with other encoder or chunking settings ({'; '.join(diffs)})",
            "restore the settings it was built with, use another --data-dir, or rebuild it with `lodex index --rebuild`",
        )
    stored_readers, current_readers = stored.get("readers") or {}, current.get("readers") or {}
    changed = sorted(f for f in stored_readers if f in current_readers and stored_readers[f] != current_readers[f])
    if changed:
        raise OriginMismatchError(
            f"the index in {data_dir} holds text extracted by other versions of the {', '.join(changed)} reader"
            f"{'s' if len(changed) > 1 else ''} (its passages' offsets and pages would not match a new extraction)",
            "rebuild it with `lodex index --rebuild`, or use another --data-dir",
        )


def with_readers(stored: dict[str, Any], current: dict[str, Any]) -> dict[str, Any] | None:
    """The stored origin with the reader versions it does not record yet added (formats it never held), or None
    when it already records all of them."""
    stored_readers = stored.get("readers") or {}
    added = {f: v for f, v in (current.get("readers") or {}).items() if f not in stored_readers}
    return {**stored, "readers": {**stored_readers, **added}} if added else None


def settle_origin(
    data_dir: Path, origin: dict[str, Any], create: bool, remote: ObjectStore | None, stored: IndexManifest | None = None
) -> IndexManifest:
    """Check the index in data_dir (or in `remote`, data_dir its cache), its manifest `stored` (read there when None),
    against `origin`, an encoder's; record it for a new index when `create` allows (else StoreError), and the readers a
    writer meets for the first time. The index's manifest as settled (its record as it now stands)."""
    where = remote.uri if remote is not None else data_dir
    if stored is None:
        stored = IndexManifest.read(data_dir, remote)  # the record on the store is the one that counts
    if not stored.exists:
        if not create:
            raise StoreError(f"no index in {where}", "build one first with `lodex index DIR`")
        data_dir.mkdir(parents=True, exist_ok=True)
        _record_origin(data_dir, origin, remote)
        return IndexManifest(origin, exists=True)
    check_origin(stored.record, origin, where)
    if create and (updated := with_readers(stored.record, origin)) is not None:
        _record_origin(data_dir, updated, remote)  # the writer records readers met for the first time
        return IndexManifest(updated, exists=True)
    return stored


def _record_origin(data_dir: Path, origin: dict[str, Any], remote: ObjectStore | None) -> None:
    write_json_atomic(data_dir / ORIGIN_FILE, origin)
    if remote is not None:
        remote.push(data_dir / ORIGIN_FILE)
