"""bench/scaleout.py in its quick mode, with every fault on (added latency, refused requests, lost replies, a rival
writer): both designs, 1 and 4 simulated machines, each index whole at the end (every chunk and document once, the
rival's included, nothing else), and the faults really met. No timing is asserted: the figures are a full sweep's."""

import pytest

from bench.scale.scaleout import main


@pytest.mark.slow
def test_the_scaleout_harness_keeps_every_row_once_under_faults() -> None:
    points = main(["--quick"])
    assert {(p.design, p.machines) for p in points} == {(d, n) for d in ("single", "fragments") for n in (1, 4)}
    for p in points:
        assert p.check["ok"], (p.design, p.machines, p.check)
        assert p.check["chunk_rows"] == p.check["unique_chunk_ids"] == p.check["expected_chunks"] > 0
        assert p.check["document_rows"] == p.check["expected_documents"] == p.docs + len(p.rival)
        assert p.commits and p.seconds > 0
    met = {key for p in points for key in p.tries if key.startswith("s3 ")}
    assert "s3 refused" in met and any(key.startswith("s3 lost") for key in met)
    assert sum(len(p.rival) for p in points) > 0
