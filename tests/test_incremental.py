"""Incremental indexing by content: what is (not) encoded again, renames, copies, swaps, deletes, bad files."""

import json
import os
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lodex.indexer.scanner import ScanRules
from lodex.store.errors import StoreError
from lodex.store.schema import chunks_schema
from tests.conftest import make_pipeline
from tests.fakes import FakeEncoder
from tests.invariants import check_index


def _write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _doc_text(topic: str, n: int = 30) -> str:
    return "\n\n".join(f"Paragraph {i} about {topic}: " + " ".join(f"{topic}{j}" for j in range(20)) + "." for i in range(n))


def _indexed(tmp_path: Path, files: dict[str, str], rules: ScanRules | None = None):
    """Write `files` under tmp_path/docs, index them with the fake encoder; return root, encoder, store, indexer, searcher."""
    root, encoder = tmp_path / "docs", FakeEncoder()
    root.mkdir(exist_ok=True)
    for rel, text in files.items():
        _write(root, rel, text)
    store, indexer, searcher = make_pipeline(tmp_path / "data", encoder, rules=rules)
    first = indexer.run(root)
    return root, encoder, store, indexer, searcher, first


def test_unchanged_files_are_never_encoded_again(tmp_path: Path) -> None:
    root, encoder, store, indexer, _, first = _indexed(tmp_path, {f"d{i}.txt": _doc_text(f"topic{i}") for i in range(5)})
    assert first.added == 5 and encoder.texts_encoded > 0
    encoded = encoder.texts_encoded
    second = indexer.run(root)
    assert encoder.texts_encoded == encoded
    assert second.unchanged == 5 and second.added == second.updated == 0
    os.utime(root / "d0.txt", (1, 1))  # touched, same content: hashed, not encoded
    third = indexer.run(root)
    assert encoder.texts_encoded == encoded and third.unchanged == 5
    assert len(check_index(store, root, encoder=FakeEncoder())) == 5


def test_changed_file_replaces_its_chunks(tmp_path: Path) -> None:
    root, encoder, store, indexer, searcher, _ = _indexed(tmp_path, {"a.txt": _doc_text("alpha"), "b.txt": _doc_text("beta")})
    before = encoder.texts_encoded
    _write(root, "a.txt", _doc_text("gamma", 10))
    summary = indexer.run(root)
    assert summary.updated == 1 and summary.unchanged == 1
    assert encoder.texts_encoded - before == store.document_records()["a.txt"].chunk_count
    hit = searcher.search("gamma3 gamma4", k=1).results[0]
    assert hit.path == "a.txt" and "gamma" in hit.passages[0].text
    assert all("alpha" not in p.text for r in searcher.search("alpha3 alpha4", k=2).results for p in r.passages)
    check_index(store, root, encoder=FakeEncoder())


