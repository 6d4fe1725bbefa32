"""`lodex eval`: a BEIR-layout collection indexed and searched through the real path, metrics per mode."""

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lodex.api.cli import app
from lodex.search.evaluation import score_modes
from lodex.search.metrics import evaluate
from tests.conftest import make_pipeline
from tests.fakes import FakeEncoder

runner = CliRunner()


@pytest.fixture
def collection(cli_home: Path) -> Path:
    (folder := cli_home / "tiny").mkdir()
    docs = {
        "d1": "zanzibar spice trade routes",
        "d2": "madagascar vanilla farming",
        "d3": "arctic tern migration",
        "d4": "hypersonic heat transfer",
        "d5": "library classification schemes",
        "d6": "blood pressure in children",
    }
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": k, "title": "", "text": v}) + "\n" for k, v in docs.items()))
    (folder / "queries.jsonl").write_text(
        '{"_id": "q1", "text": "zanzibar"}\n{"_id": "q2", "text": "vanilla madagascar"}\n{"_id": "q3", "text": "unjudged"}\n'
    )
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t2\nq2\td2\t1\n")
    return folder


def test_eval_json_reports_every_mode(collection: Path) -> None:
    result = runner.invoke(app, ["eval", str(collection), "--json", "--ranking", "max,blend"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["dataset"] == "tiny" and body["bundle"] == 1 and body["files"] == 6 and body["queries"] == 2
    assert set(body["modes"]) == {"bm25", "dense", "hybrid"}
    assert set(body["rankings"]) == {"dense:max", "hybrid:max", "dense:blend", "hybrid:blend"}
    for metrics in list(body["modes"].values()) + list(body["rankings"].values()):
        assert set(metrics) == {"ndcg@10", "recall@100", "mrr@10", "query_ms"} and metrics["query_ms"] >= 0
        # each judged query's one relevant document holds its words (no other does): found first in every mode
        assert {m: metrics[m] for m in ("ndcg@10", "recall@100", "mrr@10")} == {"ndcg@10": 1.0, "recall@100": 1.0, "mrr@10": 1.0}


def test_eval_bundles_and_text_output(collection: Path) -> None:
    result = runner.invoke(app, ["eval", str(collection), "--bundle", "3", "--mode", "bm25"])
    assert result.exit_code == 0, result.output
    assert "bundle 3: 2 files" in result.stdout and "bm25" in result.stdout and "nDCG@10" in result.stdout


def test_eval_refuses_what_is_not_a_collection(tmp_path: Path, collection: Path) -> None:
    result = runner.invoke(app, ["eval", str(tmp_path / "nowhere")])
    assert result.exit_code == 2 and "not a BEIR-layout collection" in result.output and "Traceback" not in result.output
    result = runner.invoke(app, ["eval", str(collection), "--mode", "fuzzy"])
    assert result.exit_code == 2 and "unknown mode or ranking: fuzzy" in result.output


def test_evaluate_gives_the_hand_computed_means() -> None:
    qrels = {
        "q1": {"d2": 1, "d1": 2, "d9": 0},  # graded: the ideal order is d1, d2 (not the order given)
        "q2": {"d5": 1, "d6": 0},  # its relevant document is never retrieved
        "q3": {"d8": 3},  # judged, but no run at all: counts as zero
        "q4": {"d9": 0},  # nothing relevant: left out of the means
        "q5": {"x": 1},  # found at rank 11: outside nDCG@10 and MRR@10, inside Recall@100
    }
    runs = {
        "q1": ["d3", "d1", "d9", "d2"],
        "q2": ["d6", "d7"],
        "q4": ["d9"],
        "q5": [f"f{i}" for i in range(10)] + ["x"],
        "q6": ["d1"],
    }  # q6: not judged, ignored
    q1_ndcg = (2 / math.log2(3) + 1 / math.log2(5)) / (2 / 1 + 1 / math.log2(3))
    assert evaluate(runs, qrels) == pytest.approx({"ndcg@10": q1_ndcg / 4, "recall@100": (1 + 0 + 0 + 1) / 4, "mrr@10": (1 / 2) / 4})
    assert evaluate({"q1": ["d2", "d1"]}, {"q1": {"d2": 1, "d1": 2}})["ndcg@10"] == pytest.approx(
        (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))
    )  # the better-graded document second
    assert evaluate(runs, {"q4": {"d9": 0}}) == {"ndcg@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0}


def test_score_modes_gives_the_hand_computed_metrics_in_every_mode_and_ranking(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    docs = {
        "d1": "zanzibar spice trade routes",
        "d2": "madagascar vanilla farming",
        "d3": "arctic tern migration",
        "d4": "hypersonic heat transfer",
        "d5": "vanilla ice cream recipes",
        "d6": "library classification schemes",
        "d7": "migration of birds",
    }
    for name, text in docs.items():
        (root / f"{name}.txt").write_text(text + "\n")
    _, indexer, searcher = make_pipeline(tmp_path / "data", FakeEncoder())
    indexer.run(root)
    queries = {"q1": "zanzibar spice", "q2": "madagascar vanilla", "q3": "arctic tern migration birds", "q4": "hypersonic", "q5": "library"}
    qrels = {
        "q1": {"d1.txt": 2, "d3.txt": 0},
        "q2": {"d2.txt": 1, "d5.txt": 2},  # d2 holds both words and comes first, though d5 is graded higher
        "q3": {"d7.txt": 1, "d3.txt": 0},  # d3 holds three of the words: the relevant d7 comes second
        "q4": {"d4.txt": 0},
    }  # nothing relevant: not in the means; q5 is not judged at all
    result = score_modes(searcher, queries, qrels, ("bm25", "dense", "hybrid"), ("max", "topm", "mean", "blend"))
    q2_ndcg = (1 / 1 + 2 / math.log2(3)) / (2 / 1 + 1 / math.log2(3))
    q3_ndcg = (1 / math.log2(3)) / 1
    expected = {"ndcg@10": round((1 + q2_ndcg + q3_ndcg) / 3, 4), "recall@100": 1.0, "mrr@10": round((1 + 1 + 1 / 2) / 3, 4)}
    assert set(result["modes"]) == {"bm25", "dense", "hybrid"}
    assert set(result["rankings"]) == {f"{m}:{r}" for m in ("dense", "hybrid") for r in ("max", "topm", "mean", "blend")}
    for name, metrics in [*result["modes"].items(), *result["rankings"].items()]:
        assert metrics.pop("query_ms") >= 0
        assert metrics == expected, name
