"""bench/indexing/pipelines.py's scoring: documents ranked by their best chunk, top-1/top-3/MRR@10, and nDCG@10 as lodex's own."""

import json
from pathlib import Path

import pytest

from bench.indexing.pipeline_scores import documents_by_best_chunk, quality
from lodex.search.metrics import mrr_at, ndcg_at

ROOT = Path(__file__).resolve().parents[1]


def test_documents_take_the_place_of_their_best_chunk() -> None:
    chunks = ["b.txt", "a.txt", "b.txt", "c.txt", "a.txt", "d.txt"]
    assert documents_by_best_chunk(chunks) == ["b.txt", "a.txt", "c.txt", "d.txt"]
    assert documents_by_best_chunk(chunks, depth=2) == ["b.txt", "a.txt"]


def test_top_k_and_mrr_over_the_questions() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}, "q4": {"z": 0}}  # q4: nothing relevant, not counted
    runs = {"q1": ["a", "x"], "q2": ["x", "y", "b"], "q3": ["x"] * 3 + ["c"]}
    got = quality(runs, qrels)
    assert got["top1"] == pytest.approx(1 / 3)
    assert got["top3"] == pytest.approx(2 / 3)
    assert got["mrr@10"] == pytest.approx((1 + 1 / 3 + 1 / 4) / 3)
    assert quality({}, qrels)["mrr@10"] == 0.0  # a question left unanswered counts 0


def test_ndcg_and_mrr_are_lodex_own_definitions() -> None:
    """Graded judgements (Cranfield's qrels): the same figures as lodex.search.metrics, so the tables compare."""
    judged = {"d1": 4, "d2": 2, "d3": 1, "d9": 3}
    ranking = ["d3", "x", "d1", "d2", "y", "d9"]
    got = quality({"q": ranking}, {"q": judged})
    assert got["ndcg@10"] == pytest.approx(ndcg_at(ranking, judged, 10))
    assert got["mrr@10"] == pytest.approx(mrr_at(ranking, judged, 10))
    assert 0 < got["ndcg@10"] < 1


def test_git_doc_questions_are_many_and_name_one_file_each() -> None:
    questions = json.loads((ROOT / "bench" / "data" / "pipelinedata" / "git-doc.json").read_text(encoding="utf-8"))
    assert len(questions) >= 30
    assert len({q["question"] for q in questions}) == len(questions)
    assert all(q["target"].endswith(".html") and q["question"].strip() for q in questions)
