"""The query batcher: concurrent queries are encoded and searched in batches, each caller gets its own answer."""

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from lodex.search.batcher import QueryBatcher
from lodex.search.searcher import Query, Searcher
from lodex.store.lance_store import LanceStore
from tests.conftest import make_pipeline
from tests.fakes import FakeEncoder


@pytest.fixture
def index(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    for i in range(12):
        (root / f"doc{i:02d}.txt").write_text(f"topic{i} " + " ".join(f"word{i}x{j}" for j in range(60)))
    make_pipeline(tmp_path / "data", FakeEncoder())[1].run(root)
    return tmp_path / "data"


def test_concurrent_queries_get_their_own_answers_in_batches(index: Path) -> None:
    encoder = FakeEncoder()
    sizes: list[int] = []

    def encode(texts: list[str]) -> np.ndarray:
        sizes.append(len(texts))
        return encoder.embed(texts, kind="query")

    batcher = QueryBatcher(lambda: Searcher(LanceStore(index, encoder.dim), encoder), encode)
    direct = Searcher(LanceStore(index, encoder.dim), encoder)
    texts = [f"topic{i % 12} word{i % 12}x{i % 7}" for i in range(48)]
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda t: batcher.submit(Query(t, k=3)).result(timeout=60), texts))
    batcher.close()
    for text, answer in zip(texts, answers):
        expected = direct.search(text, k=3)
        assert answer.query == text and answer.took_ms > 0
        assert [(h.doc_id, h.score) for h in answer.results] == [(h.doc_id, h.score) for h in expected.results]
        assert f"doc{int(text[5 : text.index(' ')]):02d}.txt" in [h.path for h in answer.results]
    assert sum(sizes) == 48 and max(sizes) > 1  # waiting queries were encoded together


def test_an_encoder_failure_reaches_every_waiting_caller_and_the_batcher_goes_on(index: Path) -> None:
    encoder = FakeEncoder()
    started, release = threading.Event(), threading.Event()
    calls = []

    def encode(texts: list[str]) -> np.ndarray:
        calls.append(texts)
        if len(calls) == 1:
            started.set()
            release.wait(10)  # the next queries pile up meanwhile
            raise RuntimeError("encoder broke")
        return encoder.embed(texts, kind="query")

    batcher = QueryBatcher(lambda: Searcher(LanceStore(index, encoder.dim), encoder), encode)
    first = batcher.submit(Query("topic1"))
    assert started.wait(10)
    later = [batcher.submit(Query(f"topic{i}")) for i in range(3)]
    release.set()
    with pytest.raises(RuntimeError, match="encoder broke"):
        first.result(timeout=30)
    assert [f.result(timeout=30).results[0].path for f in later] == ["doc00.txt", "doc01.txt", "doc02.txt"]
    batcher.close()


def test_keyword_hits_started_before_a_commit_answer_from_their_version_less_the_chunks_gone(index: Path) -> None:
    """A batch whose keyword search started before a commit is not searched again (a second round of Lance's BM25 on
    the query path after every commit): its hits are those of the version it started at, less the chunks that
    version's successor no longer has (row ids are stable, never reused). Without stable row ids it is searched again."""
    encoder = FakeEncoder()
    early = Searcher(LanceStore(index, encoder.dim), encoder, mode="bm25")  # the batcher's encoding stage
    searcher = Searcher(LanceStore(index, encoder.dim), encoder, mode="bm25")  # its search stage
    queries = [Query("topic3", k=3), Query("novelword", k=3)]
    vectors = encoder.embed([q.text for q in queries], kind="query")
    current = early.start_keyword_search(queries)()
    assert current[0] is not None and len(current[0][1]) > 0
    same = searcher.search_many(queries, vectors, keywords=current)
    assert [[h.path for h in r.results] for r in same] == [[h.path for h in searcher.search(q.text, k=3).results] for q in queries]
    assert same[0].results[0].path == "doc03.txt" and same[1].results == []

    root = index.parent / "docs"
    (root / "new.txt").write_text("novelword " * 30)
    (root / "doc03.txt").write_text("rewritten " + " ".join(f"word3x{j}" for j in range(60)))
    make_pipeline(index, FakeEncoder())[1].run(root)  # a commit lands between encoding and searching
    snap = searcher.snapshot()
    assert snap.version > current[0][0] >= snap.rows_since
    later = searcher.search_many(queries, vectors, keywords=current)
    assert later[0].results == []  # doc03's old chunks are gone: not answered from the stale hits
    assert later[1].results == []  # new.txt came after the version the hits are of
    assert [h.path for h in searcher.search("novelword", k=3).results] == ["new.txt"]  # the next search has it

    snap.rows_since = snap.version  # a table without stable row ids: an older version's row ids may name other rows
    again = searcher.search_many(queries, vectors, keywords=current)
    assert [h.path for h in again[1].results] == ["new.txt"] and again[0].results == []  # searched again at the new version
