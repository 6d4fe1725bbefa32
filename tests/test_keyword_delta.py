"""Keyword search over rows the full-text index does not hold yet: lodex's terms are Lance's, its BM25 of those rows
ranks them as the index will once it folds them in, and new rows are found at once."""

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lodex.search import snapshot_source
from lodex.search.snapshot_source import SnapshotSource
from lodex.store import lance_bridge
from lodex.store.lance_store import LanceStore
from lodex.store.lancedb_import import import_lancedb
from lodex.text.terms import STOP_WORDS, terms
from tests.conftest import EVALDATA, indexed_notes, make_pipeline
from tests.fakes import FakeEncoder, ReferenceBM25

CRANFIELD = EVALDATA / "cranfield"


def _cranfield(n: int) -> tuple[list[str], list[str]]:
    """The first n Cranfield abstracts (title and text) and the collection's queries."""
    docs = [json.loads(line) for line in (CRANFIELD / "corpus.jsonl").open()][:n]
    queries = [json.loads(line)["text"] for line in (CRANFIELD / "queries.jsonl").open()]
    return [f"{d['title']} {d['text']}" for d in docs], queries


def test_lodex_terms_score_rows_exactly_as_lances_index(tmp_path: Path) -> None:
    """BM25 computed with lodex's terms and the table's own figures equals the score Lance's index gives each of a
    query's best rows: the same words split, stemmed, dropped as stop words (after stemming) and folded."""
    texts, queries = _cranfield(500)
    texts[3] = "Café naïve Ærø ﬁnal x_y foo-bar 3.14 don't " + "w" * 39 + " " + "v" * 40 + " " + texts[3]
    db = import_lancedb().connect(str(tmp_path / "lance"))
    table = db.create_table("chunks", pa.table({"id": np.arange(len(texts)), "text": texts}))
    lance_bridge.ensure_text_index(table)
    rows = [terms(t) for t in texts]
    bm25 = ReferenceBM25(rows)
    df = bm25.df

    checked = 0
    for text in [*queries[:60], "café naive aero final foo bar", "w" * 39, "v" * 40]:
        got = table.search(text, query_type="fts").fast_search().select(["id"]).limit(10).to_arrow()
        assert (got.num_rows > 0) == any(df[t] for t in terms(text)), text
        for i, score in zip(got["id"].to_pylist(), got["_score"].to_pylist()):
            assert bm25(terms(text), rows[i]) == pytest.approx(score, rel=2e-3), (text, i)
            checked += 1
    assert checked > 400
    words = sorted(STOP_WORDS | {"does", "during", "ourselves", "doing", "having", "zebra"})  # a stop word is one after stemming
    probe = db.create_table("stop", pa.table({"text": [f"{w} zebra" for w in words]}))
    lance_bridge.ensure_text_index(probe)
    kept = [w for w in words if probe.search(w, query_type="fts").fast_search().limit(1).to_arrow().num_rows]
    assert kept == [w for w in words if terms(w)] and {"does", "during", "ourselves", "zebra"} <= set(kept)


def _folder(root: Path, texts: list[str], start: int, n: int) -> list[str]:
    names = [f"doc{i:04d}.txt" for i in range(start, start + n)]
    for name, text in zip(names, texts[start : start + n]):
        (root / name).write_text(text)
    return names


def _hits(store: LanceStore, text: str, version: int, delta, n: int = 10) -> list[int]:
    return store.start_keyword_search([text], n, version, delta)()[0][0].tolist()


def test_new_rows_rank_as_the_index_will_rank_them_once_folded_in(tmp_path: Path) -> None:
    """Rows committed since the last optimize are scored by lodex beside the index's own hits (Lance asked for its
    index alone): the top hits equal, nearly always, those of Lance's plan that scans those rows, and those the index
    gives once it holds them."""
    texts, queries = _cranfield(460)
    root = tmp_path / "docs"
    root.mkdir()
    store, indexer, _ = make_pipeline(tmp_path / "data", FakeEncoder())
    _folder(root, texts, 0, 400)
    indexer.run(root)  # a full run: optimized, every row in the full-text index
    names = _folder(root, texts, 400, 60)
    indexer.run(root, only=names)  # as the watcher does: not folded in yet
    source = SnapshotSource(LanceStore(tmp_path / "data", store.dim))
    snap = source.refresh()
    reader = source.store
    indexed, unindexed = reader.text_index_rows(snap.version)
    assert unindexed > 50 and snap.keywords is not None and len(snap.keywords) == unindexed
    assert set(snap.keywords.rows) == set(snap.owners.newest_rows(unindexed).tolist())
    new_rows = set(snap.keywords.rows)
    with_delta = {q: _hits(reader, q, snap.version, snap.keywords) for q in queries[:80]}
    scanned = {q: _hits(reader, q, snap.version, None) for q in queries[:80]}  # Lance's plan over every row
    assert sum(bool(set(h) & new_rows) for h in with_delta.values()) >= 20  # new rows do rank among the best
    overlap = np.mean([len(set(with_delta[q]) & set(scanned[q])) / max(len(scanned[q]), 1) for q in with_delta])
    assert overlap >= 0.95

    store.optimize()  # folded in: the index's own ranking of the same rows
    after = LanceStore(tmp_path / "data", store.dim)
    version = after.refresh()[1]
    assert after.text_index_rows(version)[1] == 0
    owners = after.chunk_owners(version)

    def chunk_ids(of, rows: list[int]) -> set[int]:
        return set(of.ranked(np.array(rows, np.uint64), np.zeros(len(rows), np.float32))[0].tolist())

    same = [len(chunk_ids(snap.owners, with_delta[q]) & chunk_ids(owners, h)) / len(h) for q in with_delta if (h := _hits(after, q, version, None))]
    assert np.mean(same) >= 0.95


