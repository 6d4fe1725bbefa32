"""Paired comparison of two runs over the same questions: the mean per-question difference and its 95% bootstrap
interval, so a change can be told from the noise of a small question set."""

import random
from collections.abc import Mapping


def paired_delta(base: Mapping[str, float], other: Mapping[str, float], rounds: int = 10_000, seed: int = 0) -> tuple[float, float, float]:
    """(mean of other - base, 2.5th and 97.5th percentile of that mean over `rounds` resamples of the questions).
    Both map question id → score; only the questions both have count."""
    qids = sorted(base.keys() & other.keys())
    if not qids:
        raise ValueError("no question in common")
    diffs = [other[q] - base[q] for q in qids]
    n = len(diffs)
    rng = random.Random(seed)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(rounds))
    return sum(diffs) / n, means[int(0.025 * rounds)], means[int(0.975 * rounds) - 1]


def changed(base: Mapping[str, float], other: Mapping[str, float]) -> tuple[int, int]:
    """How many questions scored higher and how many lower in `other` than in `base`."""
    qids = base.keys() & other.keys()
    return (sum(1 for q in qids if other[q] > base[q] + 1e-12), sum(1 for q in qids if other[q] < base[q] - 1e-12))
