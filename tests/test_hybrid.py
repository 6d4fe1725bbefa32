"""Keyword (BM25) retrieval kept in step with the index, hybrid fusion, document rankings and highlights."""

from pathlib import Path

import numpy as np
import pytest

from lodex.api.factory import build_indexer
from lodex.api.settings import Settings
from lodex.indexer.pipeline import Indexer
from lodex.indexer.settings import IndexSettings
from lodex.search.document_scores import dense_scores, fused_dense_scores
from lodex.search.fusion import Fusion, Hits
from lodex.search.highlight import highlight_spans, query_stems
from lodex.search.searcher import RANKINGS
from lodex.store import lance_store
from lodex.store.lance_store import LanceStore
from tests.conftest import make_pipeline
from tests.fakes import FakeEncoder
from tests.invariants import dense_document_scores


def _paths(searcher, query: str, mode: str, k: int = 10) -> list[str]:
    return [hit.path for hit in searcher.search(query, k=k, mode=mode).results]


def test_bm25_sees_added_changed_and_deleted_documents_at_once(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    for i in range(5):
        (root / f"filler-{i}.txt").write_text(f"ordinary words about flow number {i}\n")
    store, indexer, searcher = make_pipeline(tmp_path / "data", FakeEncoder())
    indexer.run(root)
    assert _paths(searcher, "zanzibar", "bm25") == []

    (root / "new.txt").write_text("a note on zanzibar spice routes\n")  # added after the full-text index was built
    indexer.run(root)
    assert _paths(searcher, "zanzibar", "bm25") == ["new.txt"]

    (root / "new.txt").write_text("a note on madagascar vanilla instead\n")  # changed: the old words are gone
    indexer.run(root)
    assert _paths(searcher, "zanzibar", "bm25") == []
    assert _paths(searcher, "madagascar", "bm25") == ["new.txt"]

    (root / "filler-2.txt").write_text("now filler two talks about zanzibar too\n")
    (root / "new.txt").unlink()  # deleted
    indexer.run(root)
    assert _paths(searcher, "madagascar", "bm25") == []
    assert _paths(searcher, "zanzibar", "bm25") == ["filler-2.txt"]
    store.maybe_optimize(force=True)  # folding the new rows into the index changes nothing users see
    assert _paths(searcher, "zanzibar", "bm25") == ["filler-2.txt"]
    assert _paths(searcher, "madagascar", "bm25") == []
    assert searcher.store.keywords.covers(searcher.store.refresh()[1])  # every row indexed: the quick path

    (root / "filler-2.txt").unlink()
    (root / "late.txt").write_text("late news from madagascar\n")
    indexer.run(root, only=["filler-2.txt", "late.txt"])  # as the watcher does: no optimize after it
    assert not searcher.store.keywords.covers(searcher.store.refresh()[1])
    assert _paths(searcher, "zanzibar", "bm25") == [] and _paths(searcher, "madagascar", "bm25") == ["late.txt"]


def test_bm25_ranks_by_term_weight_and_stems(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "many.txt").write_text("turbulent turbulence in turbulent boundary layers, turbulent again\n")
    (root / "one.txt").write_text("a boundary layer that is turbulent once, with many other words about other things\n")
    (root / "none.txt").write_text("laminar flow only\n")
    _, indexer, searcher = make_pipeline(tmp_path / "data", FakeEncoder())
    indexer.run(root)
    assert _paths(searcher, "turbulent layers", "bm25") == ["many.txt", "one.txt"]


@pytest.mark.slow
def test_hybrid_returns_documents_only_one_retriever_found(tmp_path: Path, real_encoder) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "wings.txt").write_text("How aircraft wings generate lift: air moves faster over the curved upper surface.\n")
    (root / "errors.txt").write_text("Service log: fault XJ4471 raised by the billing module at midnight.\n")
    (root / "cooking.txt").write_text("Slow-cooked tomato sauce needs garlic, basil and patience.\n")
    (root / "gardening.txt").write_text("Prune roses in late winter before new growth starts.\n")
    (root / "finance.txt").write_text("Quarterly revenue grew while operating costs fell.\n")
    _, indexer, searcher = make_pipeline(tmp_path / "data", real_encoder)
    indexer.run(root)
    query = "XJ4471 how do airplanes stay aloft"
    dense, keyword = _paths(searcher, query, "dense", k=1), _paths(searcher, query, "bm25", k=5)
    assert dense == ["wings.txt"]  # meaning: the best dense match
    assert keyword == ["errors.txt"]  # the code: no other document holds a query word that BM25 keeps (wings.txt never)
    hybrid = _paths(searcher, query, "hybrid", k=2)
    assert set(hybrid) == {"wings.txt", "errors.txt"}


