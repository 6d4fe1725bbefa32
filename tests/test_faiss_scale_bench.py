"""bench/scale/faiss_scale.py in a tiny mode runs every step (train, a worker per shard, the merge, the ground truth, a
fresh process's search) to completion, and the merged index holds every chunk and finds its neighbours. No timing is
asserted: the figures are the ones in docs/scaling.md."""

from pathlib import Path

import pytest

from bench.scale.faiss_scale import main


@pytest.mark.slow
def test_the_faiss_scale_bench_runs_its_tiny_mode(tmp_path: Path) -> None:
    report = main(["--chunks", "10000", "--shards", "2", "--queries", "10", "--nprobe", "", "--workdir", str(tmp_path / "work")])
    assert [shard["rows"] for shard in report["encode"]] == [5_000, 5_000]
    assert report["merge"]["rows"] == report["truth"]["vectors"] == report["search"]["rows"] == 10_000
    assert report["search"]["second"]["recall"] >= 0.9
    assert not (tmp_path / "work" / "index").exists()  # gone without --keep
