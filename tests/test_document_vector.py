"""chunking.document_vector (issue 39): a short document cut in chunks gets its whole text encoded as its own vector on
every path that writes its row (a run, an edit, a copy, a pushed text); a long one keeps its chunks' mean; an index
keeps the rule it was built with."""

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lodex.api.application import Application
from lodex.api.factory import open_app
from lodex.api.settings import Settings
from lodex.encoders.model_languages import unread_languages
from lodex.encoders.transformers_encoder import bundled_model_dir
from lodex.indexer.chunking.chunker import Chunker
from lodex.indexer.encoding_jobs import TitleLead, WholeText
from tests.conftest import EVALDATA
from tests.fakes import FakeEncoder


def _words(n: int, start: int = 0) -> str:
    return " ".join(f"w{i}" for i in range(start, start + n))


def test_whole_text_takes_documents_of_two_or_more_chunks_that_fit_one_input() -> None:
    encoder = FakeEncoder()  # one token a word; 130 tokens an input, 2 of them special
    chunker = Chunker(encoder.token_spans, max_tokens=40, overlap=8)
    whole = WholeText(encoder, TitleLead(False), 130)
    for n, expected in ((40, False), (41, True), (128, True), (129, False), (2_000, False)):
        text = f"  {_words(n)}\n"
        got = whole(text, chunker.chunk(text), "Title")
        assert (got is not None) == expected, n
        if got is not None:
            assert got == (text.strip(), n)  # from the first chunk's start to the last one's end
    led = WholeText(encoder, TitleLead(True), 130)  # "Title\n\n" takes a token of the input
    assert led(_words(127), chunker.chunk(_words(127)), "Title") is not None
    assert led(_words(128), chunker.chunk(_words(128)), "Title") is None
    assert WholeText(encoder, TitleLead(False), 100)(_words(99), chunker.chunk(_words(99)), "") is None  # within input_tokens
    hostile = "x" * 9_000 + " " + _words(60)  # a "word" far longer than any token: not tokenized again, the mean
    assert whole(hostile, chunker.chunk(hostile), "") is None
    text = _words(60)
    unread = WholeText(encoder, TitleLead(False), 130, frozenset({"zh", "ja"}))  # scripts the model cannot read: the mean
    assert unread(text, chunker.chunk(text), "", "zh") is None and unread(text, chunker.chunk(text), "", "ja") is None
    assert unread(text, chunker.chunk(text), "", "en") is not None and unread(text, chunker.chunk(text), "", None) is not None


def test_the_languages_a_model_cannot_read_are_those_of_other_scripts_it_does_not_declare() -> None:
    assert unread_languages(frozenset({"en"})) >= {"zh", "ja", "ko", "th"} and "de" not in unread_languages(frozenset({"en"}))
    assert "zh" not in unread_languages(frozenset({"en", "zh"})) and "ja" in unread_languages(frozenset({"en", "zh"}))
    assert unread_languages(None) == frozenset()  # a model that does not say: every language taken as covered


@pytest.fixture(scope="module")
def texts(real_encoder) -> dict[str, str]:
    """A short abstract (two chunks, one window), a long document, a one-chunk note and a spaceless Chinese text."""
    with (EVALDATA / "cranfield" / "corpus.jsonl").open() as fh:
        abstracts = [json.loads(line)["text"].strip() for _, line in zip(range(300), fh)]
    lengths = [len(s) for s in real_encoder.token_spans(abstracts)]
    return {
        "short.txt": next(t for t, n in zip(abstracts, lengths) if 170 <= n <= 230),
        "long.txt": "\n\n".join(abstracts[:8]),
        "one.txt": next(t for t, n in zip(abstracts, lengths) if 40 <= n <= 90),
        "向量.txt": "向量检索把文档切成段落，再为每一段计算向量。" * 6,
    }


def _settings(tmp_path: Path, name: str, **chunking: Any) -> Settings:
    settings = Settings(base_dir=tmp_path)
    settings.index.data_dir = str(tmp_path / name)
    for key, value in chunking.items():
        setattr(settings.chunking, key, value)
    return settings


