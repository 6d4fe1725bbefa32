"""Chunk rules (issues 39 and 42): which texts are one chunk, where overlap goes, which documents are late-chunked,
and that an index built under the older rules keeps them."""

import json
from pathlib import Path

import pytest

from lodex.indexer.chunking.chunker import LEGACY_RULE, Chunker, ChunkRule
from lodex.indexer.chunking.late_chunking import LateChunking
from lodex.indexer.encoding_jobs import TitleLead, WindowPlanner
from tests.conftest import EVALDATA
from tests.fakes import FakeEncoder


def _words(n: int, start: int = 0) -> str:
    """n one-token words with no sentence end."""
    return " ".join(f"w{i}" for i in range(start, start + n))


def _sentences(n: int, words: int = 9) -> str:
    """n sentences of `words` + 1 tokens each (the full stop is a token)."""
    return " ".join(_words(words, i * words).capitalize() + "." for i in range(n))


def _chunker(slack: int = 0, breaks: bool = True) -> Chunker:
    return Chunker(FakeEncoder().token_spans, max_tokens=40, overlap=8, rule=ChunkRule(slack, breaks))


def _exact(text: str, chunker: Chunker) -> list:
    chunks = chunker.chunk(text)
    for i, c in enumerate(chunks):
        assert c.ordinal == i and text[c.char_start : c.char_end] == c.text
    assert chunks[0].char_start == 0 and chunks[-1].char_end == len(text)
    for a, b in zip(chunks, chunks[1:]):
        assert a.char_start < b.char_start and text[a.char_end : b.char_start].strip() == ""  # in order, nothing left out
    return chunks


@pytest.mark.parametrize("n", [41, 48])
def test_a_text_within_the_slack_is_one_chunk(n: int) -> None:
    text = _words(n)
    assert [c.token_count for c in _exact(text, _chunker(slack=8))] == [n]
    assert len(_exact(text, _chunker())) == 2  # the legacy rule cuts it, its second chunk mostly overlap


def test_past_the_slack_a_text_is_cut_and_its_last_chunk_takes_a_short_rest() -> None:
    assert len(_exact(_words(49), _chunker(slack=8))) == 2
    # 100 tokens: 40, then the rest (8 of overlap + 60) cut at 40, then 8 + 28 = 36 <= 48: one last chunk
    counts = [c.token_count for c in _exact(_words(100), _chunker(slack=8))]
    assert counts == [40, 40, 36] and max(counts) <= 48
    legacy = [c.token_count for c in _exact(_words(100), _chunker())]
    assert legacy == [40, 40, 36]  # the same here; below, the legacy rule leaves a last chunk that is mostly overlap
    assert [c.token_count for c in _exact(_words(74), _chunker())] == [40, 40, 10]
    assert [c.token_count for c in _exact(_words(74), _chunker(slack=8))] == [40, 42]


def test_no_overlap_after_a_sentence_end_only_where_a_cut_splits_text() -> None:
    text = _sentences(12)  # 120 tokens in sentences of 10
    chunks = _exact(text, _chunker(breaks=False))
    for a, b in zip(chunks, chunks[1:]):
        assert text[a.char_end : b.char_start].strip() == "" and a.text.endswith(".")  # cut at a full stop, nothing shared
    assert sum(c.token_count for c in chunks) == 120
    legacy = _exact(text, _chunker())
    assert sum(c.token_count for c in legacy) > 120
    assert all(b.char_start < a.char_end for a, b in zip(legacy, legacy[1:]))
    unbroken = _exact(_words(120), _chunker(breaks=False))  # no sentence end: the cut splits text, the overlap stays
    assert all(b.char_start < a.char_end for a, b in zip(unbroken, unbroken[1:]))


def test_pages_are_chunked_by_the_same_rule() -> None:
    pages = [_words(44, 0), _words(44, 100)]
    text = "\n".join(pages)
    chunks = _chunker(slack=8).chunk_parts(text, [0, len(pages[0]) + 1])
    assert [c.token_count for c in chunks] == [44, 44]
    assert all(text[c.char_start : c.char_end] == c.text for c in chunks)


