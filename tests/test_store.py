"""The store: origin checks on open, FAISS persisted per Lance version and rebuilt when missing or stale."""

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lodex.store import faiss_lifecycle
from lodex.store.ann_policy import AnnPolicy
from lodex.store.errors import OriginMismatchError, StoreError
from lodex.store.lance_store import ChunkOwners, LanceStore
from lodex.store.origin import make_origin
from tests.conftest import make_pipeline
from tests.fakes import FakeEncoder


def _index_folder(tmp_path: Path, encoder: FakeEncoder) -> tuple[LanceStore, Path]:
    root = tmp_path / "docs"
    root.mkdir()
    for i in range(4):
        (root / f"d{i}.txt").write_text(f"document {i} about wings{i} and flow{i}. " * 40)
    store, indexer, _ = make_pipeline(tmp_path / "data", encoder)
    indexer.run(root)
    return store, root


def test_origin_mismatch_is_a_clear_error(tmp_path: Path) -> None:
    encoder = FakeEncoder()
    _index_folder(tmp_path, encoder)
    other = FakeEncoder(dim=128)
    other.model_id = "another-model"
    with pytest.raises(OriginMismatchError) as caught:
        LanceStore.open(tmp_path / "data", make_origin(other.origin(), 64, 4))
    message = caught.value.one_line()
    assert "another-model" in message and "dim" in message and "--rebuild" in message


def test_chunk_settings_are_part_of_the_origin(tmp_path: Path) -> None:
    encoder = FakeEncoder()
    _index_folder(tmp_path, encoder)
    with pytest.raises(OriginMismatchError, match="chunk_tokens"):
        LanceStore.open(tmp_path / "data", make_origin(encoder.origin(), 32, 4))


