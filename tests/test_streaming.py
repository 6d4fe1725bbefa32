"""Large plain-text files: streamed reading and chunking, commits in parts, and the size limits."""

import json
from pathlib import Path

import pytest

import lodex.indexer.preparation as preparation
import lodex.indexer.streaming as streaming
from lodex.indexer.chunking.chunker import LEGACY_RULE, Chunker, ChunkRule
from lodex.indexer.pipeline import content_hash
from lodex.indexer.readers.readers import fallback_title
from lodex.indexer.scanner import ScanRules
from tests.conftest import EVALDATA, make_pipeline
from tests.fakes import FakeEncoder


def _long_text(chars: int) -> str:
    with (EVALDATA / "cranfield" / "corpus.jsonl").open() as fh:
        abstracts = [json.loads(line)["text"] for line in fh if line.strip()]
    parts, size, i = [], 0, 0
    while size < chars:
        part = f"Section {i}. " + abstracts[i % len(abstracts)]
        parts.append(part)
        size += len(part) + 2
        i += 1
    return "\n\n".join(parts)


@pytest.fixture
def small_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(streaming, "BLOCK_BYTES", 4_096)
    monkeypatch.setattr(streaming, "WINDOW_CHARS", 20_000)
    monkeypatch.setattr(streaming, "TAIL_CHARS", 3_000)


@pytest.mark.parametrize("rule", [LEGACY_RULE, ChunkRule(whole_tokens=120)])
def test_stream_chunks_equal_whole_text_chunks(tmp_path: Path, small_windows: None, rule: ChunkRule) -> None:
    """...under every rule: the last window of a long text is never one chunk for being short (whole_tokens)."""
    text = _long_text(150_000)
    path = tmp_path / "big.txt"
    path.write_bytes(text.replace("\n", "\r\n").encode("utf-8"))  # CRLF pairs straddle block edges too
    chunker = Chunker(FakeEncoder().token_spans, 60, 8, rule)
    whole = chunker.chunk(text)
    streamed = list(streaming.chunk_stream(chunker, streaming.text_blocks(path)))
    assert [(c.ordinal, c.char_start, c.char_end, c.token_count) for c in streamed] == [
        (c.ordinal, c.char_start, c.char_end, c.token_count) for c in whole
    ]
    assert all(text[c.char_start : c.char_end] == c.text for c in streamed)
    assert streaming.file_digest(path) == content_hash(path.read_bytes())


def test_large_file_is_committed_in_parts_and_searchable(tmp_path: Path, small_windows: None, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    text = _long_text(120_000) + "\n\nThe very last paragraph mentions zanzibar.\n"
    (root / "big.txt").write_text(text)
    (root / "small.txt").write_text("a small note about wings\n")
    encoder = FakeEncoder()
    store, indexer, searcher = make_pipeline(tmp_path / "data", encoder, max_tokens=60, rules=ScanRules(stream_bytes=10_000))
    indexer.flush_tokens = 100  # many parts (of STREAM_PART_FLUSHES flushes each)
    commits_before = store.chunks.version
    summary = indexer.run(root)
    assert summary.added == 2 and not summary.failures
    assert store.chunks.version - commits_before > 10  # the big file went in over many commits
    record = store.document_records()["big.txt"]
    chunks = store.chunks_of_documents([record.id], ["ordinal", "char_start", "char_end", "text"]).to_pylist()
    assert record.chunk_count == len(chunks) > 100 and record.content_hash == content_hash(text.encode())
    assert sorted(c["ordinal"] for c in chunks) == list(range(len(chunks)))
    assert all(text[c["char_start"] : c["char_end"]] == c["text"] for c in chunks)
    assert record.title == fallback_title(text, "big.txt") and record.title.startswith("Section 0.")
    hit = searcher.search("zanzibar", k=1, mode="bm25").results[0]
    assert hit.path == "big.txt" and "zanzibar" in hit.passages[0].text

    calls = encoder.texts_encoded
    (root / "big.txt").rename(root / "moved.txt")  # a rename copies the stored parts: no encoding
    monkeypatch.setattr(preparation, "_COPY_BATCH", 64)  # copied in many parts too
    summary = indexer.run(root)
    assert summary.reused == 1 and encoder.texts_encoded == calls
    moved = store.document_records()["moved.txt"]
    assert moved.chunk_count == record.chunk_count and moved.content_hash == record.content_hash
    assert searcher.search("zanzibar", k=1, mode="bm25").results[0].path == "moved.txt"


def test_a_large_file_failing_midway_leaves_no_partial_version(tmp_path: Path, small_windows: None, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "big.txt").write_text(_long_text(60_000) + "\n\nversion one ends with zanzibar.\n")
    store, indexer, searcher = make_pipeline(tmp_path / "data", FakeEncoder(), max_tokens=60, rules=ScanRules(stream_bytes=10_000))
    indexer.flush_tokens = 100
    indexer.run(root)
    before = store.document_records()["big.txt"]
    (root / "big.txt").write_text(_long_text(90_000) + "\n\nversion two ends with madagascar.\n")
    real_blocks = streaming.text_blocks

    def failing_blocks(path, *args):
        for i, block in enumerate(real_blocks(path, *args)):
            if i == 12:
                raise PermissionError(13, "Permission denied")
            yield block

    monkeypatch.setattr(preparation, "text_blocks", failing_blocks)
    indexer.retries = 0
    summary = indexer.run(root)
    assert "big.txt" in summary.failures and "Permission denied" in summary.failures["big.txt"]
    # a file that cannot be read is dropped like any failed file, and its half-written parts are collected
    assert "big.txt" not in store.document_records()
    assert store.chunks.count_rows() == 0
    monkeypatch.setattr(preparation, "text_blocks", real_blocks)
    summary = indexer.run(root)
    assert summary.added == 1 and searcher.search("madagascar", k=1, mode="bm25").results[0].path == "big.txt"
    assert store.document_records()["big.txt"].content_hash != before.content_hash


def test_size_limits_refuse_without_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "huge.txt").write_text("words " * 40_000)  # 240 kB > max_file_bytes
    (root / "big.md").write_text("# Title\n\n" + "words " * 20_000)  # 120 kB: > max_parsed_bytes, a parsed format
    (root / "fine.txt").write_text("words " * 20_000)  # 120 kB plain text: streamed
    read: list[str] = []
    real_read = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: read.append(self.name) or real_read(self))
    rules = ScanRules(max_file_bytes=200_000, max_parsed_bytes=100_000, stream_bytes=50_000)
    store, indexer, _ = make_pipeline(tmp_path / "data", FakeEncoder(), rules=rules)
    summary = indexer.run(root)
    assert summary.added == 1 and set(summary.failures) == {"huge.txt", "big.md"}
    assert "index.max_file_mb" in summary.failures["huge.txt"]
    assert "index.max_parsed_mb" in summary.failures["big.md"]
    assert "huge.txt" not in read and "big.md" not in read and "fine.txt" not in read  # refused or streamed, never loaded whole
    assert set(store.document_records()) == {"fine.txt"}
