"""bench/quality/paired.py: the paired change between two runs over the same questions and its bootstrap interval; and the
question sets bench/quality/late_heldout.py asks (every target a file the folder builds from, no question asked twice)."""

import json
from pathlib import Path

import pytest

from bench.quality.paired import changed, paired_delta

ROOT = Path(__file__).resolve().parents[1]


def test_a_constant_change_has_no_spread() -> None:
    base = {f"q{i}": i / 10 for i in range(10)}
    mean, low, high = paired_delta(base, {q: s + 0.05 for q, s in base.items()})
    assert mean == pytest.approx(0.05) and low == pytest.approx(0.05) and high == pytest.approx(0.05)


def test_one_question_moving_on_a_small_set_is_not_told_from_noise() -> None:
    base = {f"q{i}": 1.0 for i in range(40)}
    other = dict(base, q7=0.5)  # one question's target falls from rank 1 to rank 3
    mean, low, high = paired_delta(base, other)
    assert mean == pytest.approx(-0.5 / 40)
    assert low < mean < high == pytest.approx(0.0)  # the interval reaches no change at all
    assert changed(base, other) == (0, 1)


def test_only_the_questions_both_runs_answered_count() -> None:
    mean, _, _ = paired_delta({"a": 0.0, "b": 1.0}, {"b": 0.5, "c": 1.0})
    assert mean == pytest.approx(-0.5)
    with pytest.raises(ValueError):
        paired_delta({"a": 1.0}, {"b": 1.0})


@pytest.mark.parametrize(
    "first, extra",
    [
        ("bench/data/pipelinedata/git-doc.json", "bench/data/pipelinedata/git-doc-extra.json"),
        ("bench/data/langdata/de.json", "bench/data/langdata/de-extra.json"),
    ],
)
def test_the_second_question_sets_add_new_questions(first: str, extra: str) -> None:
    old = json.loads((ROOT / first).read_text(encoding="utf-8"))
    new = json.loads((ROOT / extra).read_text(encoding="utf-8"))
    asked = [q["question"] for q in old + new]
    assert len(new) >= 150 and len(set(asked)) == len(asked)
    assert all(q["target"].endswith(".html") and q["evidence"].strip() and ".." not in q["target"] for q in new)