@pytest.mark.parametrize("n", [41, 80])
def test_a_whole_text_of_up_to_whole_tokens_is_one_chunk(n: int) -> None:
    chunker = Chunker(FakeEncoder().token_spans, max_tokens=40, overlap=8, rule=ChunkRule(whole_tokens=80))
    assert [c.token_count for c in _exact(_words(n), chunker)] == [n]
    assert len(_exact(_words(n), _chunker())) > 1
    parted = chunker.chunk(_words(n), whole_text=False)  # part of a longer text (a streamed window): cut as the legacy rule
    assert [(c.char_start, c.char_end) for c in parted] == [(c.char_start, c.char_end) for c in _chunker().chunk(_words(n))]


def test_past_whole_tokens_a_text_is_cut_exactly_as_the_legacy_rule_cuts_it() -> None:
    chunker = Chunker(FakeEncoder().token_spans, max_tokens=40, overlap=8, rule=ChunkRule(whole_tokens=80))
    for text in (_words(81), _words(300), _sentences(30)):
        assert [(c.char_start, c.char_end) for c in _exact(text, chunker)] == [(c.char_start, c.char_end) for c in _exact(text, _chunker())]
    pages = [_words(70, 0), _words(90, 100)]  # each page is a text: the short one whole, the long one cut
    chunks = chunker.chunk_parts("\n".join(pages), [0, len(pages[0]) + 1])
    assert [c.token_count for c in chunks][:1] == [70] and len(chunks) == 4


def test_the_rule_records_itself_only_when_it_is_not_the_legacy_one() -> None:
    assert LEGACY_RULE.origin() is None and ChunkRule.recorded(None) == LEGACY_RULE
    rule = ChunkRule(32, False)
    assert ChunkRule.recorded(rule.origin()) == rule
    whole = ChunkRule(whole_tokens=254)
    assert whole.origin() == {"whole_slack": 0, "overlap_at_breaks": True, "whole_tokens": 254}
    assert ChunkRule.recorded(whole.origin()) == whole
    assert ChunkRule.recorded({"whole_slack": 32, "overlap_at_breaks": False}) == ChunkRule(32, False)  # before whole_tokens
    assert LateChunking(256, 32).origin() == {"window_tokens": 256, "margin": 32}  # as indexes before late_for record
    assert LateChunking(256, 32, long_only=True).origin() == {"window_tokens": 256, "margin": 32, "for": "long"}


def test_late_chunking_for_long_documents_only() -> None:
    encoder = FakeEncoder()
    chunker = Chunker(encoder.token_spans, 40, 8)
    plan = WindowPlanner(encoder, LateChunking(80, 8, long_only=True), 40, TitleLead(False))
    short = _words(70)  # two chunks, one window: encoded alone
    assert len(chunker.chunk(short)) == 2 and plan(short, chunker.chunk(short), "t") is None
    long = _words(300)
    windows = plan(long, chunker.chunk(long), "t")
    assert windows is not None and sorted(i for w in windows for i in w.chunks) == list(range(len(chunker.chunk(long))))
    every = WindowPlanner(encoder, LateChunking(80, 8), 40, TitleLead(False))
    assert every(short, chunker.chunk(short), "t") is not None


def _index(tmp_path: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch, root: Path) -> dict:
    """Index `root` into tmp_path/data with these settings; the stored chunk token counts and the origin."""
    from lodex.api.factory import build_encoder, build_indexer, open_store
    from lodex.api.settings import Settings

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = Settings(base_dir=tmp_path)
    settings.encoder.backend = "fake"
    encoder = build_encoder(settings)
    store = open_store(settings, encoder, tmp_path / "data", create=True)
    build_indexer(settings, encoder, store).run(root)
    rows = store.chunks_of_documents([r.id for r in store.document_records().values()], ["token_count"]).to_pylist()
    return {"tokens": sorted(r["token_count"] for r in rows), "origin": json.loads((tmp_path / "data" / "origin.json").read_text())}