def _varied_paragraphs(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [f"Paragraph {i}: " + " ".join(f"w{i}x{j}" for j in range(rng.randint(8, 70))) + "." for i in range(n)]


@pytest.mark.parametrize("edit", ["middle", "append"])
def test_an_edit_re_encodes_only_the_chunks_it_touches(tmp_path: Path, edit: str) -> None:
    paragraphs = _varied_paragraphs(60)
    root, encoder, store, indexer, searcher, _ = _indexed(tmp_path, {"long.txt": "\n\n".join(paragraphs)})
    chunks = store.document_records()["long.txt"].chunk_count
    assert chunks >= 15
    before = encoder.texts_encoded
    new = "A brand new paragraph about zeppelins and airships floating over the sea."
    if edit == "middle":
        paragraphs[30] = new
    else:
        paragraphs.append(new)
    _write(root, "long.txt", "\n\n".join(paragraphs))
    summary = indexer.run(root)
    assert summary.updated == 1
    re_encoded = encoder.texts_encoded - before
    assert 1 <= re_encoded <= (chunks // 2 if edit == "middle" else 2), re_encoded
    texts = store.chunks_of_documents([store.document_records()["long.txt"].id], ["text", "content_hash"])
    current = store.document_records()["long.txt"].content_hash
    assert any("zeppelins" in t for t, h in zip(texts["text"].to_pylist(), texts["content_hash"].to_pylist()) if h == current)
    check_index(store, root, encoder=FakeEncoder())


def test_deleted_file_disappears_from_results(tmp_path: Path) -> None:
    root, _, store, indexer, searcher, _ = _indexed(tmp_path, {"keep.txt": _doc_text("keep"), "gone.txt": _doc_text("gone")})
    (root / "gone.txt").unlink()
    summary = indexer.run(root)
    assert summary.deleted == 1
    assert [r.path for r in searcher.search("gone1 gone2", k=5).results] == ["keep.txt"]
    assert set(check_index(store, root, encoder=FakeEncoder())) == {"keep.txt"}


def test_rename_and_move_reuse_vectors(tmp_path: Path) -> None:
    files = {"a.txt": _doc_text("alpha"), "sub/b.md": "# Beta\n\n" + _doc_text("beta")}
    root, encoder, store, indexer, searcher, _ = _indexed(tmp_path, files)
    old = store.document_records()
    encoded = encoder.texts_encoded
    (root / "a.txt").rename(root / "renamed.txt")
    (root / "moved").mkdir()
    (root / "sub/b.md").rename(root / "moved/b.md")
    summary = indexer.run(root)
    assert encoder.texts_encoded == encoded, "a rename must not re-encode"
    assert summary.reused == 2 and summary.deleted == 2
    new = store.document_records()
    assert set(new) == {"renamed.txt", "moved/b.md"}
    assert new["moved/b.md"].title == "Beta" and new["renamed.txt"].chunk_count == old["a.txt"].chunk_count
    assert searcher.search("beta5 beta6", k=1).results[0].path == "moved/b.md"
    check_index(store, root, encoder=FakeEncoder())


def test_identical_content_under_two_paths_is_two_documents(tmp_path: Path) -> None:
    root, encoder, store, indexer, searcher, _ = _indexed(tmp_path, {"one.txt": _doc_text("same")})
    encoded = encoder.texts_encoded
    _write(root, "two.txt", _doc_text("same"))
    indexer.run(root)
    assert encoder.texts_encoded == encoded
    paths = sorted(r.path for r in searcher.search("same1 same2", k=5).results)
    assert paths == ["one.txt", "two.txt"]
    (root / "one.txt").unlink()
    indexer.run(root)
    assert [r.path for r in searcher.search("same1 same2", k=5).results] == ["two.txt"]
    check_index(store, root, encoder=FakeEncoder())


def test_swapped_contents_follow_their_paths(tmp_path: Path) -> None:
    root, encoder, store, indexer, searcher, _ = _indexed(tmp_path, {"a.txt": _doc_text("alpha"), "b.txt": _doc_text("beta")})
    encoded = encoder.texts_encoded
    _write(root, "a.txt", _doc_text("beta"))
    _write(root, "b.txt", _doc_text("alpha"))
    summary = indexer.run(root)
    assert summary.updated == 2 and encoder.texts_encoded == encoded
    assert searcher.search("alpha1 alpha2", k=1).results[0].path == "b.txt"
    assert searcher.search("beta1 beta2", k=1).results[0].path == "a.txt"
    hashes = check_index(store, root, encoder=FakeEncoder())
    assert hashes["a.txt"] != hashes["b.txt"]


def test_bad_files_are_recorded_and_the_rest_indexes(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "image.txt").write_bytes(b"\x89PNG\x00\x00\x00" + os.urandom(2000))
    (root / "big.txt").write_text("x " * 60_000)
    (root / "broken.json").write_text('{"a": ')
    _, _, store, _, _, summary = _indexed(tmp_path, {"good.txt": _doc_text("good")}, ScanRules(max_file_bytes=100_000))
    assert summary.added == 1
    assert set(summary.failures) == {"image.txt", "big.txt", "broken.json"}
    assert "binary" in summary.failures["image.txt"]
    assert "too large" in summary.failures["big.txt"]
    assert "invalid JSON" in summary.failures["broken.json"]
    assert set(check_index(store, encoder=FakeEncoder())) == {"good.txt"}


def test_file_that_turns_bad_leaves_the_index(tmp_path: Path) -> None:
    root, _, store, indexer, _, _ = _indexed(tmp_path, {"doc.txt": _doc_text("fine")})
    (root / "doc.txt").write_bytes(b"\x00\x01binary now" * 100)
    summary = indexer.run(root)
    assert "doc.txt" in summary.failures
    assert check_index(store, encoder=FakeEncoder()) == {}


def test_hidden_and_git_files_are_skipped(tmp_path: Path) -> None:
    files = {"seen.md": "visible text", ".hidden.md": "hidden", ".git/notes.txt": "git", ".cache/x.txt": "cached", "skip/me.txt": "excluded"}
    _, _, store, _, _, _ = _indexed(tmp_path, files, ScanRules(exclude=["skip/*"]))
    assert set(check_index(store, encoder=FakeEncoder())) == {"seen.md"}


def test_interrupted_commit_is_collected_on_next_run(tmp_path: Path) -> None:
    """Chunks written without their document row (a crash before the commit point) never show up."""
    root, encoder, store, indexer, searcher, _ = _indexed(tmp_path, {"a.txt": _doc_text("alpha")})
    ghost = pa.Table.from_pylist(
        [
            {
                "id": 42,
                "document_id": "nope",
                "content_hash": "x",
                "ordinal": 0,
                "char_start": 0,
                "char_end": 5,
                "token_count": 1,
                "text": "alpha1 alpha2 alpha3",
                "vector": np.ones(encoder.dim, np.float32) / 8,
            }
        ],
        schema=chunks_schema(encoder.dim),
    )
    store.chunks.add(ghost)  # by the process that crashed: the next run is another process's, with its own store handle
    assert [r.path for r in searcher.search("alpha1 alpha2 alpha3", k=5).results] == ["a.txt"]
    store, indexer, _ = make_pipeline(tmp_path / "data", encoder)
    indexer.run(root)
    check_index(store, root, encoder=FakeEncoder())


def test_a_commit_failing_after_its_chunks_leaves_them_to_the_next_collection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In one process: the chunks of a commit whose document rows failed are collected by a later run of the same handle,
    which after its first collection looks only at the documents its commits touched."""
    root, encoder, store, indexer, _, _ = _indexed(tmp_path, {"a.txt": _doc_text("alpha"), "b.txt": _doc_text("beta")})
    _write(root, "a.txt", _doc_text("gamma"))
    real = store.documents.merge_insert

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(store.documents, "merge_insert", fail)
    with pytest.raises(StoreError):
        indexer.run(root)
    monkeypatch.setattr(store.documents, "merge_insert", real)
    assert store.chunks.count_rows() > store.counts()["chunks"]  # the failed commit's chunks, with no document row
    indexer.run(root)
    check_index(store, root, encoder=FakeEncoder())
    assert store.chunks.count_rows() == store.counts()["chunks"]


def test_title_prefix_is_encoded_and_recorded(tmp_path: Path) -> None:
    from lodex.api.factory import build_encoder, build_indexer, open_store
    from lodex.api.settings import Settings
    from lodex.store.errors import OriginMismatchError

    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.md").write_text("# Wings\n\nLift and drag of swept wings.\n\nA second paragraph on flutter.")
    settings = Settings(base_dir=tmp_path)
    settings.encoder.backend, settings.chunking.title_prefix, settings.chunking.late = "fake", True, False
    encoder = build_encoder(settings)
    seen: list[str] = []
    real_embed = encoder.embed
    encoder.embed = lambda texts, **kw: seen.extend(texts) or real_embed(texts, **kw)  # type: ignore[method-assign]
    build_indexer(settings, encoder, open_store(settings, encoder, tmp_path / "data", create=True)).run(root)
    assert seen and all(t.startswith("Wings\n\n") for t in seen)
    assert json.loads((tmp_path / "data" / "origin.json").read_text())["title_prefix"] is True
    settings.chunking.title_prefix = False
    with pytest.raises(OriginMismatchError, match="title_prefix"):
        open_store(settings, encoder, tmp_path / "data", create=False)


def test_the_writer_keeps_its_document_records_across_its_own_optimize(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A compaction changes the documents table's version, not its rows: the writer's next run does not read every
    document again (~0.7 s of CPU at 41,940 documents, after each optimize while serving)."""
    from lodex.store.lance_store import LanceStore

    root, _, store, indexer, _, _ = _indexed(tmp_path, {"a.txt": _doc_text("alpha"), "b.txt": _doc_text("beta")})
    _write(root, "a.txt", _doc_text("gamma"))
    indexer.run(root, only=["a.txt"])  # a patched version of the records is kept
    before = store.documents.version
    store.optimize()
    assert store.documents.version > before
    reads: list[int] = []
    full_read = store.scan_documents
    monkeypatch.setattr(store, "scan_documents", lambda *args, **kw: reads.append(1) or full_read(*args, **kw))
    records = store.document_records()
    assert not reads
    assert records == LanceStore(tmp_path / "data", store.dim).document_records()
