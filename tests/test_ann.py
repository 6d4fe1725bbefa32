"""Large-index mode: the IVF index keeps deletes and updates exact, survives saving, and the store switches to it."""

from pathlib import Path

import numpy as np
import pytest

from lodex.store import faiss_lifecycle
from lodex.store.faiss_lifecycle import FaissLifecycle
from lodex.store.lance_store import AnnPolicy, Store
from lodex.store.vector_index import VectorIndex
from tests.conftest import make_pipeline
from tests.fakes import FakeEncoder


def _clustered(n: int, dim: int = 32, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((64, dim))
    x = centers[rng.integers(0, 64, n)] + 0.5 * rng.standard_normal((n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_ivf_deletes_and_updates_are_never_stale(tmp_path: Path) -> None:
    vectors = _clustered(20_000)
    ids = np.arange(20_000, dtype=np.int64) * 3 + 11
    flat = VectorIndex(32, nprobe=16)
    flat.add(ids, vectors)
    ivf = flat.to_ivf()
    assert ivf.kind == "ivf" and len(ivf) == 20_000 and np.array_equal(ivf.ids(), ids)
    _, exact = flat.search_batch(vectors[:200], 10)
    _, approx = ivf.search_batch(vectors[:200], 10)
    assert np.mean([len(set(a) & set(e)) / 10 for a, e in zip(approx, exact)]) >= 0.9  # close to exact

    gone = ids[:5_000]
    ivf.remove(gone)
    _, hits = ivf.search_batch(vectors[:5_000], 20)  # the deleted vectors' own neighbourhoods
    assert not set(hits.ravel().tolist()) & set(gone.tolist())
    moved = _clustered(100, seed=7)
    ivf.remove(ids[5_000:5_100])
    ivf.add(ids[5_000:5_100], moved)  # an update: same ids, new vectors
    scores, hits = ivf.search_batch(moved, 1)
    assert hits[:, 0].tolist() == ids[5_000:5_100].tolist() and np.allclose(scores[:, 0], 1.0, atol=1e-3)
    assert np.allclose(ivf.vectors(ids[5_000:5_010].tolist()), moved[:10], atol=1e-3)  # stored as float16

    ivf.save(tmp_path, 7)
    loaded = VectorIndex.load(tmp_path, 7, 32, nprobe=4)
    assert loaded.kind == "ivf" and loaded.index.nprobe == 4 and np.array_equal(loaded.ids(), ivf.ids())
    assert np.array_equal(loaded.to_flat().ids(), ivf.ids())


def test_store_switches_to_ivf_and_keeps_it_in_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(AnnPolicy, "MIN_IVF", 50)
    root = tmp_path / "docs"
    root.mkdir()
    for i in range(120):
        (root / f"{i:03d}.txt").write_text(f"note {i} on wings lift drag flow heat topic{i} " * 3)
    store, indexer, searcher = make_pipeline(tmp_path / "data", FakeEncoder())
    store.ann = AnnPolicy(kind="auto", above=100, nprobe=64)
    indexer.run(root)
    assert store.vector_index().kind == "ivf"
    reader = Store(tmp_path / "data", store.dim, AnnPolicy(nprobe=64))  # another process's view: the saved file
    assert reader.vector_index().kind == "ivf"
    assert searcher.search("topic7", k=1, mode="dense").results[0].path == "007.txt"

    victim = store.document_records()["005.txt"]
    old_ids = store.chunks_of_documents([victim.id], ["id"])["id"].to_pylist()
    (root / "005.txt").unlink()
    (root / "006.txt").write_text("rewritten entirely: zeppelins and airships " * 3)
    indexer.run(root)
    for view in (store, Store(tmp_path / "data", store.dim, AnnPolicy(nprobe=64))):
        index = view.vector_index()
        assert index.kind == "ivf" and not set(old_ids) & set(index.ids().tolist())
        lance_ids = view.chunks.search().select(["id"]).limit(None).to_arrow()["id"].to_pylist()
        assert sorted(lance_ids) == index.ids().tolist()  # FAISS ids == Lance ids
    assert "005.txt" not in [h.path for h in searcher.search("topic5", k=10, mode="dense").results]
    assert searcher.search("zeppelins airships", k=1, mode="dense").results[0].path == "006.txt"

    store.ann = AnnPolicy(kind="flat")  # configured back to exact: the next save converts
    (root / "007.txt").write_text("one more change")
    indexer.run(root)
    assert store.vector_index().kind == "flat"


def test_a_large_run_lets_the_index_go_and_the_save_rebuilds_it_from_lance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(faiss_lifecycle, "HOLD_ROWS", 20)
    built: list[str | None] = []
    build = FaissLifecycle._build
    monkeypatch.setattr(FaissLifecycle, "_build", lambda self, kind=None: built.append(kind) or build(self, kind))
    root = tmp_path / "docs"
    root.mkdir()
    for i in range(120):
        (root / f"{i:03d}.txt").write_text(f"note {i} on wings lift drag flow heat topic{i} " * 3)
    store, indexer, searcher = make_pipeline(tmp_path / "data", FakeEncoder())
    store.track_index()
    built.clear()
    indexer.run(root)
    assert built, "more than HOLD_ROWS new vectors: the save builds the index from Lance"
    for view in (store, Store(tmp_path / "data", store.dim)):
        lance_ids = view.chunks.search().select(["id"]).to_arrow()["id"].to_pylist()
        assert sorted(lance_ids) == sorted(view.vector_index().ids().tolist())
    assert searcher.search("topic7", k=1, mode="dense").results[0].path == "007.txt"

    built.clear()
    (root / "007.txt").write_text("rewritten: zeppelins and airships")
    indexer.run(root)
    assert not built, "a small change is kept in memory"
    assert sorted(store.chunks.search().select(["id"]).to_arrow()["id"].to_pylist()) == sorted(store.vector_index().ids().tolist())
    assert searcher.search("zeppelins airships", k=1, mode="dense").results[0].path == "007.txt"
