"""Ranking metrics against hand-computed values, and the bundled-collection writer."""

import math
from pathlib import Path

import pytest

from lodex.search.collections import Collection, write_files
from lodex.search.metrics import evaluate, mrr_at, ndcg_at, recall_at

JUDGED = {"a": 2, "c": 1, "d": 3, "z": 0}


def test_ndcg_by_hand() -> None:
    dcg = 2 / 1 + 0 + 1 / 2  # ranks 1 and 3: log2(2) = 1, log2(4) = 2
    idcg = 3 / 1 + 2 / math.log2(3) + 1 / 2
    assert ndcg_at(["a", "b", "c"], JUDGED, 10) == pytest.approx(dcg / idcg)
    assert ndcg_at(["d", "a", "c"], JUDGED, 10) == pytest.approx(1.0)
    assert ndcg_at(["b", "z"], JUDGED, 10) == 0.0
    assert ndcg_at(["b", "a"], JUDGED, 1) == 0.0


def test_recall_and_mrr_by_hand() -> None:
    assert recall_at(["a", "b", "c"], JUDGED, 100) == pytest.approx(2 / 3)
    assert recall_at(["a", "b", "c"], JUDGED, 1) == pytest.approx(1 / 3)
    assert mrr_at(["x", "y", "c"], JUDGED, 10) == pytest.approx(1 / 3)
    assert mrr_at(["x", "y", "c"], JUDGED, 2) == 0.0


def test_evaluate_skips_queries_without_relevant_documents() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 0}}
    scores = evaluate({"q1": ["a"], "q2": ["b"]}, qrels)
    assert scores == {"ndcg@10": 1.0, "recall@100": 1.0, "mrr@10": 1.0}


def test_bundles_take_the_best_grade_of_their_members(tmp_path: Path) -> None:
    docs = {str(i): (f"title {i}", f"text {i}") for i in range(10)}
    collection = Collection("toy", docs, {"q": "query"}, {"q": {"1": 1, "2": 3, "3": 0}})
    owner, qrels = write_files(collection, tmp_path / "plain")
    assert len(list((tmp_path / "plain").iterdir())) == 10 and qrels["q"]["2.txt"] == 3
    owner, qrels = write_files(collection, tmp_path / "bundled", bundle=4)
    files = sorted(p.name for p in (tmp_path / "bundled").iterdir())
    assert files == ["bundle-0000.txt", "bundle-0001.txt", "bundle-0002.txt"]
    assert qrels["q"][owner["2"]] == 3
    if owner["1"] != owner["2"]:
        assert qrels["q"][owner["1"]] == 1
    text = (tmp_path / "bundled" / owner["2"]).read_text()
    assert "title 2\n\ntext 2" in text
