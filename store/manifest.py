"""The index's manifest: its record (origin.json) read once, typed, with what an existing index keeps of it."""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from lodex.store.errors import StoreError
from lodex.store.json_files import read_json_object
from lodex.store.object_store import ObjectStore
from lodex.text.terms import TERMS_VERSION

ORIGIN_FILE = "origin.json"
LateFor = Literal["all", "long"]


def keyword_terms_version(record: dict[str, Any]) -> int:
    """Which keyword terms (`terms.TERMS_VERSION`) an index holds: the version its record names, 1 when none."""
    return int(record.get("keyword_terms", 1))


@dataclass(frozen=True)
class IndexManifest:
    """The record of the index in a data dir, as lodex reads it (`read`: the one place origin.json is read). `record`
    keeps every key as stored, those lodex does not read too; `exists` is False where there is no index yet, and then
    each policy (`precision`, `chunk_rule`, `late_chunking`, `late_for`, `whole_vector_tokens`) answers the configured
    value. An existing index keeps what it was built with, so an upgrade never forces a rebuild."""

    record: dict[str, Any] = field(default_factory=dict)
    exists: bool = False

    @classmethod
    def read(cls, data_dir: Path, remote: ObjectStore | None = None) -> "IndexManifest":
        """The manifest of the index in data_dir (or in `remote`, data_dir its cache: its record pulled there first, the
        record on the store being the one that counts); a StoreError with the fix for a damaged record."""
        if remote is not None:
            remote.pull(ORIGIN_FILE, data_dir)
        path = data_dir / ORIGIN_FILE
        if not path.exists():
            return cls()
        try:
            record = read_json_object(path)
        except (OSError, ValueError) as exc:  # NotAnObject says "not a JSON object"
            raise StoreError(f"cannot read {path}: {exc}", "restore it or rebuild with `lodex index --rebuild`") from exc
        return cls(record, exists=True)

    @staticmethod
    def present(data_dir: Path) -> bool:
        """Whether data_dir holds an index's record (without reading it)."""
        return (data_dir / ORIGIN_FILE).exists()

    @staticmethod
    def present_on(remote: ObjectStore) -> bool:
        """Whether the object store holds an index's record."""
        return remote.get(ORIGIN_FILE) is not None

    # ---- what the record says ------------------------------------------------------------
    def _text(self, key: str) -> str | None:
        value = self.record.get(key)
        return None if value is None else str(value)

    def _number(self, key: str) -> int | None:
        value = self.record.get(key)
        return None if value is None else int(value)

    @property
    def model_id(self) -> str | None:
        """The model the index was built with."""
        return self._text("model_id")

    @property
    def dim(self) -> int | None:
        """The vectors' dimension."""
        return self._number("dim")

    @property
    def recorded_precision(self) -> str | None:
        """How its documents were encoded ("exact" or "fast"; None for a record without one)."""
        return self._text("precision")

    @property
    def quantization(self) -> str | None:
        """Fast mode's int8 scheme, as recorded (None: none recorded)."""
        return self._text("quantization")

    @property
    def fast_quantization(self) -> str | None:
        """The int8 scheme of an index encoded in fast mode (fast mode's paths are chosen among its), else None."""
        return self.quantization if self.recorded_precision == "fast" else None

    @property
    def eos_token(self) -> int | None:
        """The end-of-sequence id appended to every input (None: none)."""
        return self._number("eos_token")

    @property
    def readers(self) -> dict[str, str]:
        """The format readers' versions its text was extracted with ({format: version})."""
        return dict(self.record.get("readers") or {})

    @property
    def terms_version(self) -> int:
        """Which keyword terms the index holds (`keyword_terms_version`); no index yet: today's."""
        return keyword_terms_version(self.record) if self.exists else TERMS_VERSION

    # ---- what an existing index keeps ----------------------------------------------------
    def precision(self, configured: str) -> str:
        """encoder.precision for this index: "auto" resolved to the precision it was built with ("exact", "fast"); for a
        new index it stays "auto" (the encoder takes fast mode when its fidelity gate passes, exact otherwise)."""
        stored = self.recorded_precision
        return stored if configured == "auto" and stored in ("exact", "fast") else configured

    def chunk_rule(self, configured: dict[str, Any] | None) -> dict[str, Any] | None:
        """The chunk rule's record to cut by: the configured one for a new index; an existing index keeps the one it was
        built with (None, the legacy rule, for one from before these options)."""
        if not self.exists:
            return configured
        recorded = self.record.get("chunk_rule")
        return None if recorded is None else dict(recorded)

    def late_chunking(self, configured: bool | Literal["auto"]) -> bool:
        """Whether chunks are pooled late: as configured; "auto": as the index was built (off for a new one)."""
        return "late_chunking" in self.record if configured == "auto" else configured

    def late_for(self, configured: LateFor) -> LateFor:
        """Which documents late chunking takes: an index built with it keeps its rule ("long" recorded as "for")."""
        recorded = self.record.get("late_chunking")
        if not recorded:
            return configured
        return "long" if recorded.get("for") == "long" else "all"

    def whole_vector_tokens(self, configured: int) -> int:
        """The longest input a document's own vector is encoded whole from (0: its chunks' mean): the configured one for
        a new index; an existing index keeps what it was built with (one from before the option: the mean)."""
        if not self.exists:
            return configured
        return int((self.record.get("document_vector") or {}).get("whole_tokens", 0))
