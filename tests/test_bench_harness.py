"""bench/harness.py: rounds alternate their order and keep each run's least disturbed result; latency percentiles as
bench/serving/load.py and bench/scale/scale.py print them; a dated result block names the machine and the command; an
index built in process is the application object, rebuilt each time, searched as its settings say."""

import re
import sys
from pathlib import Path

import pytest

from bench.harness import ROOT, alternating, index_in_process, percentile_ms, publish, result_block
from tests.conftest import notes_and_settings
from tests.fakes import FakeEncoder


def test_rounds_alternate_their_order_and_keep_the_best_of_each() -> None:
    order: list[tuple[str, int]] = []
    seconds = {("a", 0): 3.0, ("b", 0): 2.0, ("b", 1): 1.0, ("a", 1): 4.0, ("a", 2): 2.5, ("b", 2): 5.0}

    def run(name: str, round_: int) -> float:
        order.append((name, round_))
        return seconds[(name, round_)]

    best = alternating(["a", "b"], 3, run, lambda new, kept: new < kept)
    assert order == [("a", 0), ("b", 0), ("b", 1), ("a", 1), ("a", 2), ("b", 2)]
    assert best == {"a": 2.5, "b": 1.0}


def test_percentiles_are_the_lower_nearest_rank_in_milliseconds() -> None:
    assert percentile_ms([0.004, 0.001, 0.003, 0.002], 0.5) == pytest.approx(2.0)
    assert percentile_ms([0.004, 0.001, 0.003, 0.002], 0.99) == pytest.approx(3.0)
    assert percentile_ms([], 0.5) != percentile_ms([], 0.5)  # NaN


def test_a_result_block_is_dated_and_names_the_machine_and_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", [str(ROOT / "bench" / "quality" / "quality.py"), "--bundle", "25"])
    lines = result_block("a title", "- texts: 3")
    assert lines[0].startswith("## ") and lines[0].endswith(" UTC — a title")
    assert lines[2].startswith("- machine: cpu: ") and "flags:" in lines[2]
    assert lines[3] == "- command: `python bench/quality/quality.py --bundle 25`"
    assert lines[4:] == ["- texts: 3", ""]
    out = tmp_path / "results.md"
    publish(lines, out)
    publish(lines, out)
    assert out.read_text(encoding="utf-8") == 2 * ("\n".join(lines) + "\n")
    assert capsys.readouterr().out.startswith(lines[0])


def test_every_bench_script_has_its_line_in_the_readme() -> None:
    readme = (ROOT / "bench" / "README.md").read_text(encoding="utf-8")
    missing = [str(p.relative_to(ROOT)) for p in sorted(ROOT.glob("bench/*/*.py")) if f"`{p.name}`" not in readme]
    assert not missing, f"bench/README.md names no line for {missing}"


def test_no_bench_script_reaches_into_a_private_name() -> None:
    private = re.compile(r"\b(?!self\b|cls\b|os\b|sys\b)[A-Za-z_]\w*(?:\(\))?\._[a-z]\w*")
    found = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for p in sorted(ROOT.glob("bench/**/*.py"))
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if private.search(line.split("#")[0])
    ]
    assert not found, "a bench uses a private name; give the package a public one:\n" + "\n".join(found)


def test_an_index_built_in_process_is_the_application_object_rebuilt_and_searched_as_its_settings_say(tmp_path: Path) -> None:
    root, settings = notes_and_settings(tmp_path, 3)
    settings.search.passages = 0
    for _ in range(2):  # the second build starts anew (--rebuild), the first one's write lock released as it closed
        app, summary = index_in_process(settings, root, encoder=FakeEncoder())
        with app:
            assert (app.role, summary.added, summary.unchanged) == ("write", 3, 0)
            hits = app.search("wings and lift topic1", k=3).results
            assert {Path(hit.path).name for hit in hits} == {"0.txt", "1.txt", "2.txt"}
            assert all(not hit.passages for hit in hits)
    assert (tmp_path / "data").is_dir()
