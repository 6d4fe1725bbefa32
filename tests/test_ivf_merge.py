"""A large append encoded in shards and merged by inverted list (store/ivf_merge.py) gives the index a build in one go
gives: the same ids, the same top hits and scores, before and after a save, for every kind of index."""

from pathlib import Path

import numpy as np
import pytest

from lodex.store.ivf_merge import empty_copy, merge_shards
from lodex.store.vector_index import VectorIndex
from tests.test_ann import _clustered

DIM, N, SHARDS = 32, 12_000, 3


def _trained(kind: str, vectors: np.ndarray, directory: Path) -> VectorIndex:
    """An empty index of `kind` trained on every 4th vector ("sq8" and "pq8" compressed, keeping floats in `directory`)."""
    if kind == "flat":
        return VectorIndex(DIM, nprobe=8)
    exact = None if kind == "ivf" else directory
    return VectorIndex.ivf(DIM, vectors[::4], 32, nprobe=8, exact=exact, codes=None if kind == "ivf" else kind)


def _merged(kind: str, template: VectorIndex, ids: np.ndarray, vectors: np.ndarray, tmp_path: Path) -> VectorIndex:
    """The append as a distributed run makes it: each shard added to an empty copy of the trained index by a worker of
    its own (saved in a directory of its own, loaded by the driver), then merged into an empty main index."""
    main = empty_copy(template, tmp_path / "main")
    shards = []
    for number, part in enumerate(np.array_split(np.arange(N), SHARDS)):
        directory = tmp_path / f"shard{number}"
        directory.mkdir()
        shard = empty_copy(template, directory)
        shard.add(ids[part], vectors[part])
        shard.save(directory, 0)
        loaded = VectorIndex.load(directory, 0, DIM, nprobe=8)
        assert loaded is not None
        shards.append(loaded)
    merge_shards(main, shards)
    assert all(len(shard) == 0 for shard in shards if shard.kind != "flat")
    return main


@pytest.mark.parametrize("kind", ["flat", "ivf", "sq8", "pq8"])
def test_shards_merged_by_inverted_list_answer_as_the_index_built_in_one_go(tmp_path: Path, kind: str) -> None:
    vectors = _clustered(N, DIM)
    ids = np.arange(N, dtype=np.int64) * 7 + 3
    (tmp_path / "one").mkdir()
    (tmp_path / "main").mkdir()
    template = _trained(kind, vectors, tmp_path / "template")
    one = empty_copy(template, tmp_path / "one")
    one.add(ids, vectors)
    merged = _merged(kind, template, ids, vectors, tmp_path)
    assert merged.kind == one.kind == template.kind and len(merged) == N
    assert np.array_equal(merged.ids(), np.sort(ids))
    queries = _clustered(50, DIM, seed=9)
    want_scores, want_ids = one.search_batch(queries, 10)
    merged_scores, merged_ids = merged.search_batch(queries, 10)
    assert np.array_equal(merged_ids, want_ids) and np.allclose(merged_scores, want_scores, atol=1e-6)
    merged.save(tmp_path / "main", 5)
    loaded = VectorIndex.load(tmp_path / "main", 5, DIM, nprobe=8)
    assert loaded is not None and not len(loaded.missing_vectors())
    assert np.array_equal(loaded.search_batch(queries, 10)[1], want_ids)
    assert np.allclose(loaded.vectors(ids[:20]), one.vectors(ids[:20]), atol=1e-6)
    if kind == "ivf":  # the hash map from chunk id is whole again: removals by id work
        loaded.remove(ids[:100])
        assert not set(loaded.search_batch(vectors[:100], 5)[1].ravel().tolist()) & set(ids[:100].tolist())


@pytest.mark.parametrize("kind", ["ivf", "sq8"])
def test_a_shard_encoded_with_other_clusters_is_refused(tmp_path: Path, kind: str) -> None:
    vectors = _clustered(N, DIM)
    main = _trained(kind, vectors, tmp_path / "main")
    other = _trained(kind, _clustered(N, DIM, seed=3), tmp_path / "other")
    other.add(np.arange(100, dtype=np.int64), vectors[:100])
    with pytest.raises(ValueError, match="other clusters"):
        merge_shards(main, [other])
    assert len(main) == 0


def test_a_compressed_shard_must_be_saved_before_it_is_merged(tmp_path: Path) -> None:
    vectors = _clustered(N, DIM)
    main = _trained("sq8", vectors, tmp_path / "main")
    (tmp_path / "shard").mkdir()
    shard = empty_copy(main, tmp_path / "shard")
    shard.add(np.arange(100, dtype=np.int64), vectors[:100])
    with pytest.raises(ValueError, match="saved before"):
        merge_shards(main, [shard])
