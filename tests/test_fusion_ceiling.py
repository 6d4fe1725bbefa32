"""Fusion "ceiling": the keyword side weighed by its strength (its best score against the query's keyword ceiling),
and the ceiling as the store finds it."""

from pathlib import Path

import numpy as np
import pytest

from lodex.search.fusion import Fusion, Hits
from tests.conftest import indexed_notes

A, W, C = 1, 2, 3  # chunk ids: the dense side's right answer, a chunk both lists have, a third
DENSE = Hits(np.array([A, W, C]), np.array([0, 1, 2]), np.array([0.80, 0.79, 0.70]))  # normalized: 1, 0.9, 0


def _keyword(scores: list[float], ceiling: float) -> Hits:
    return Hits(np.array([W, C]), np.array([1, 2]), np.array(scores), ceiling)


def test_a_weak_keyword_match_does_not_outrank_a_strong_dense_hit() -> None:
    weak = _keyword([1.0, 0.9], ceiling=20.0)  # W shares one common word: a twentieth of what the query's terms could score
    assert Fusion(method="convex").fuse(DENSE, weak).ids[0] == W  # min-max gives it BM25's whole share: 0.54 + 0.4
    ceiling = Fusion(method="ceiling", ceiling_share=0.5)
    assert ceiling.strength(weak) == pytest.approx(0.1)
    fused = ceiling.fuse(DENSE, weak)
    assert fused.ids.tolist() == [A, W, C] and fused.scores[:2].tolist() == pytest.approx([0.6, 0.54 + 0.04])
    assert ceiling.feedback_share(weak) == pytest.approx(0.001)  # the feedback vector hardly moves toward it


def test_a_full_keyword_match_still_wins_and_fuses_as_convex() -> None:
    full = _keyword([12.0, 3.0], ceiling=20.0)  # W matches the query's terms well: over half its ceiling
    convex, ceiling = Fusion(method="convex").fuse(DENSE, full), Fusion(method="ceiling", ceiling_share=0.5).fuse(DENSE, full)
    assert ceiling.ids.tolist() == convex.ids.tolist() == [W, A, C]
    assert ceiling.scores.tolist() == convex.scores.tolist()
    unknown = _keyword([1.0, 0.9], ceiling=float("inf"))  # a list whose ceiling was not asked for: convex
    assert Fusion(method="ceiling").fuse(DENSE, unknown).scores.tolist() == Fusion().fuse(DENSE, unknown).scores.tolist()
    assert Fusion(method="convex").strength(_keyword([1.0, 0.9], 20.0)) == 1.0


def test_the_ceiling_sums_each_query_terms_best_score_and_counts_an_absent_term_as_the_rarest(tmp_path: Path) -> None:
    texts = {f"filler-{i}.txt": f"common words about flow number {i}\n" for i in range(6)}
    texts |= {"rare.txt": "zanzibar spice routes\n", "both.txt": "zanzibar common harbour\n"}
    _, store, _, _ = indexed_notes(tmp_path, texts)
    store.maybe_optimize(force=True)
    version = store.refresh()[1]

    def best(word: str) -> float:
        return float(store.start_keyword_search([word], 1, version)()[0][1][0])

    ceilings = store.start_keyword_ceilings(["zanzibar common", "common quixotic", "zanzibar"], version, [None] * 3)()
    assert ceilings == pytest.approx([best("zanzibar") + best("common"), 2 * best("common"), best("zanzibar")])
    hits = store.start_keyword_search(["zanzibar common"], 10, version)()[0][1]
    assert max(hits) <= ceilings[0] + 1e-6  # no chunk scores more than the ceiling
    assert best("zanzibar") > best("common")  # the rare word weighs more: a chunk with "common" alone is weak
