"""The index manifest: origin.json read once into a typed record, and what an existing index keeps of it."""

import json
from pathlib import Path

import pytest

from lodex.store.errors import StoreError
from lodex.store.manifest import ORIGIN_FILE, IndexManifest
from lodex.store.object_store import ObjectStore
from lodex.text.terms import TERMS_VERSION

RECORD = {
    "model_id": "sentence-transformers/all-MiniLM-L6-v2",
    "dim": 384,
    "precision": "fast",
    "quantization": "s8s8",
    "eos_token": 2,
    "keyword_terms": 2,
    "readers": {"pdf": "1"},
    "chunk_rule": {"whole_slack": 8, "overlap_at_breaks": True},
    "late_chunking": {"window_tokens": 256, "margin": 32, "for": "long"},
    "document_vector": {"whole_tokens": 256},
    "from_a_later_lodex": {"kept": [1, 2]},
}


def _written(data_dir: Path, record: object) -> Path:
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / ORIGIN_FILE).write_text(json.dumps(record))
    return data_dir


def test_a_record_reads_typed_and_keeps_the_keys_it_does_not_know(tmp_path: Path) -> None:
    manifest = IndexManifest.read(_written(tmp_path, RECORD))
    assert manifest.exists and manifest.record == RECORD  # nothing lost, a later lodex's keys included
    assert (manifest.model_id, manifest.dim, manifest.recorded_precision) == ("sentence-transformers/all-MiniLM-L6-v2", 384, "fast")
    assert (manifest.quantization, manifest.fast_quantization, manifest.eos_token) == ("s8s8", "s8s8", 2)
    assert (manifest.readers, manifest.terms_version) == ({"pdf": "1"}, 2)


def test_no_record_is_a_new_index_that_takes_what_is_configured(tmp_path: Path) -> None:
    manifest = IndexManifest.read(tmp_path / "nothing")
    assert not manifest.exists and manifest.record == {} and not IndexManifest.present(tmp_path / "nothing")
    assert (manifest.model_id, manifest.dim, manifest.fast_quantization, manifest.terms_version) == (None, None, None, TERMS_VERSION)
    assert manifest.precision("auto") == "auto" and manifest.precision("exact") == "exact"
    assert manifest.chunk_rule({"whole_slack": 4, "overlap_at_breaks": False}) == {"whole_slack": 4, "overlap_at_breaks": False}
    assert manifest.late_chunking("auto") is False and manifest.late_chunking(True) is True
    assert manifest.late_for("all") == "all" and manifest.whole_vector_tokens(512) == 512


@pytest.mark.parametrize("content", ["{not json", "[1, 2]"])
def test_a_damaged_record_is_a_plain_error_with_the_fix(tmp_path: Path, content: str) -> None:
    (tmp_path / ORIGIN_FILE).write_text(content)
    with pytest.raises(StoreError, match="cannot read .*origin.json") as caught:
        IndexManifest.read(tmp_path)
    assert "lodex index --rebuild" in caught.value.one_line()


def test_an_existing_index_keeps_what_it_was_built_with(tmp_path: Path) -> None:
    manifest = IndexManifest.read(_written(tmp_path, RECORD))
    assert manifest.precision("auto") == "fast" and manifest.precision("exact") == "exact"  # only "auto" follows the index
    assert manifest.chunk_rule(None) == RECORD["chunk_rule"]
    assert manifest.late_chunking("auto") is True and manifest.late_chunking(False) is False
    assert manifest.late_for("all") == "long" and manifest.whole_vector_tokens(0) == 256


def test_an_index_from_before_the_options_keeps_the_legacy_choices(tmp_path: Path) -> None:
    manifest = IndexManifest.read(_written(tmp_path, {"model_id": "m", "dim": 8, "precision": "exact", "quantization": "u8s8"}))
    assert manifest.fast_quantization is None and manifest.terms_version == 1  # an exact index: no fast scheme to keep
    assert manifest.chunk_rule({"whole_slack": 4, "overlap_at_breaks": False}) is None  # the legacy rule
    assert manifest.late_chunking("auto") is False and manifest.late_for("long") == "long"
    assert manifest.whole_vector_tokens(256) == 0  # its chunks' mean
    every_document = IndexManifest({"late_chunking": {"window_tokens": 256, "margin": 32}}, exists=True)
    assert every_document.late_for("long") == "all"


class _Bucket(ObjectStore):
    """An object store held in memory: what `get` answers is all a manifest reads of one."""

    def __init__(self) -> None:
        super().__init__("s3://bucket/index")
        self.files: dict[str, bytes] = {}

    def get(self, name: str) -> bytes | None:
        return self.files.get(name)


def test_a_record_on_object_storage_is_pulled_over_the_cached_one(tmp_path: Path) -> None:
    remote, cache = _Bucket(), _written(tmp_path / "cache", {"model_id": "a stale copy"})
    assert not IndexManifest.present_on(remote) and not IndexManifest.read(cache, remote).exists  # none there: the copy goes
    remote.files[ORIGIN_FILE] = json.dumps(RECORD).encode()
    _written(cache, {"model_id": "a stale copy"})
    assert IndexManifest.present_on(remote) and IndexManifest.read(cache, remote).record == RECORD
