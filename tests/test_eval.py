"""`lodex eval`: a BEIR-layout collection indexed and searched through the real path, metrics per mode."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lodex.api.cli import app

runner = CliRunner()


@pytest.fixture
def collection(cli_home: Path) -> Path:
    (folder := cli_home / "tiny").mkdir()
    docs = {"d1": "zanzibar spice trade routes", "d2": "madagascar vanilla farming", "d3": "arctic tern migration",
            "d4": "hypersonic heat transfer", "d5": "library classification schemes", "d6": "blood pressure in children"}
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": k, "title": "", "text": v}) + "\n" for k, v in docs.items()))
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "zanzibar"}\n{"_id": "q2", "text": "vanilla madagascar"}\n'
                                          '{"_id": "q3", "text": "unjudged"}\n')
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
        assert {"ndcg@10", "recall@100", "mrr@10", "query_ms"} <= set(metrics)
        assert all(0.0 <= metrics[m] <= 1.0 for m in ("ndcg@10", "recall@100", "mrr@10"))
    assert body["modes"]["bm25"] == body["modes"]["bm25"] | {"ndcg@10": 1.0, "recall@100": 1.0, "mrr@10": 1.0}


def test_eval_bundles_and_text_output(collection: Path) -> None:
    result = runner.invoke(app, ["eval", str(collection), "--bundle", "3", "--mode", "bm25"])
    assert result.exit_code == 0, result.output
    assert "bundle 3: 2 files" in result.stdout and "bm25" in result.stdout and "nDCG@10" in result.stdout


def test_eval_refuses_what_is_not_a_collection(tmp_path: Path, collection: Path) -> None:
    result = runner.invoke(app, ["eval", str(tmp_path / "nowhere")])
    assert result.exit_code == 2 and "not a BEIR-layout collection" in result.output and "Traceback" not in result.output
    result = runner.invoke(app, ["eval", str(collection), "--mode", "fuzzy"])
    assert result.exit_code == 2 and "unknown mode or ranking: fuzzy" in result.output
