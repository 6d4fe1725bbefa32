"""Large-index mode: the IVF index and the compressed one (8-bit codes, candidates re-scored from float32 vectors on
disk) keep deletes and updates exact and survive saving, and the store switches between them and the flat one by size."""

import threading
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from lodex.api.index_policy import ann_policy
from lodex.api.settings import Settings
from lodex.search.searcher import Searcher
from lodex.store import exact_vectors, faiss_lifecycle
from lodex.store.faiss_lifecycle import FaissLifecycle
from lodex.store.lance_store import AnnPolicy, LanceStore
from lodex.store.schema import vectors_of
from lodex.store.vector_index import PQ_TRAIN, VectorIndex
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
    reader = LanceStore(tmp_path / "data", store.dim, AnnPolicy(nprobe=64))  # another process's view: the saved file
    assert reader.vector_index().kind == "ivf"
    assert searcher.search("topic7", k=1, mode="dense").results[0].path == "007.txt"

    victim = store.document_records()["005.txt"]
    old_ids = store.chunks_of_documents([victim.id], ["id"])["id"].to_pylist()
    (root / "005.txt").unlink()
    (root / "006.txt").write_text("rewritten entirely: zeppelins and airships " * 3)
    indexer.run(root)
    for view in (store, LanceStore(tmp_path / "data", store.dim, AnnPolicy(nprobe=64))):
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
    for view in (store, LanceStore(tmp_path / "data", store.dim)):
        lance_ids = view.chunks.search().select(["id"]).to_arrow()["id"].to_pylist()
        assert sorted(lance_ids) == sorted(view.vector_index().ids().tolist())
    assert searcher.search("topic7", k=1, mode="dense").results[0].path == "007.txt"

    built.clear()
    (root / "007.txt").write_text("rewritten: zeppelins and airships")
    indexer.run(root)
    assert not built, "a small change is kept in memory"
    assert sorted(store.chunks.search().select(["id"]).to_arrow()["id"].to_pylist()) == sorted(store.vector_index().ids().tolist())
    assert searcher.search("zeppelins airships", k=1, mode="dense").results[0].path == "007.txt"