def test_missing_index_is_reported_when_not_creating(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no index"):
        LanceStore.open(tmp_path / "nothing", make_origin(FakeEncoder().origin(), 64, 4), create=False)


def test_faiss_index_is_persisted_for_the_lance_version(tmp_path: Path) -> None:
    encoder = FakeEncoder()
    store, _ = _index_folder(tmp_path, encoder)
    files = list((tmp_path / "data").glob("chunks.v*.faiss"))
    assert [f.name for f in files] == [f"chunks.v{store.chunks.version}.faiss"]
    reopened = LanceStore(tmp_path / "data", encoder.dim)
    assert len(reopened.vector_index()) == store.counts()["chunks"]


def test_faiss_index_is_rebuilt_when_missing_or_stale(tmp_path: Path) -> None:
    encoder = FakeEncoder()
    store, _ = _index_folder(tmp_path, encoder)
    chunks = store.counts()["chunks"]
    for f in (tmp_path / "data").glob("chunks.v*.faiss"):
        f.unlink()
    assert len(LanceStore(tmp_path / "data", encoder.dim).vector_index()) == chunks
    store.persist_index()
    store.chunks.delete("ordinal = 0")  # Lance moves on without the FAISS file: it is stale now
    rebuilt = LanceStore(tmp_path / "data", encoder.dim).vector_index()
    assert len(rebuilt) == chunks - 4


def test_routine_saves_of_a_slow_to_save_index_come_less_often(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """persist(min_interval_s) also waits 1/SAVE_SHARE times the last save's duration: a big index is not rewritten
    every 30 s while the writer's next commit waits; a forced save (no interval) still happens at once."""
    clock = [1000.0]
    monkeypatch.setattr(faiss_lifecycle.time, "monotonic", lambda: clock[0])
    saves: list[float] = []

    lifecycle = faiss_lifecycle.FaissLifecycle(tmp_path, 8, None, AnnPolicy())
    lifecycle.lend()  # the searchers keep the index: they make the saves asked for, after each write

    def persist(min_interval_s: float = 0.0) -> None:
        lifecycle.persist(min_interval_s)
        if (ticket := lifecycle.save_due()) is not None:  # the keeper's save, which takes 2 s
            saves.append(clock[0])
            clock[0] += 2.0
            lifecycle.saved(ticket, 2.0)
        assert lifecycle.save_due() is None

    persist(30)
    for _ in range(40):  # a commit every 5 s for 200 s
        clock[0] += 5.0
        persist(30)
    gap = 2.0 / faiss_lifecycle.SAVE_SHARE
    assert len(saves) >= 2 and gap > 30 and all(b - a >= gap for a, b in zip(saves, saves[1:]))
    persist()
    assert clock[0] - saves[-1] == 2.0  # at once


def test_chunk_owners_map_ids_to_document_versions_and_back() -> None:
    table = pa.table(
        {
            "id": [30, 10, 20, 40, 50],
            "document_id": ["a", "a", "b", "a", "a"],
            "content_hash": ["h1", "h1", "h9", "h2", "h1"],
            "_rowid": pa.array([7, 3, 9, 1, 5], pa.uint64()),
        }
    )
    owners = ChunkOwners(table)
    ids, scores = owners.ranked(np.array([9, 3, 8, 7, 1], np.uint64), np.array([2.0, 5.0, 9.0, 2.0, 1.0], np.float32))
    assert ids.tolist() == [10, 20, 30, 40] and scores.tolist() == [5.0, 2.0, 2.0, 1.0]  # row 8 unknown; a tie in id order
    assert owners.ids.tolist() == [10, 20, 30, 40, 50] and owners.row_ids.tolist() == [3, 9, 7, 1, 5]
    codes = owners.codes(np.array([10, 20, 40, 99, -1]))
    assert [owners.keys[c].as_py() if c >= 0 else None for c in codes] == ["a:h1", "b:h9", "a:h2", None, None]
    ids, lengths = owners.members(codes[[0, 2, 1]])
    assert ids.tolist() == [30, 10, 50, 40, 20] and lengths.tolist() == [3, 1, 1]  # each in table (ordinal) order
    assert owners.members(np.array([], np.int64))[0].tolist() == []
    empty = ChunkOwners(table.slice(0, 0))
    assert empty.codes(np.array([10])).tolist() == [-1] and len(empty.keys) == 0
    assert empty.ranked(np.array([3], np.uint64), np.array([1.0]))[0].tolist() == []


def test_keyword_hits_and_texts_by_row_id_match_the_chunks_they_name(tmp_path: Path) -> None:
    store, _ = _index_folder(tmp_path, FakeEncoder())
    store.chunks.delete("ordinal = 1")  # a later version: row ids are of the version read
    _, version = store.refresh()
    owners = store.chunk_owners(version)
    rows = store.chunks.search().select(["id", "text"]).limit(None).to_arrow().sort_by("id")
    assert owners.ids.tolist() == rows["id"].to_pylist()
    picked = owners.row_ids[[0, 2, len(owners.row_ids) - 1]]
    got = store.chunks_at_rows(picked, ["id", "text"]).sort_by("id")
    assert got["id"].to_pylist() == sorted(owners.ids[[0, 2, len(owners.ids) - 1]].tolist())
    assert got["text"].to_pylist() == [t for i, t in zip(rows["id"].to_pylist(), rows["text"].to_pylist()) if i in set(got["id"].to_pylist())]
    word = got["text"][0].as_py().split()[0]
    ids, scores = owners.ranked(*store.start_keyword_search([word], 50, version)()[0])
    assert len(ids) and set(ids.tolist()) <= set(owners.ids.tolist()) and list(scores) == sorted(scores, reverse=True)
    texts = store.chunks_by_id(ids.tolist(), ["id", "text"])
    assert all(word.lower() in t.lower() for t in texts["text"].to_pylist())


def test_vendor_failures_of_a_write_become_one_store_error_with_their_cause(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.txt").write_text("gliders and thermals " * 20)
    store, indexer, _ = make_pipeline(tmp_path / "data", FakeEncoder())

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store.chunks, "add", full_disk)
    with pytest.raises(StoreError, match="cannot commit to the index: .*No space left on device") as caught:
        indexer.run(root)
    assert isinstance(caught.value.__cause__, OSError) and caught.value.code == "store_error"
    assert "free space" in caught.value.one_line()


def test_an_index_refuses_a_changed_extraction_and_records_new_readers(tmp_path: Path) -> None:
    from lodex.store.manifest import IndexManifest

    encoder = FakeEncoder()
    old = make_origin(encoder.origin(), 64, 4)  # an index from before readers were recorded
    LanceStore.open(tmp_path / "data", old)
    LanceStore.open(tmp_path / "data", make_origin(encoder.origin(), 64, 4, readers={"pdf": "1", "text": "1"}))
    assert IndexManifest.read(tmp_path / "data").readers == {"pdf": "1", "text": "1"}  # recorded once met
    LanceStore.open(tmp_path / "data", make_origin(encoder.origin(), 64, 4, readers={"pdf": "1", "text": "1", "docx": "1"}))
    with pytest.raises(OriginMismatchError, match="other versions of the pdf reader") as caught:
        LanceStore.open(tmp_path / "data", make_origin(encoder.origin(), 64, 4, readers={"pdf": "2", "text": "1", "docx": "1"}))
    assert "--rebuild" in caught.value.one_line()


def test_only_the_writer_checks_reader_versions(tmp_path: Path) -> None:
    import json

    from lodex.api.factory import open_store
    from lodex.api.settings import Settings

    settings, encoder = Settings(base_dir=tmp_path), FakeEncoder()
    open_store(settings, encoder, tmp_path / "data", create=True)
    origin = json.loads((tmp_path / "data" / "origin.json").read_text())
    origin["readers"]["pdf"] = "0"  # as if an older PDF reader made this index
    (tmp_path / "data" / "origin.json").write_text(json.dumps(origin))
    open_store(settings, encoder, tmp_path / "data", create=False)  # a search reads it
    with pytest.raises(OriginMismatchError, match="pdf reader"):
        open_store(settings, encoder, tmp_path / "data", create=True)  # the writer refuses to extend it


def test_kept_document_records_match_a_full_read_through_runs_of_changes(tmp_path: Path) -> None:
    """A writer keeps document_records and patches them by each commit's rows: after random adds, edits, deletions,
    touches and renames they are what a fresh handle reads, and the stale chunks of each change are collected."""
    import os
    import random

    from lodex.store.base import Store
    from tests.invariants import check_index

    encoder = FakeEncoder()
    root = tmp_path / "docs"
    root.mkdir()
    store, indexer, _ = make_pipeline(tmp_path / "data", encoder)
    rng = random.Random(7)
    for step in range(12):
        names = sorted(p.name for p in root.iterdir())
        action = rng.choice(["add", "add", "edit", "delete", "touch", "rename"]) if names else "add"
        if action == "add":
            (root / f"n{step}.txt").write_text(f"new note {step} on lift{step} and drag{step}. " * rng.randint(5, 60))
        elif action == "edit":
            (root / rng.choice(names)).write_text(f"edited {step} on heat{step}. " * rng.randint(5, 60))
        elif action == "delete":
            (root / rng.choice(names)).unlink()
        elif action == "touch":
            os.utime(root / rng.choice(names), (1_000 + step, 1_000 + step))
        else:
            name = rng.choice(names)
            (root / name).rename(root / f"moved{step}-{name}")
        indexer.run(root)
        assert store.document_records() == Store.document_records(LanceStore(tmp_path / "data", encoder.dim)), action
        check_index(store, root, encoder=FakeEncoder())
        assert store.chunks.count_rows() == store.counts()["chunks"], action  # nothing stale left behind


def test_a_watching_writers_small_updates_save_the_index_at_most_every_save_index_every_s(tmp_path: Path) -> None:
    """A long-lived indexer (watch, serve) has its store save the vector index after small updates at most every
    watch.save_index_every_s (a save at 1M chunks writes ~0.4 GB on the writer's time, beside the queries); `lodex
    index`'s store keeps PERSIST_EVERY_S; a full run still saves at once, and readers catch an older file up."""
    from lodex.api.factory import build_indexer, open_store
    from lodex.store.base import PERSIST_EVERY_S
    from tests.conftest import notes_and_settings

    root, settings = notes_and_settings(tmp_path, 6)
    settings.watch.save_index_every_s = 3600.0
    encoder = FakeEncoder()
    store = open_store(settings, encoder, tmp_path / "data", create=True, long_lived=True)  # as open_app(..., "write", long_lived=True)
    plain = open_store(settings, encoder, tmp_path / "data", create=True)  # as `lodex index`'s
    assert plain.persist_every_s == PERSIST_EVERY_S and store.persist_every_s == 3600.0
    plain.close()
    watching = build_indexer(settings, encoder, store, long_lived=True)
    watching.run(root)  # a full run: saved at once
    saved = store.chunks.version
    assert (tmp_path / "data" / f"chunks.v{saved}.faiss").exists()
    for i in range(2):
        (root / f"{i}.txt").write_text(f"rewritten note {i} about zeppelins " * 4)
        watching.run(root, only=[f"{i}.txt"])
    assert store.chunks.version > saved
    assert sorted(p.name for p in (tmp_path / "data").glob("chunks.v*.faiss")) == [f"chunks.v{saved}.faiss"]  # not saved again
    reader = LanceStore(tmp_path / "data", encoder.dim)
    assert len(reader.vector_index()) == store.counts()["chunks"]  # the older file caught up from Lance