def test_convex_fusion_normalizes_each_list_and_a_lone_keyword_hit_counts() -> None:
    dense = Hits(np.array([1, 2, 3]), np.array([0, 1, 2]), np.array([0.9, 0.5, 0.1]))
    keyword = Hits(np.array([3]), np.array([2]), np.array([7.0]))  # a rare word, in one chunk only
    fused = Fusion(dense_weight=0.6).fuse(dense, keyword)
    assert fused.ids.tolist() == [1, 3, 2] and fused.rows.tolist() == [0, 2, 1]
    assert fused.scores.tolist() == pytest.approx([0.6, 0.4, 0.3])  # the lone hit gets BM25's whole share
    assert fused.score_of(np.array([2, 9, 1])).tolist() == pytest.approx([0.3, float("-inf"), 0.6])
    rrf = Fusion(method="rrf", rrf_k=10).fuse(dense, keyword)
    assert rrf.ids.tolist() == [3, 1, 2] and rrf.scores[0] == pytest.approx(1 / 13 + 1 / 11)


QUERY = ["anglerfish", "lure", "glowing", "abyss", "lantern", "photophore"]


def _paragraph(name: str, i: int, words: list[str]) -> str:
    """Ten distinct tokens: these query words, then words of this paragraph's own."""
    return " ".join(words + [f"{name}{i}w{j}" for j in range(10 - len(words))])


def _pair(i: int) -> list[str]:
    """Two of the query's words, in turn: q0 q1, q2 q3, q4 q5, q0 q1, ..."""
    return QUERY[2 * (i % 3) : 2 * (i % 3) + 2]


def _triple(i: int) -> list[str]:
    """Three of the query's words, in turn: q0 q1 q2, q3 q4 q5, q0 q1 q2, ..."""
    return QUERY[3 * (i % 2) : 3 * (i % 2) + 3]


# Four documents on one topic, sharing the query's words, laid out so that each ranking has its own winner
# (one paragraph = one chunk), by a margin of 0.06 or more for words of orthogonal vectors (cosines to the query: best
# chunk 0.77 spike, 0.65 trio and both; top-3 0.65 trio; mean vector 0.85 steady, 0.78 both, 0.43 trio, 0.24 spike):
RANKED_DOCS = {
    # one passage is the whole query, the rest is about other things: the best chunk, the worst mean
    "spike.txt": [QUERY] + [[]] * 9,
    # three strong passages (five of the six words each) in a long document: the best top-3, a poor mean
    "trio.txt": [QUERY[0:5] if i == 0 else QUERY[1:6] if i == 4 else QUERY[:1] + QUERY[2:] if i == 8 else [] for i in range(18)],
    # no passage holds more than two words, but together they cover the query evenly: the best mean vector
    "steady.txt": [_pair(i) for i in range(60)],
    # a strong passage and an even rest (three words each, so that the next dense hits after the five strong passages
    # are this document's): second-best on both, first when both count (blend)
    "both.txt": [QUERY[0:5]] + [_triple(i) for i in range(1, 6)],
}
WINNER = {"max": "spike.txt", "topm": "trio.txt", "mean": "steady.txt", "blend": "both.txt"}