def test_an_index_built_under_the_old_rules_opens_and_updates_the_old_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.txt").write_text(_words(127))  # one chunk under the new rule, two under the old (the fake reads 126 + 2)
    old = {
        "LODEX_CHUNKING__WHOLE_SLACK": "0",
        "LODEX_CHUNKING__OVERLAP_AT_BREAKS": "true",
        "LODEX_CHUNKING__LATE_FOR": "all",
        "LODEX_CHUNKING__LATE": "true",
    }
    built = _index(tmp_path, old, monkeypatch, root)
    assert "chunk_rule" not in built["origin"] and built["origin"]["late_chunking"] == {"window_tokens": 256, "margin": 32}
    assert len(built["tokens"]) == 2
    new_rules = {
        "LODEX_CHUNKING__WHOLE_SLACK": "32",
        "LODEX_CHUNKING__OVERLAP_AT_BREAKS": "false",
        "LODEX_CHUNKING__LATE_FOR": "long",
        "LODEX_CHUNKING__LATE": "true",
    }
    (root / "b.txt").write_text(_words(127, 500))  # added under the new rules: cut and encoded as the index was
    grown = _index(tmp_path, new_rules, monkeypatch, root)
    assert grown["origin"] == built["origin"]
    assert len(grown["tokens"]) == 4
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    new = _index(fresh, new_rules, monkeypatch, root)
    assert new["origin"]["chunk_rule"] == {
        "whole_slack": 2,
        "overlap_at_breaks": False,  # the slack the model has room for
        "whole_tokens": 0,
    }  # the fake model reads no more than a chunk
    assert new["origin"]["late_chunking"] == {"window_tokens": 256, "margin": 32, "for": "long"}
    assert new["tokens"] == [127, 127]


def test_whole_tokens_stays_within_what_the_model_reads(real_encoder, tmp_path: Path) -> None:
    """chunking.whole_tokens counts the model's special tokens and is capped by its window (256 for MiniLM); one no
    longer than a chunk changes nothing (the legacy rule); a short real abstract is then one chunk, a long one cut."""
    from lodex.api.factory import build_chunker
    from lodex.api.index_policy import chunk_rule
    from lodex.api.settings import Settings
    from lodex.store.manifest import IndexManifest

    settings, new_index = Settings(base_dir=tmp_path), IndexManifest.read(tmp_path / "data")
    settings.chunking.whole_tokens = 10_000
    assert chunk_rule(settings, real_encoder, new_index).whole_tokens == real_encoder.max_length - real_encoder.special_tokens
    settings.chunking.whole_tokens = 128
    assert chunk_rule(settings, real_encoder, new_index) == LEGACY_RULE
    settings.chunking.whole_tokens = 256
    chunker = build_chunker(settings, real_encoder, new_index)
    with (EVALDATA / "cranfield" / "corpus.jsonl").open() as fh:
        texts = [json.loads(line)["text"].strip() for line in fh if line.strip()]
    lengths = [len(s) for s in real_encoder.token_spans(texts[:200])]
    short = next(t for t, n in zip(texts, lengths) if 160 <= n <= 250)  # two chunks under the legacy rule
    long = next(t for t, n in zip(texts, lengths) if n > 300)
    assert len(Chunker(real_encoder.token_spans, chunker.max_tokens, 32).chunk(short)) == 2
    assert [c.text for c in chunker.chunk(short)] == [short]
    assert len(chunker.chunk(long)) > 1
    chinese = "向量检索把文档切成段落，再为每一段计算向量。" * 6  # ~140 tokens, spaceless: whole too
    assert 126 < len(real_encoder.token_spans([chinese])[0]) <= 254
    assert len(Chunker(real_encoder.token_spans, chunker.max_tokens, 32).chunk(chinese)) == 2
    assert [c.text for c in chunker.chunk(chinese)] == [chinese]
