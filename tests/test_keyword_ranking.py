"""Keyword ranking (terms version 2): section headings in a chunk's keywords, Chinese character pairs, Japanese
function words out by part of speech, documents scored by their best chunks; an index made before keeps version 1."""

import json
from pathlib import Path

import numpy as np

from lodex.search.fusion import Hits
from lodex.store.lance_store import LanceStore
from lodex.store.origin import ORIGIN_FILE
from lodex.text.terms import HEADING_WEIGHT, TERMS_VERSION, keyword_terms, keyword_text
from tests.conftest import make_pipeline
from tests.fakes import FakeEncoder


def test_a_chunks_section_heading_feeds_its_keywords() -> None:
    """The heading path's terms join the chunk's, HEADING_WEIGHT times; version 1 (an index made before) ignores it."""
    got = keyword_text("Lift of swept wings.", "en", "3 Methods › 3.2 Sampling").split()
    assert got[:3] == ["lift", "swept", "wing"]
    assert got.count("sampl") == HEADING_WEIGHT and got.count("method") == HEADING_WEIGHT
    assert keyword_text("Lift of swept wings.", "en", "3 Methods › 3.2 Sampling", terms_version=1) == "lift swept wing"
    assert keyword_text("Lift of swept wings.", "en") == "lift swept wing"  # English text alone: as before
    assert keyword_text("时钟同步", "zh", "9.5 系统维护").split().count("系统") == HEADING_WEIGHT


def test_japanese_function_words_are_left_out_by_part_of_speech() -> None:
    """Particles, auxiliaries, pronouns (何), suffixes and the verbs that stand for a function (する, いい) carry nothing
    to search for: a question keeps its content words alone; version 1 kept the longer ones."""
    question = "メール転送エージェントは何を選べばいいですか"
    assert keyword_terms(question, "ja", query=True) == ["メール", "転送", "エージェント", "選ぶ"]
    assert "何" in keyword_terms(question, "ja", query=True, terms_version=1)
    assert keyword_terms("設定する", "ja") == ["設定"]


def test_japanese_compounds_meet_whole_and_in_parts() -> None:
    """Version 3: a question keeps a compound whole (日本語), a document gives its parts and then the compound, so the
    compound meets the compound and its parts still meet a text that writes them apart; version 2 (an index made
    before) has the parts alone, for documents and questions alike."""
    question = "日本語のロケールを設定したい"
    assert keyword_terms(question, "ja", query=True) == ["日本語", "ロケール", "設定"]
    assert keyword_terms("日本語のロケール", "ja") == ["日本", "語", "日本語", "ロケール"]
    assert keyword_terms("日本の言語", "ja") == ["日本", "言語"]  # written apart: no compound to give
    assert keyword_terms(question, "ja", query=True, terms_version=2) == ["日本", "語", "ロケール", "設定"]
    assert keyword_terms("日本語のロケール", "ja", terms_version=2) == ["日本", "語", "ロケール"]


def test_documents_are_scored_by_their_best_chunks() -> None:
    """bm25 mode's document score: the sum of its m best chunks (a document with two good chunks over one with a
    single slightly better one); m = 1 is the best chunk alone."""
    hits = Hits(np.array([10, 20, 21, 11, 30]), np.array([1, 2, 2, 1, 3]), np.array([5.0, 4.5, 4.0, 0.5, 0.2]))
    best = hits.best_per_document()
    assert best.rows.tolist() == [1, 2, 3] and best.scores.tolist() == [5.0, 4.5, 0.2]
    summed = hits.summed_per_document(2)
    assert summed.rows.tolist() == [2, 1, 3] and summed.scores.tolist() == [8.5, 5.5, 0.2]
    assert hits.summed_per_document(1).rows.tolist() == [1, 2, 3]
    assert len(Hits.empty().summed_per_document(2).rows) == 0


def test_an_index_made_before_keeps_version_1_terms(tmp_path: Path) -> None:
    """An index whose origin records no `keyword_terms` (made before version 2) opens, is searched with version 1's
    query terms, and takes new documents with version 1's keywords (no pairs, no headings): its terms stay one kind."""
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.md").write_text("# 系统维护\n\n如何配置时钟同步服务？使用 chrony 软件包。\n")
    store, indexer, _ = make_pipeline(tmp_path / "data", FakeEncoder())
    assert store.keyword_scheme.terms_version == TERMS_VERSION
    origin_file = tmp_path / "data" / ORIGIN_FILE
    origin = json.loads(origin_file.read_text())
    assert origin["keyword_terms"] == TERMS_VERSION
    del origin["keyword_terms"]
    origin_file.write_text(json.dumps(origin))  # as an index made before version 2 records it
    store, indexer, searcher = make_pipeline(tmp_path / "data", FakeEncoder())
    assert store.keyword_scheme.terms_version == 1
    indexer.run(root)
    keywords = store.chunks.to_arrow()["keywords"].to_pylist()
    assert keywords and not any("·" in k for k in keywords)
    assert keywords == [keyword_text(t, "zh", None, 1) for t in store.chunks.to_arrow()["text"].to_pylist()]
    assert store.keyword_scheme.query_words("时钟同步", "zh") == [(w, w) for w in keyword_terms("时钟同步", "zh", True, 1)]
    assert [h.path for h in searcher.search("时钟同步 chrony", 3, mode="bm25").results] == ["a.md"]
    assert LanceStore(tmp_path / "data", store.dim).keyword_scheme.terms_version == 1  # a reader (`lodex search`) alike


def test_uncovered_languages_hybrid_queries_rank_documents_by_their_best_chunks(tmp_path: Path) -> None:
    """A hybrid query in a language of another script the model does not cover is answered by keywords, documents
    scored by their `keyword_passages` best chunks (ranking topm); an English one stays hybrid, a bm25 one keeps the
    best chunk."""
    from lodex.search.searcher import Query, Searcher
    from tests.conftest import indexed_notes

    english = "The lift and drag of swept wings at transonic speeds were measured in the wind tunnel for the models. " * 2
    _, store, _, plain = indexed_notes(
        tmp_path, {"zh.txt": "如何配置时钟同步服务？使用 chrony 软件包。", "en1.txt": english, "en2.txt": english.replace("wings", "blades")}
    )
    searcher = Searcher(store, plain.encoder, languages=frozenset({"en"}))
    snap = searcher.snapshot()
    routed = searcher._for_model(snap, Query("时钟同步"))
    assert (routed.mode, routed.ranking) == ("bm25", "topm")
    assert searcher._for_model(snap, Query("lift and drag of swept wings")).mode is None  # the searcher's own: hybrid
    assert searcher._for_model(snap, Query("时钟同步", mode="bm25")).ranking is None
    assert [h.path for h in searcher.search("时钟同步").results][:1] == ["zh.txt"]