@pytest.fixture(scope="module")
def ranked_index(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("rankings")
    root = tmp / "docs"
    root.mkdir()
    for name, paragraphs in RANKED_DOCS.items():
        (root / name).write_text("\n\n".join(_paragraph(name[:-4], i, words) for i, words in enumerate(paragraphs)))
    encoder = FakeEncoder(dim=1024)  # random word vectors closer to orthogonal than at 256: margins hold for any draw
    store, indexer, searcher = make_pipeline(tmp / "data", encoder, max_tokens=12, overlap=0)
    indexer.run(root)
    assert {p: r.chunk_count for p, r in store.document_records().items()} == {p: len(v) for p, v in RANKED_DOCS.items()}
    return store, encoder, searcher


@pytest.mark.parametrize("ranking", RANKINGS)
def test_each_document_ranking_ranks_by_its_own_property(ranked_index, ranking: str) -> None:
    """Dense mode: every document's score is the hand computation of the ranking (best chunk, mean of the top 3,
    cosine to the mean vector, or half of each), so a ranking that ignored the best chunk or the mean vector would
    put another document first. Hybrid mode keeps each ranking's character, with BM25 fused in."""
    store, encoder, searcher = ranked_index
    query = " ".join(QUERY)
    expected = dense_document_scores(store, encoder.embed([query], kind="query")[0], ranking, searcher.fusion.top_m, searcher.fusion.blend_alpha)
    assert max(expected, key=expected.__getitem__) == WINNER[ranking], f"the corpus no longer separates the rankings: {expected}"
    dense = searcher.search(query, k=10, mode="dense", ranking=ranking).results  # type: ignore[arg-type]
    assert [h.path for h in dense] == sorted(expected, key=lambda p: -expected[p])
    assert {h.path: h.score for h in dense} == pytest.approx(expected, abs=1e-5)
    top_two = sorted(expected.values())[-2:]
    assert top_two[1] - top_two[0] > 0.04, f"the winner's margin is too thin to mean anything: {expected}"

    hybrid = [h.path for h in searcher.search(query, k=10, mode="hybrid", ranking=ranking).results]  # type: ignore[arg-type]
    assert sorted(hybrid) == sorted(RANKED_DOCS)
    if ranking == "mean":  # fused with BM25's best chunk at document level: the even document still beats the strong passages
        assert hybrid.index("steady.txt") < min(hybrid.index("spike.txt"), hybrid.index("trio.txt")), hybrid
    else:
        assert hybrid[0] == WINNER[ranking], hybrid
    if ranking == "blend":  # the best chunk counts too: the one-passage document passes the even one
        assert hybrid.index("spike.txt") < hybrid.index("steady.txt"), hybrid


def _few_dense_hits(searcher, snap, vector: np.ndarray, n: int) -> Hits:
    """The dense candidates of a search for `vector` cut to `n` chunks."""
    scores, ids = snap.index.search_batch(vector[None, :], n)
    return Hits(ids[0], snap.rows(ids[0]), scores[0].astype(np.float64))


@pytest.mark.parametrize("ranking", ["max", "blend"])
def test_best_chunks_taken_from_a_few_dense_candidates_are_the_exact_ones(ranked_index, ranking: str) -> None:
    """A document's best chunk is read off the dense candidates when it has one there (it outscores the document's
    other chunks, so it is among them), and computed from all its chunks when only BM25 found it: both give the
    scores that reading every chunk of every document gives."""
    store, encoder, searcher = ranked_index
    vector = encoder.embed([" ".join(QUERY)], kind="query")[0]
    f = searcher.fusion
    with searcher.source.pinned() as snap:
        hits = _few_dense_hits(searcher, snap, vector, 6)  # a few of the 64 chunks: not every document's
        rows = np.arange(len(snap.docs))
        assert 0 < len(np.unique(hits.rows)) < len(rows)
        fast = dense_scores(snap, rows, vector, ranking, f.top_m, f.blend_alpha, hits)
        assert np.allclose(fast, dense_scores(snap, rows, vector, ranking, f.top_m, f.blend_alpha), atol=1e-6)
    expected = dense_document_scores(store, vector, ranking, f.top_m, f.blend_alpha)
    assert dict(zip(snap.docs.rows(rows.tolist(), "paths"), fast.tolist())) == pytest.approx(expected, abs=1e-5)


def test_documents_only_bm25_found_are_read_only_when_they_can_reach_the_normalized_range(ranked_index, monkeypatch) -> None:
    """Hybrid document fusion normalizes the `depth` best dense document scores and gives 0 below them: a document
    that only BM25 found and whose bound (the lowest dense hit) keeps it below them is not read, and the fused
    ranking and scores are those of reading every document's chunks."""
    _, encoder, searcher = ranked_index
    vector = encoder.embed([" ".join(QUERY)], kind="query")[0]
    with searcher.source.pinned() as snap:
        hits = _few_dense_hits(searcher, snap, vector, 6)
        rows = np.arange(len(snap.docs))
        keyword = Hits(rows, rows, np.linspace(3.0, 1.0, len(rows)))  # every document found by BM25, distinct scores
        exact = dense_scores(snap, rows, vector, "blend", 3, 0.6)
        read: list[int] = []
        chunk_vectors = snap.chunk_vectors
        monkeypatch.setattr(snap, "chunk_vectors", lambda r: (read.extend(r.tolist()), chunk_vectors(r))[1])
        for depth in (1, len(rows)):
            read.clear()
            fast = fused_dense_scores(snap, rows, vector, 0.6, hits, depth)
            fusion = Fusion(dense_weight=0.7, depth=depth)
            fused = [fusion.fuse(Hits(rows[o], rows[o], s[o]), keyword) for s in (fast, exact) for o in [np.argsort(-s, kind="stable")]]
            fast_fused, exact_fused = ({int(i): float(v) for i, v in zip(f.ids, f.scores)} for f in fused)
            assert fast_fused == pytest.approx(exact_fused, abs=1e-6)  # each document's (ties may come in either order;
            # the best chunks read off the dense hits are FAISS's float32 cosines)
            assert not set(read) & set(hits.rows.tolist())  # documents with a dense hit are never read
            if depth == 1:
                assert len(set(read)) < len(rows) - len(set(hits.rows.tolist())), "every other document was read"
            else:
                assert set(read) == set(rows.tolist()) - set(hits.rows.tolist())


def test_passage_highlights_mark_query_words_with_exact_offsets(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    text = "Heated plates lose heat.\n\nThe flows near the plate were heating the wall; nothing else."
    (root / "a.txt").write_text(text)
    _, indexer, searcher = make_pipeline(tmp_path / "data", FakeEncoder())
    indexer.run(root)
    hit = searcher.search("heat the plate", k=1, mode="bm25").results[0]
    assert hit.passages, "no passage: the checks below would pass on nothing"
    for passage in hit.passages:
        assert text[passage.char_start : passage.char_end] == passage.text
        marked = [passage.text[s:e] for s, e in passage.highlights]
        assert marked and all(w.lower().startswith(("heat", "plate")) for w in marked)
        assert "the" not in [w.lower() for w in marked]  # stop words are not marked
    first = hit.passages[0]  # the whole (short) file is one chunk: every query word in it is marked, in order
    assert (first.char_start, first.char_end) == (0, len(text))
    assert [first.text[s:e] for s, e in first.highlights] == ["Heated", "plates", "heat", "plate", "heating"]


def test_highlight_spans_unit() -> None:
    stems = query_stems("What are the flows of heated air?")
    assert stems == {"flow", "heat", "air"}
    text = "Airflow and air flows; heating, HEAT, heats. The flow."
    assert [text[s:e] for s, e in highlight_spans(text, stems)] == ["air", "flows", "heating", "HEAT", "heats", "flow"]
    assert highlight_spans("anything", set()) == []
    assert [("naïve café"[s:e]) for s, e in highlight_spans("naïve café", query_stems("NAIVE"))] == ["naïve"]


def test_a_long_run_of_a_serving_writer_folds_new_chunks_into_the_keyword_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lance_store, "OPTIMIZE_ROWS", 5)
    counted: list[int] = []
    optimize = LanceStore.optimize
    monkeypatch.setattr(LanceStore, "optimize", lambda self: counted.append(self.chunks.count_rows()) or optimize(self))
    root = tmp_path / "docs"
    root.mkdir()
    for i in range(30):
        (root / f"{i:02d}.txt").write_text(f"note {i} about turbine blades and topic{i} " * 20)
    store, indexer, searcher = make_pipeline(tmp_path / "data", FakeEncoder())
    settings = Settings(base_dir=tmp_path)
    assert indexer.optimize_every_s == 0  # a one-off run (lodex index) optimizes at its end only
    long_lived = build_indexer(settings, indexer.encoder, store, long_lived=True)  # the indexer of `watch` / `serve`
    assert long_lived.optimize_every_s == settings.watch.optimize_every_s > 0
    eager = Indexer(
        store,
        indexer.encoder,
        indexer.chunker,
        indexer.rules,
        IndexSettings(flush_tokens=300),  # many commits in one run,
        optimize_every_s=1e-6,
    )  # optimized as often as rows pile up, for the test
    summary = eager.run(root)
    assert len(counted) > 2 and counted[0] < summary.chunks, "optimized during the run, not only at its end"
    stats = store.chunks.index_stats("keywords_idx")
    assert stats.num_unindexed_rows == 0
    assert searcher.search("topic17", k=1, mode="bm25").results[0].path == "17.txt"
