"""bench/serving/embed_load.py in its quick mode runs to completion against a real `lodex serve` and the bundled model: every
embedding request answered (200, or 429 sent again after its Retry-After), searches answered in both phases. No timing
is asserted: the figures are the lead's, on a quiet machine."""

from pathlib import Path

import pytest

from bench.serving.embed_load import main


@pytest.mark.slow
def test_the_embedding_load_bench_runs_its_quick_mode(tmp_path: Path, fast_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bench's `lodex index` and `lodex serve` in fast mode (what the default, "auto", chooses here) on the run's
    model cache (its int8 export and measured path there: both processes start from the recipe, without PyTorch)."""
    monkeypatch.setenv("LODEX_ENCODER__PRECISION", "fast")
    monkeypatch.setenv("LODEX_ENCODER__CACHE_DIR", str(fast_cache))
    report = main(
        [
            "--requests",
            "6",
            "--inputs",
            "16",
            "--embed-clients",
            "3",
            "--search-clients",
            "2",
            "--baseline-searches",
            "3",
            "--max-queued",
            "20",
            "--slice",
            "4",
            "--work-dir",
            str(tmp_path / "work"),
        ]
    )
    assert report["ok"] and report["documents"] == 24
    assert report["embed_statuses"]["200"] == 6 and set(report["embed_statuses"]) <= {"200", "429"}
    assert report["idle"]["searches"] == 2 * 3 and report["idle"]["statuses"] == {"200": 6}
    assert report["loaded"]["searches"] >= 1 and set(report["loaded"]["statuses"]) == {"200"}
    assert report["p50_ratio"] > 0 and report["p99_ratio"] > 0