def _twins(n: int, dim: int = 32, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """n clustered vectors, each followed by a near-copy (cosine ~0.99999): compressed codes cannot tell the two apart,
    an exact score can. Random int64 ids, as chunk ids are."""
    base = _clustered(n, dim, seed)
    twins = base + 0.001 * np.random.default_rng(seed).standard_normal(base.shape).astype(np.float32)
    vectors = np.empty((2 * n, dim), np.float32)
    vectors[0::2], vectors[1::2] = base, twins / np.linalg.norm(twins, axis=1, keepdims=True)
    ids = np.random.default_rng(seed).choice(2**62, 2 * n, replace=False).astype(np.int64)
    return ids, vectors


def _compressed(tmp_path: Path, ids: np.ndarray, vectors: np.ndarray, nprobe: int = 16, codes: str = "pq") -> VectorIndex:
    flat = VectorIndex(vectors.shape[1], nprobe=nprobe)
    flat.add(ids, vectors)
    index = flat.to_ivf(exact=tmp_path, codes=codes)
    code_size = vectors.shape[1] // 4 if codes == "pq" else vectors.shape[1]  # product-quantized: a byte in 4 dims; sq8: a byte a dim
    assert index.kind == "compressed" and index.index.code_size == code_size
    return index


@pytest.mark.parametrize("codes", ["pq", "sq8"])
def test_a_compressed_index_refines_its_candidates_to_the_exact_top_hit(tmp_path: Path, codes: str) -> None:
    ids, vectors = _twins(10_000)  # 20,000 vectors
    index = _compressed(tmp_path, ids, vectors, codes=codes)
    planted = np.arange(0, 20_000, 97)
    scores, hits = index.search_batch(vectors[planted], 10)
    assert hits[:, 0].tolist() == ids[planted].tolist()  # the query's own vector, not its twin
    position = {i: p for p, i in enumerate(ids.tolist())}
    exact = np.einsum("qkd,qd->qk", vectors[np.vectorize(position.get)(hits)], vectors[planted])
    assert np.allclose(scores, exact, atol=1e-6) and (np.diff(scores, axis=1) <= 0).all()  # exact scores, best first
    _, coded = index.index.search(vectors[planted], 1)  # the codes alone
    assert np.mean(coded[:, 0] == ids[planted]) < 0.95, "the twins were too far apart to need the exact step"
    assert np.array_equal(index.vectors(ids[planted]), vectors[planted])  # best passages are scored on float32 vectors
    single_scores, single = index.search(vectors[planted[0]], 10)  # one query alone: the same answer
    assert single.tolist() == hits[0].tolist() and np.allclose(single_scores, scores[0])


def test_a_compressed_index_never_returns_removed_chunks(tmp_path: Path) -> None:
    ids, vectors = _twins(10_000)
    index = _compressed(tmp_path, ids, vectors)
    gone = ids[::3]
    index.remove(gone)
    assert len(index) == len(ids) - len(gone) and not set(index.ids().tolist()) & set(gone.tolist())
    _, hits = index.search_batch(vectors[::3][:3_000], 20)  # the removed vectors' own neighbourhoods
    assert not set(hits.ravel().tolist()) & set(gone.tolist())
    moved = _clustered(100, seed=9)
    index.add(gone[:100], moved)  # the same ids back, with new vectors
    scores, hits = index.search_batch(moved, 1)
    assert hits[:, 0].tolist() == gone[:100].tolist() and np.allclose(scores[:, 0], 1.0, atol=1e-6)
    assert np.array_equal(index.vectors(gone[:100]), moved)


def test_a_compressed_index_round_trips_through_its_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(exact_vectors, "MAX_SEGMENTS", 3)
    ids, vectors = _twins(10_000)
    index = _compressed(tmp_path, ids, vectors)
    index.save(tmp_path, 7)
    loaded = VectorIndex.load(tmp_path, 7, 32, nprobe=4, refine=2)
    assert loaded is not None and loaded.kind == "compressed" and (loaded.index.nprobe, loaded.refine) == (4, 2)
    assert np.array_equal(loaded.ids(), np.sort(ids)) and not len(loaded.missing_vectors())
    assert np.array_equal(loaded.vectors(ids[::7]), vectors[::7])
    (big,) = tmp_path.glob("chunks.exact.*.f32")
    written, size = big.stat().st_mtime_ns, big.stat().st_size
    for version in range(8, 14):  # each save publishes what was added since; segments are merged before they pile up
        fresh = _clustered(50, seed=version)
        loaded.remove(ids[version * 50 : version * 50 + 50])
        loaded.add(ids[version * 50 : version * 50 + 50], fresh)
        loaded.save(tmp_path, version)
        segments = sorted(p.name for p in tmp_path.glob("chunks.exact.*.f32"))
        assert 1 <= len(segments) <= 3 and [p.name for p in tmp_path.glob("chunks.v*.faiss")] == [f"chunks.v{version}.faiss"]
        assert segments[0] == big.name and big.stat().st_mtime_ns == written  # only the small new ones were merged
    again = VectorIndex.load(tmp_path, 13, 32)
    assert again is not None and np.array_equal(again.vectors(ids[650:700]), fresh)
    assert np.array_equal(again.vectors(ids[:400]), vectors[:400])
    loaded.remove(ids[1_000:])  # most vectors are garbage now: the live ones are rewritten into one segment
    loaded.save(tmp_path, 14)
    (only,) = tmp_path.glob("chunks.exact.*.f32")
    assert not big.exists() and only.stat().st_size < size / 5
    rewritten = VectorIndex.load(tmp_path, 14, 32)
    assert rewritten is not None and np.array_equal(rewritten.vectors(ids[650:700]), fresh)
    for path in tmp_path.glob("chunks.exact.*.f32"):
        path.unlink()  # another host's copy of the index, or files lost: the vectors are to come from Lance
    lost = VectorIndex.load(tmp_path, 14, 32)
    assert lost is not None and np.array_equal(np.sort(lost.missing_vectors()), np.sort(ids[:1_000]))
    assert not list(tmp_path.glob(".chunks.exact.*"))  # nothing left behind but the published files
    loaded.to_flat().save(tmp_path, 15)  # an index of another kind needs no vector files
    assert not list(tmp_path.glob("chunks.exact.*"))


class _Sized:
    """What AnnPolicy.rebuild reads of an index: its size, kind and the size its clusters were made for."""

    def __init__(self, n: int, kind: str, trained_for: int = 0) -> None:
        self.n, self.kind, self.trained_for = n, kind, trained_for

    def __len__(self) -> int:
        return self.n


def test_a_compressed_index_gets_the_configured_codes_8_bit_by_default(tmp_path: Path) -> None:
    assert ann_policy(Settings()).codes == "sq8"
    assert ann_policy(Settings(index={"compressed_codes": "pq"})).codes == "pq"
    with pytest.raises(ValidationError):
        Settings(index={"compressed_codes": "pq4"})
    train = _clustered(PQ_TRAIN, 32, 5)
    assert VectorIndex.ivf(32, train, 8, exact=tmp_path / "a").index.code_size == 32  # sq8: a byte a dimension
    assert VectorIndex.ivf(32, train, 8, exact=tmp_path / "b", codes="pq").index.code_size == 8  # a byte per 4
    assert VectorIndex.ivf(32, train[:500], 8, exact=tmp_path / "c", codes="pq").index.code_size == 32  # too few to train PQ


def test_the_ann_policy_picks_flat_then_ivf_then_compressed_and_back_with_slack() -> None:
    auto = AnnPolicy(above=50_000, compress_above=1_000_000)
    assert [auto.kind_for(n) for n in (9_999, 49_999, 50_000, 999_999, 1_000_000)] == ["flat", "flat", "ivf", "ivf", "compressed"]
    assert AnnPolicy(kind="compressed").kind_for(10_000) == "compressed" and AnnPolicy(kind="compressed").kind_for(9_999) == "flat"
    assert AnnPolicy(kind="ivf").kind_for(5_000_000) == "ivf" and AnnPolicy(kind="flat").kind_for(5_000_000) == "flat"
    growing = [(60_000, "flat", 0), (1_200_000, "ivf", 400_000), (5_000_000, "compressed", 1_000_000)]
    assert [auto.rebuild(_Sized(*case)) for case in growing] == ["ivf", "compressed", "compressed"]  # the last: retrained
    assert auto.rebuild(_Sized(1_100_000, "compressed", 1_000_000)) is None
    assert auto.rebuild(_Sized(250_000, "compressed", 1_000_000)) is None  # kept down to a quarter of compress_above
    assert auto.rebuild(_Sized(249_999, "compressed", 1_000_000)) == "ivf"
    assert auto.rebuild(_Sized(12_500, "ivf", 50_000)) is None and auto.rebuild(_Sized(12_499, "ivf", 50_000)) == "flat"
    assert auto.rebuild(_Sized(9_000, "compressed", 1_000_000)) == "flat"  # below MIN_IVF
    assert AnnPolicy(kind="ivf").rebuild(_Sized(2_000_000, "compressed", 1_000_000)) == "ivf"  # configured otherwise
    assert AnnPolicy(kind="flat").rebuild(_Sized(2_000_000, "compressed", 1_000_000)) == "flat"


def test_the_store_goes_from_flat_to_ivf_to_compressed_and_back_as_the_folder_grows_and_shrinks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(AnnPolicy, "MIN_IVF", 20)
    monkeypatch.setattr(faiss_lifecycle, "ivf_lists", lambda n: max(1, min(16, n // 4)))
    root = tmp_path / "docs"
    root.mkdir()
    store, indexer, searcher = make_pipeline(tmp_path / "data", FakeEncoder())
    policy = AnnPolicy(above=40, compress_above=200)
    store.ann = policy
    kinds = []
    for count in (30, 60, 220, 150, 45, 10):  # chunks: one a file
        for i in range(count):
            (root / f"{i:03d}.txt").write_text(f"note {i} on wings lift drag flow heat topic{i} " * 3)
        for path in sorted(root.iterdir())[count:]:
            path.unlink()
        indexer.run(root)
        reader = LanceStore(tmp_path / "data", store.dim, policy)  # another process's view: the saved file
        for view in (store, reader):
            index = view.vector_index()
            lance = view.chunks.search().select(["id", "vector"]).limit(None).to_arrow().sort_by("id")
            assert sorted(index.ids().tolist()) == lance["id"].to_pylist()
            assert np.allclose(index.vectors(lance["id"].to_numpy()), vectors_of(lance), atol=2e-3 if index.kind == "ivf" else 1e-6)
        kinds.append(reader.vector_index().kind)
        assert [h.path for h in searcher.search(f"topic{count - 3}", k=1, mode="dense").results] == [f"{count - 3:03d}.txt"]
        has_files = bool(list((tmp_path / "data").glob("chunks.exact.*.f32")))
        assert has_files == (kinds[-1] == "compressed"), kinds
    assert kinds == ["flat", "ivf", "compressed", "compressed", "ivf", "flat"]


def test_a_compressed_index_whose_vector_files_are_gone_reads_them_from_lance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(AnnPolicy, "MIN_IVF", 20)
    monkeypatch.setattr(faiss_lifecycle, "ivf_lists", lambda n: max(1, min(16, n // 4)))
    root = tmp_path / "docs"
    root.mkdir()
    for i in range(80):
        (root / f"{i:03d}.txt").write_text(f"note {i} on wings lift drag flow heat topic{i} " * 3)
    store, indexer, _ = make_pipeline(tmp_path / "data", FakeEncoder())
    store.ann = AnnPolicy(kind="compressed")
    indexer.run(root)
    for path in (tmp_path / "data").glob("chunks.exact.*.f32"):
        path.unlink()
    reader = LanceStore(tmp_path / "data", store.dim, AnnPolicy(kind="compressed"))
    index = reader.vector_index()
    lance = reader.chunks.search().select(["id", "vector"]).limit(None).to_arrow()
    assert index.kind == "compressed" and np.array_equal(index.vectors(lance["id"].to_numpy()), vectors_of(lance))
    assert [h.path for h in Searcher(reader, FakeEncoder()).search("topic42", k=1, mode="dense").results] == ["042.txt"]


def test_searches_of_a_compressed_index_go_on_while_it_is_saved_and_changed(tmp_path: Path) -> None:
    """The serving path: searches share the index (SharedIndex) while the writer's saves publish its vectors (a read
    lock, as searches hold) and commits add and remove (alone): no search fails or reads a wrong vector."""
    import threading

    from lodex.search.shared_index import SharedIndex

    ids, vectors = _twins(10_000)
    shared = SharedIndex(_compressed(tmp_path, ids, vectors))
    probe = np.arange(0, 20_000, 211)
    stop, failures, rounds = threading.Event(), [], [0]

    def search() -> None:
        while not stop.is_set():
            try:
                _, hits = shared.search_batch(vectors[probe], 5)
                assert hits[:, 0].tolist() == ids[probe].tolist()
                assert np.array_equal(shared.vectors(ids[probe]), vectors[probe])
                rounds[0] += 1
            except Exception as exc:  # noqa: BLE001 — reported below
                failures.append(exc)
                return

    searcher = threading.Thread(target=search)
    searcher.start()
    try:
        for version in range(6):
            fresh_ids = np.arange(version * 100, version * 100 + 100, dtype=np.int64) + 2**62
            shared.add(fresh_ids, _clustered(100, seed=20 + version))
            shared.remove(fresh_ids[:50])
            with shared.reading():
                shared.index.save(tmp_path, version)
    finally:
        stop.set()
        searcher.join(60)
    assert not failures and rounds[0] > 0, failures


def test_vectors_stream_out_of_lance_by_one_scan_every_kth_row_across_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(faiss_lifecycle, "_SCAN_BATCH", 7)  # batch edges fall between the sampled rows
    store, indexer, _ = make_pipeline(tmp_path / "data", FakeEncoder())
    root = tmp_path / "docs"
    root.mkdir()
    for i in range(40):
        (root / f"{i:03d}.txt").write_text(f"note {i} on wings lift drag flow topic{i}")
    indexer.run(root)
    lance = store.chunks.search().select(["id", "vector"]).limit(None).to_arrow()
    lifecycle = FaissLifecycle(tmp_path / "data", store.dim, store.chunks, AnnPolicy())
    for every in (1, 3, 5):
        batches = list(lifecycle._vector_batches(every))
        ids = np.concatenate([i for i, _ in batches])
        assert ids.tolist() == lance["id"].to_pylist()[::every]
        assert np.array_equal(np.concatenate([v for _, v in batches]), vectors_of(lance)[::every])


def test_stored_vectors_come_back_in_the_order_asked_whether_in_runs_or_scattered(tmp_path: Path) -> None:
    """Documents' chunks asked a document at a time (long runs of rows, read in place) and scattered candidates (read
    in file order, then put in place) both come back as asked, across the saved segment and the private tail."""
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(3_000, 16)).astype(np.float32)
    ids = rng.choice(10**9, 3_000, replace=False).astype(np.int64)  # not permutation(10**9): 8 GB and ~3 min
    stored = exact_vectors.ExactVectors(tmp_path, 16)
    stored.append(ids[:2_000], vectors[:2_000])
    stored.save(ids[:2_000])
    stored.append(ids[2_000:], vectors[2_000:])  # not saved: in the tail
    documents = [np.arange(s, s + 60) for s in rng.permutation(np.arange(0, 2_940, 60))[:20]]  # runs, some across both files
    by_document = np.concatenate(documents)
    scattered = rng.permutation(3_000)[:500]
    for positions in (by_document, scattered, by_document[::-1]):
        assert np.array_equal(stored.read(ids[positions]), vectors[positions])


def test_opening_segments_reads_their_vectors_ahead_only_when_they_fit_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A loaded compressed index's segment files are read once in the background (into the page cache, so that its
    first refine steps do not wait on the disk): every byte of their vectors, with descriptors of its own; not when
    they would take more than half of the memory available, nor twice for the same files."""
    rng = np.random.default_rng(5)
    ids = np.arange(1, 5_001, dtype=np.int64)
    vectors = rng.normal(size=(5_000, 16)).astype(np.float32)
    stored = exact_vectors.ExactVectors(tmp_path, 16)
    stored.append(ids[:3_000], vectors[:3_000])
    stored.save(ids[:3_000])
    stored.append(ids[3_000:], vectors[3_000:])
    stored.save(ids)  # two segments
    monkeypatch.setattr(exact_vectors, "_PREFETCH_BYTES", 4096)
    monkeypatch.setattr(exact_vectors, "_READ_AHEAD", set())
    read: list[int] = []
    preadv = exact_vectors.os.preadv
    monkeypatch.setattr(exact_vectors.os, "preadv", lambda fd, bufs, at: read.append(n := preadv(fd, bufs, at)) or n)
    threads = set(threading.enumerate())
    opened = exact_vectors.ExactVectors.open(tmp_path, 16, ids)
    for thread in set(threading.enumerate()) - threads:
        thread.join(timeout=30)
    assert sum(read) >= 5_000 * 16 * 4 and len(read) >= 5_000 * 16 * 4 // 4096  # every vector byte, 4 KiB at a time
    assert np.array_equal(opened.read(ids), vectors)  # the index's own descriptors still open
    read.clear()
    threads = set(threading.enumerate())
    exact_vectors.ExactVectors.open(tmp_path, 16, ids)  # the same files again: already read by this process
    assert set(threading.enumerate()) == threads and not read
    monkeypatch.setattr(exact_vectors, "_READ_AHEAD", set())
    monkeypatch.setattr(exact_vectors, "available_bytes", lambda unknown: 5_000 * 16 * 4)  # half of it: too little
    threads = set(threading.enumerate())
    exact_vectors.ExactVectors.open(tmp_path, 16, ids)
    assert set(threading.enumerate()) == threads and not read


def test_a_read_ahead_outlives_its_index_closing_and_its_files_deleted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer may merge segments away (delete them) and the index may be dropped (its files closed) while the
    read-ahead runs: it reads every vector byte on descriptors of its own and ends without an error."""
    rng = np.random.default_rng(6)
    ids = np.arange(1, 3_001, dtype=np.int64)
    stored = exact_vectors.ExactVectors(tmp_path, 16)
    stored.append(ids, rng.normal(size=(3_000, 16)).astype(np.float32))
    stored.save(ids)
    monkeypatch.setattr(exact_vectors, "_PREFETCH_BYTES", 4096)
    monkeypatch.setattr(exact_vectors, "_READ_AHEAD", set())
    failures: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: failures.append(args.exc_value))
    gate, read = threading.Event(), []
    preadv = exact_vectors.os.preadv

    def gated_preadv(fd: int, buffers: list, at: int) -> int:
        if threading.current_thread().name != "lodex-vector-readahead":
            return preadv(fd, buffers, at)
        gate.wait(10)  # the files are deleted and closed while it reads
        read.append(n := preadv(fd, buffers, at))
        return n

    monkeypatch.setattr(exact_vectors.os, "preadv", gated_preadv)
    threads = set(threading.enumerate())
    opened = exact_vectors.ExactVectors.open(tmp_path, 16, ids)
    paths = sorted(tmp_path.glob("chunks.exact.*.f32"))
    assert paths
    for path in paths:
        path.unlink()
    opened._closer()  # the index's own descriptors closed
    gate.set()
    for thread in set(threading.enumerate()) - threads:
        thread.join(timeout=30)
    assert not failures and sum(read) >= 3_000 * 16 * 4