def _vectors(side: Application) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each document's stored vector and its chunks' vectors in order, by path."""
    docs = side.store.scan_documents(["id", "path", "vector"]).to_pylist()
    chunks = side.store.chunks_of_documents([d["id"] for d in docs], ["document_id", "ordinal", "vector"]).to_pylist()
    out = {}
    for d in docs:
        own = sorted((c["ordinal"], c["vector"]) for c in chunks if c["document_id"] == d["id"])
        out[d["path"]] = (np.asarray(d["vector"], np.float32), np.asarray([v for _, v in own], np.float32))
    return out


def _mean(vectors: np.ndarray) -> np.ndarray:
    mean = vectors.mean(axis=0)
    return mean / np.linalg.norm(mean)


def _folder(tmp_path: Path, texts: dict[str, str]) -> Path:
    root = tmp_path / "docs"
    root.mkdir(parents=True)
    for name, text in texts.items():
        (root / name).write_text(text)
    return root


def test_a_short_documents_vector_is_its_whole_text_encoded(real_encoder, texts: dict[str, str], tmp_path: Path) -> None:
    root = _folder(tmp_path, texts)
    with open_app(_settings(tmp_path, "data"), "write", root) as side:
        summary = side.indexer.run(root)
        stored = _vectors(side)
        origin = json.loads((tmp_path / "data" / "origin.json").read_text())
    assert origin["document_vector"] == {"whole_tokens": 256} and "late_chunking" not in origin  # the new index's defaults
    vector, chunks = stored["short.txt"]
    assert len(chunks) == 2
    np.testing.assert_allclose(vector, real_encoder.embed([texts["short.txt"]])[0], atol=2e-5)
    assert float(vector @ _mean(chunks)) < 0.999  # not the mean
    # a long document, a one-chunk one, and a Chinese one (two chunks; the bundled English model cannot read it)
    for name in ("long.txt", "one.txt", "向量.txt"):
        vector, chunks = stored[name]
        np.testing.assert_allclose(vector, _mean(chunks), atol=1e-6)
    assert len(stored["one.txt"][1]) == 1 and len(stored["long.txt"][1]) > 8 and len(stored["向量.txt"][1]) == 2
    with open_app(_settings(tmp_path, "data"), "write", root) as side:  # the encoded tokens count the whole text too
        chunk_tokens = int(sum(side.store.scan_documents(["token_count"]).column("token_count").to_pylist()))
    assert summary.tokens == chunk_tokens + len(real_encoder.token_spans([texts["short.txt"]])[0])


def test_a_model_that_reads_chinese_gets_a_chinese_documents_whole_text(real_encoder, texts: dict[str, str], tmp_path: Path) -> None:
    model = tmp_path / "model"
    shutil.copytree(bundled_model_dir(), model)
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps(config | {"lodex_languages": ["en", "zh"]}))
    root = _folder(tmp_path, {"向量.txt": texts["向量.txt"]})
    settings = _settings(tmp_path, "data")
    settings.encoder.model = str(model)
    with open_app(settings, "write", root) as side:
        side.indexer.run(root)
        vector, chunks = _vectors(side)["向量.txt"]
    assert len(chunks) == 2
    np.testing.assert_allclose(vector, real_encoder.embed([texts["向量.txt"]])[0], atol=2e-5)


def test_edits_copies_and_pushed_texts_get_the_same_vector_as_a_fresh_index(real_encoder, texts: dict[str, str], tmp_path: Path) -> None:
    root = _folder(tmp_path, texts)
    settings = _settings(tmp_path, "data")
    edited = texts["short.txt"] + " The results agree with experiment."
    with open_app(settings, "write", root) as side:
        side.indexer.run(root)
        first = _vectors(side)
        (root / "copy.txt").write_text(texts["short.txt"])  # a copy: its vectors re-used, the document's own too
        (root / "short.txt").write_text(edited)  # an edit: its unchanged first chunk kept, its whole text encoded again
        (root / "long.txt").write_text(texts["long.txt"] + "\n\nA closing remark.")
        summary = side.indexer.run(root)
        assert (summary.reused, summary.updated) == (1, 2)
        side.indexer.index_text("pushed", texts["short.txt"])
        grown = _vectors(side)
    fresh = _folder(
        tmp_path / "fresh", {"short.txt": edited, "long.txt": texts["long.txt"] + "\n\nA closing remark.", "copy.txt": texts["short.txt"]}
    )
    with open_app(_settings(tmp_path / "fresh", "data"), "write", fresh) as side:
        side.indexer.run(fresh)
        built = _vectors(side)
    for name in ("short.txt", "long.txt", "copy.txt"):
        np.testing.assert_allclose(grown[name][0], built[name][0], atol=2e-5, err_msg=name)
    np.testing.assert_allclose(grown["short.txt"][0], real_encoder.embed([edited])[0], atol=2e-5)
    np.testing.assert_array_equal(grown["copy.txt"][0], first["short.txt"][0])  # copied, not recomputed
    pushed = next(v for path, v in grown.items() if path.endswith("pushed"))
    np.testing.assert_allclose(pushed[0], real_encoder.embed([texts["short.txt"]])[0], atol=2e-5)


def test_an_index_keeps_the_document_vector_it_was_built_with(texts: dict[str, str], tmp_path: Path) -> None:
    root = _folder(tmp_path, {"one.txt": texts["one.txt"]})
    with open_app(_settings(tmp_path, "data", document_vector="mean"), "write", root) as side:
        side.indexer.run(root)
    origin = json.loads((tmp_path / "data" / "origin.json").read_text())
    assert "document_vector" not in origin  # as an index from before the option
    (root / "short.txt").write_text(texts["short.txt"])
    with open_app(_settings(tmp_path, "data"), "write", root) as side:  # today's default, "whole": the index keeps the mean
        side.indexer.run(root)
        vector, chunks = _vectors(side)["short.txt"]
        np.testing.assert_allclose(vector, _mean(chunks), atol=1e-6)
    assert json.loads((tmp_path / "data" / "origin.json").read_text()) == origin
    with open_app(_settings(tmp_path, "data"), "write", root, rebuild=True) as side:  # --rebuild applies the setting
        side.indexer.run(root)
        vector, chunks = _vectors(side)["short.txt"]
        assert float(vector @ _mean(chunks)) < 0.999
    assert json.loads((tmp_path / "data" / "origin.json").read_text())["document_vector"] == {"whole_tokens": 256}


def test_with_title_prefix_the_whole_text_is_led_by_the_title(real_encoder, texts: dict[str, str], tmp_path: Path) -> None:
    root = _folder(tmp_path, {"short.txt": "Shock waves\n\n" + texts["short.txt"]})
    with open_app(_settings(tmp_path, "data", title_prefix=True), "write", root) as side:
        side.indexer.run(root)
        title = side.store.scan_documents(["title"]).column("title").to_pylist()[0]
        vector, chunks = _vectors(side)["short.txt"]
    assert len(chunks) == 2 and title
    np.testing.assert_allclose(vector, real_encoder.embed([f"{title}\n\nShock waves\n\n{texts['short.txt']}"])[0], atol=2e-5)