def test_a_word_only_new_rows_have_is_found_before_any_optimize(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A changed file's new word is a keyword hit at the next snapshot, through the delta; with more unindexed rows
    than the delta takes, Lance's own plan finds it (no delta)."""
    root, store, indexer, searcher = indexed_notes(tmp_path, {f"n{i}.txt": f"note {i} on wings and lift and flutter " * 5 for i in range(30)})
    (root / "n3.txt").write_text("the zeppelinoid airship floats on hydrogen " * 3)
    indexer.run(root, only=["n3.txt"])
    snap = searcher.source.refresh()
    assert snap.keywords is not None and len(snap.keywords) > 0
    assert [h.path for h in searcher.search("zeppelinoid airships", 3, mode="bm25").results] == ["n3.txt"]
    assert [h.path for h in searcher.search("flutter", 40, mode="bm25").results].count("n3.txt") == 0  # its old rows gone

    monkeypatch.setattr(snapshot_source, "MAX_DELTA_ROWS", 0)
    (root / "n4.txt").write_text("a dirigible, not a zeppelinoid " * 3)
    indexer.run(root, only=["n4.txt"])
    snap = searcher.source.refresh()
    assert snap.keywords is None
    assert sorted(h.path for h in searcher.search("zeppelinoid", 3, mode="bm25").results) == ["n3.txt", "n4.txt"]


def test_a_long_query_asks_the_index_for_a_bounded_number_of_terms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A query of thousands of words (the API takes 100,000 characters) asks Lance for at most MAX_ASKED terms' idf,
    and still finds a new row by its words."""
    from lodex.store import keyword_delta

    root, store, indexer, searcher = indexed_notes(tmp_path, {f"n{i}.txt": f"note {i} on wings and lift " * 5 for i in range(20)})
    many = " ".join(f"word{i}x" for i in range(3000))
    (root / "big.txt").write_text(many)
    indexer.run(root, only=["big.txt"])
    searcher.source.refresh()
    asked: list[int] = []
    original = keyword_delta.IndexTerms.learn
    monkeypatch.setattr(keyword_delta.IndexTerms, "learn", lambda self, *a: asked.append(1) or original(self, *a))
    results = searcher.search(many, 3, mode="bm25").results
    assert [h.path for h in results] == ["big.txt"] and 0 < len(asked) <= keyword_delta.MAX_ASKED


def test_the_idf_of_new_terms_is_learned_in_the_searchs_own_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The query terms a delta has and the index's figures lack are asked for with the keyword queries, in one round
    trip to Lance (it overlaps the encoding), not in more round trips after them on the query path; then they are known."""
    root, store, indexer, searcher = indexed_notes(tmp_path, {f"n{i}.txt": f"note {i} on wings and lift and flutter " * 5 for i in range(30)})
    (root / "n3.txt").write_text("the flutter of wings in a zeppelinoid airship " * 3)
    indexer.run(root, only=["n3.txt"])
    snap = searcher.source.refresh()
    assert snap.keywords is not None and len(snap.keywords) > 0
    text = "flutter of zeppelinoid wings"
    words = store.keyword_scheme.query_words(text, "en")
    assert set(snap.keywords.index_terms.missing(snap.keywords.wanted_terms(words))) == {"flutter", "wing", "zeppelinoid"}
    reader = LanceStore(tmp_path / "data", store.dim)
    reader.pin(snap.versions)
    wait = reader.start_keyword_search([text], 10, snap.version, snap.keywords)
    calls: list[object] = []
    monkeypatch.setattr(lance_bridge, "run", lambda *a, **k: calls.append(a) or pytest.fail("a round trip after the search"))
    ((rows, scores),) = wait()
    assert not calls and snap.keywords.index_terms.missing(snap.keywords.wanted_terms(words)) == {}
    assert set(rows.tolist()) & set(snap.keywords.rows) and (scores > 0).all()


def test_a_term_known_absent_is_asked_again_only_once_rows_may_have_joined_the_index() -> None:
    """A commit's deletions only shrink the index (a term absent stays absent: not asked again after every commit);
    a fold of new rows into it (it holds more, or fewer rows lie outside it) may have brought the term."""
    from lodex.store.keyword_delta import IndexTerms

    terms_ = IndexTerms()
    terms_.saw(1000, 0)
    terms_.learn("zeppelinoid", None)
    terms_.learn("wing", (3.0, "wing lift wing"))
    wanted = {"zeppelinoid": "zeppelinoid", "wing": "wing"}
    assert terms_.missing(wanted) == {}
    terms_.saw(980, 20)  # a changed file: 20 indexed rows deleted, 20 new ones outside the index
    assert terms_.missing(wanted) == {}
    terms_.saw(960, 40)
    assert terms_.missing(wanted) == {}
    terms_.saw(1000, 0)  # folded in
    assert terms_.missing(wanted) == {"zeppelinoid": "zeppelinoid"}
    terms_.learn("zeppelinoid", None)
    terms_.saw(990, 0)  # deletions of rows that lay outside (a file changed twice before the fold) and a fold at once
    terms_.saw(990, 0)
    assert terms_.missing(wanted) == {}
    terms_.saw(980, 0)
    terms_.saw(975, 20)
    terms_.saw(975, 10)  # fewer outside the index: some joined it
    assert terms_.missing(wanted) == {"zeppelinoid": "zeppelinoid"}
    terms_.saw(1200, 0)  # 10% more rows: a known term's idf is asked again too
    assert set(terms_.missing(wanted)) == {"zeppelinoid", "wing"}
