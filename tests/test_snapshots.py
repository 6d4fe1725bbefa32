"""Searchers' snapshots: a refresh by what changed equals a build from scratch, and no search waits for one."""

import random
import threading
from pathlib import Path

import numpy as np
import pytest

from lodex.indexer.pipeline import Indexer
from lodex.search.results import SearchFilters
from lodex.search.searcher import Searcher
from lodex.search.shared_index import SharedIndex
from lodex.search.snapshot import Snapshot
from lodex.search.snapshot_source import SnapshotSource
from lodex.store import faiss_lifecycle, lance_bridge, lance_reads
from lodex.store.lance_store import AnnPolicy, LanceStore
from tests.conftest import make_pipeline, notes_and_settings
from tests.fakes import FakeEncoder
from tests.waiting import Wake, wait_until

WORDS = [f"w{i}" for i in range(300)]


def _text(rng: random.Random) -> str:
    return "\n\n".join(" ".join(rng.choices(WORDS, k=rng.randint(5, 60))) for _ in range(rng.randint(1, 6)))


def _step(rng: random.Random, root: Path, serial: int) -> None:
    """One random change to the folder: files added, changed, renamed, deleted (several at once, sometimes)."""
    files = sorted(p for p in root.iterdir() if p.is_file())
    for _ in range(rng.randint(1, 3)):
        op = rng.choice(["add", "add", "change", "change", "delete", "rename", "copy"]) if files else "add"
        if op == "add":
            (root / f"n{serial}-{rng.randint(0, 10**6)}.txt").write_text(_text(rng))
        elif op == "change":
            rng.choice(files).write_text(_text(rng))
        elif op == "delete":
            rng.choice(files).unlink(missing_ok=True)
        elif op == "rename":
            victim = rng.choice(files)
            if victim.exists():
                victim.rename(root / f"r{serial}-{victim.name}")
        else:
            source = rng.choice(files)
            if source.exists():
                (root / f"c{serial}-{source.name}").write_bytes(source.read_bytes())
        files = sorted(p for p in root.iterdir() if p.is_file())


def _state(snap: Snapshot) -> dict:
    """Everything searches read from a snapshot, keyed by document id and chunk id (not by row position)."""
    docs = snap.docs
    rows = np.arange(len(docs))
    ids = docs.rows(rows.tolist(), "ids")
    chunk_ids, vectors, lengths = snap.chunk_vectors(rows)
    means, found = snap.mean_vectors(rows)
    per_doc, at = {}, 0
    for i, doc in enumerate(ids):
        n = int(lengths[i])
        per_doc[doc] = (
            docs.rows([i], "paths")[0],
            docs.rows([i], "titles")[0],
            docs.keys[i].as_py(),
            float(docs.mtimes[i]),
            chunk_ids[at : at + n].tolist(),
            vectors[at : at + n],
            bool(found[i]),
            means[i],
        )
        at += n
    owners = snap.owners
    owner_keys = [owners.keys[c].as_py() for c in owners.codes(owners.ids)]
    chunk_rows = snap.rows(owners.ids)
    chunk_docs = [ids[r] if r >= 0 else None for r in chunk_rows.tolist()]
    index = snap.index.index if isinstance(snap.index, SharedIndex) else snap.index
    return {
        "docs": per_doc,
        "chunks": owners.ids.tolist(),
        "row_ids": owners.row_ids.tolist(),
        "owner_keys": owner_keys,
        "chunk_docs": chunk_docs,
        "index_ids": sorted(index.ids().tolist()),
        "versions": snap.versions,
    }


def _assert_same(incremental: dict, full: dict) -> None:
    assert incremental["versions"] == full["versions"]
    for key in ("chunks", "row_ids", "owner_keys", "chunk_docs", "index_ids"):
        assert incremental[key] == full[key], key
    assert incremental["docs"].keys() == full["docs"].keys()
    for doc, (path, title, version, mtime, chunk_ids, vectors, found, mean) in full["docs"].items():
        mine = incremental["docs"][doc]
        assert mine[:5] == (path, title, version, mtime, chunk_ids), (doc, path)
        assert np.allclose(mine[5], vectors, atol=1e-6) and mine[6] == found and np.allclose(mine[7], mean, atol=1e-6)


def _from_scratch(data: Path, dim: int, versions: tuple[int, int], ann: AnnPolicy) -> dict:
    store = LanceStore(data, dim, ann)
    store.pin(versions)
    return _state(SnapshotSource(store)._next(None, versions))


def _compressed_from_the_start(monkeypatch) -> AnnPolicy:
    """A compressed index from the first chunk on, with a few clusters."""
    monkeypatch.setattr(AnnPolicy, "MIN_IVF", 1)
    monkeypatch.setattr(faiss_lifecycle, "ivf_lists", lambda n: max(1, min(8, n)))
    return AnnPolicy(kind="compressed")


@pytest.mark.parametrize(
    "seed, kind, stable", [(0, "auto", True), (1, "auto", False), (2, "auto", True), (3, "compressed", True), (4, "compressed", False)]
)
def test_a_refresh_by_what_changed_equals_a_build_from_scratch(tmp_path: Path, seed: int, kind: str, stable: bool, monkeypatch) -> None:
    """With stable row ids (tables lodex creates) and without (tables an earlier lodex created: a compaction moves
    every row)."""
    if not stable:
        monkeypatch.setattr(lance_bridge, "NEW_TABLE_OPTIONS", {})
    rng = random.Random(seed)
    ann = _compressed_from_the_start(monkeypatch) if kind == "compressed" else AnnPolicy()
    root = tmp_path / "docs"
    root.mkdir()
    for i in range(6):
        (root / f"f{i}.txt").write_text(_text(rng))
    encoder = FakeEncoder(dim=16)
    store, indexer, _ = make_pipeline(tmp_path / "data", encoder)
    store.ann = ann
    indexer.flush_tokens = 200  # several commits per run: versions with chunks whose documents are not committed yet
    indexer.run(root)
    source = SnapshotSource(LanceStore(tmp_path / "data", encoder.dim, ann))
    full_builds: list[SnapshotSource] = []
    full = SnapshotSource._full
    monkeypatch.setattr(SnapshotSource, "_full", lambda self, version: full_builds.append(self) or full(self, version))
    source.refresh()
    compared = 0

    def compare(_record: object = None) -> None:
        nonlocal compared
        if rng.random() < 0.5:
            snap = source.refresh()
            _assert_same(_state(snap), _from_scratch(tmp_path / "data", encoder.dim, snap.versions, ann))
            compared += 1

    for serial in range(8):  # (each run ends in a compaction too: a full run's `after_run` optimizes)
        _step(rng, root, serial)
        indexer.run(root, on_file=compare)  # some refreshes land between a run's commits
        if serial % 4 == 3:
            store.optimize()  # compaction: without stable row ids, every row moves to a new row id
        snap = source.refresh()
        _assert_same(_state(snap), _from_scratch(tmp_path / "data", encoder.dim, snap.versions, ann))
        assert kind != "compressed" or _kind(snap) == "compressed"
    assert compared > 0
    assert sum(built is source for built in full_builds) == 1  # the first snapshot; every later one by what changed
    snap = source.snapshot()
    lance_ids = sorted(store.chunks.search().select(["id"]).limit(None).to_arrow()["id"].to_pylist())
    assert _state(snap)["index_ids"] == lance_ids  # dropped vectors left the index once no older snapshot was held


def test_a_pinned_snapshot_keeps_the_vectors_of_chunks_a_newer_version_dropped(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.txt").write_text("first version of alpha " * 5)
    (root / "b.txt").write_text("bravo stays the same " * 5)
    store, indexer, _ = make_pipeline(tmp_path / "data", FakeEncoder())
    indexer.run(root)
    source = SnapshotSource(LanceStore(tmp_path / "data", store.dim))
    with source.pinned() as old:
        rows = np.arange(len(old.docs))
        before = old.chunk_vectors(rows)
        (root / "a.txt").write_text("second version of alpha, rewritten " * 5)
        indexer.run(root)  # the old chunks of a.txt are collected from Lance
        new = source.refresh()
        assert new.version > old.version
        after = old.chunk_vectors(rows)  # an older snapshot still in use reads its own chunks
        assert before[0].tolist() == after[0].tolist() and np.allclose(before[1], after[1])
    source.refresh()
    lance_ids = sorted(store.chunks.search().select(["id"]).limit(None).to_arrow()["id"].to_pylist())
    assert sorted(new.index.index.ids().tolist()) == lance_ids  # released once nothing held the old one


def test_after_an_optimize_the_next_snapshot_reads_no_chunk_rows_again(tmp_path: Path, monkeypatch) -> None:
    """A compaction keeps every row id (stable row ids): the next snapshot keeps the previous one's chunk owners and
    index, reading no chunk row and no row id list (an O(chunks) read on the query threads' CPU otherwise)."""
    root, settings = notes_and_settings(tmp_path, 30)
    store, indexer, _ = make_pipeline(tmp_path / "data", FakeEncoder())
    for i in range(4):  # several fragments: something for the compaction to merge
        (root / f"extra{i}.txt").write_text(f"extra note {i} " * 30)
        indexer.run(root)
    source = SnapshotSource(LanceStore(tmp_path / "data", store.dim))
    before = source.refresh()
    rows_before = before.owners.row_ids.copy()
    store.optimize()
    reads: list[str] = []
    _count_reads(monkeypatch, reads)
    after = source.refresh()
    assert after.version > before.version
    assert after.owners.row_ids.tolist() == rows_before.tolist() and after.index is before.index
    assert reads == ["chunk_rows_following"]  # the row ids after the last one read directly: none
    assert not after.owners.ids.size or len(after.owners) == len(before.owners)
    _assert_same(_state(after), _from_scratch(tmp_path / "data", store.dim, after.versions, AnnPolicy()))


def _count_reads(monkeypatch: pytest.MonkeyPatch, reads: list[str]) -> None:
    """Note in `reads` each call of the store's chunk reads that a snapshot makes."""
    for name in ("chunk_rows_following", "chunk_rows_after", "chunk_row_ids", "chunks_at_rows", "detached_vector_index"):
        original = getattr(LanceStore, name)
        monkeypatch.setattr(LanceStore, name, lambda self, *a, _name=name, _f=original, **k: reads.append(_name) or _f(self, *a, **k))


def test_new_rows_past_a_gap_in_row_ids_are_found_by_a_scan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """New chunk rows are read by the row ids after the snapshot's last one; when a document changed twice since, the
    rows of its middle version left a gap wider than the ids read: the row count says rows were missed, and a scan
    finds them (the snapshot equals one built from scratch)."""
    monkeypatch.setattr(lance_reads, "FOLLOWING_WINDOW", 2)
    root, settings = notes_and_settings(tmp_path, 6)
    store, indexer, _ = make_pipeline(tmp_path / "data", FakeEncoder())
    indexer.run(root)
    source = SnapshotSource(LanceStore(tmp_path / "data", store.dim))
    before = source.refresh()
    for text in ("a long middle version " * 300, "the last version, short"):
        (root / "0.txt").write_text(text)
        indexer.run(root)
    reads: list[str] = []
    _count_reads(monkeypatch, reads)
    after = source.refresh()
    assert after.version > before.version and reads[:2] == ["chunk_rows_following", "chunk_rows_after"]
    _assert_same(_state(after), _from_scratch(tmp_path / "data", store.dim, after.versions, AnnPolicy()))


def _alpha_and_its_source(tmp_path: Path) -> tuple[Path, FakeEncoder, Indexer, SnapshotSource]:
    """One indexed note (docs/a.txt) and a started snapshot source following its index."""
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.txt").write_text("alpha " * 20)
    encoder = FakeEncoder()
    _, indexer, _ = make_pipeline(tmp_path / "data", encoder)
    indexer.run(root)
    return root, encoder, indexer, SnapshotSource(LanceStore(tmp_path / "data", encoder.dim), poll_s=0.01).start()


def test_a_search_during_a_slow_refresh_answers_from_the_previous_version(tmp_path: Path, monkeypatch) -> None:
    root, encoder, indexer, source = _alpha_and_its_source(tmp_path)
    searcher = Searcher(LanceStore(tmp_path / "data", encoder.dim), encoder, source=source)  # a query thread's own handle
    entered, gate = threading.Event(), threading.Event()
    prepare = source._next

    def slow(previous, versions):
        entered.set()
        assert gate.wait(60), "the test never let the refresh finish"
        return prepare(previous, versions)

    monkeypatch.setattr(source, "_next", slow)
    try:
        (root / "b.txt").write_text("alpha and bravo " * 20)
        indexer.run(root)
        assert entered.wait(60), "the source never began preparing the new version"
        answers: list = []
        query = threading.Thread(target=lambda: answers.append(searcher.search("alpha", k=5)))
        query.start()
        query.join(60)
        still_preparing = not gate.is_set()
        gate.set()  # the refresh goes on only now: a search that waited for it would have answered after this
        assert still_preparing and answers, "the search waited for the refresh"
        assert [h.path for h in answers[0].results] == ["a.txt"]  # the previous version
        deadline = threading.Event()
        while source.snapshot().version != indexer.store.chunks.version and not deadline.wait(0.01):
            pass
        assert sorted(h.path for h in searcher.search("alpha", k=5).results) == ["a.txt", "b.txt"]
    finally:
        gate.set()
        source.close()


def test_the_versions_of_a_short_write_are_left_to_the_writer_and_a_long_one_s_followed(tmp_path: Path, monkeypatch) -> None:
    """While the writer of the process applies a request begun less than WRITER_GRACE_S ago, the background thread
    prepares none of the versions it commits (up to three for one changed file): the writer prepares the last one
    when the request ends. Past that, commits are followed as they come."""

    from lodex.search import snapshot_source

    root, encoder, indexer, source = _alpha_and_its_source(tmp_path)
    prepared: list[tuple[int, int]] = []
    prepare = source._next
    monkeypatch.setattr(source, "_next", lambda previous, versions: prepared.append(versions) or prepare(previous, versions))
    busy_for: list[float | None] = [0.0]
    ticks, ticked, until, tick = [0], threading.Event(), [0], Wake()

    def asked() -> float | None:  # the background thread asks at each of its ticks, before it may prepare anything
        tick.notify()  # (the tick after a preparation is what a wait for it wakes on)
        ticks[0] += 1
        if until[0] and ticks[0] >= until[0]:
            ticked.set()
        return busy_for[0]

    source.follow_writer(asked)
    try:
        (root / "a.txt").write_text("alpha and bravo " * 20)  # a change: chunks added, the document row, old chunks removed
        indexer.run(root)
        until[0] = ticks[0] + 2  # two more ticks: one whole tick has passed after the commits, and it prepared nothing
        assert ticked.wait(30), "the background thread did not tick"
        assert prepared == []
        source.refresh()  # as the writer does at the end of its request
        assert prepared == [(indexer.store.documents.version, indexer.store.chunks.version)]
        busy_for[0] = snapshot_source.WRITER_GRACE_S + 0.1  # a long run: its commits are followed
        (root / "b.txt").write_text("charlie " * 20)
        indexer.run(root)
        latest = (indexer.store.documents.version, indexer.store.chunks.version)
        wait_until(lambda: source.snapshot().versions == latest, tick, what="the background thread to prepare the latest version")
        assert len(prepared) >= 2 and prepared[-1] == latest
    finally:
        source.close()


def _kind(snap: Snapshot) -> str:
    return (snap.index.index if isinstance(snap.index, SharedIndex) else snap.index).kind  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", ["auto", "compressed"])
def test_serve_keeps_one_vector_index_for_the_writer_and_every_query_thread(tmp_path: Path, kind: str, monkeypatch) -> None:
    import gc
    import weakref

    from lodex.api.factory import open_app
    from lodex.store.vector_index import VectorIndex
    from tests.invariants import check_index

    root, settings = notes_and_settings(tmp_path, 5)
    settings.api.query_threads = 3
    if kind == "compressed":
        settings.index.ann = _compressed_from_the_start(monkeypatch).kind
    made: list = []  # every vector index made from here on (earlier tests' may still be alive in this process)
    init = VectorIndex.__init__
    monkeypatch.setattr(VectorIndex, "__init__", lambda self, *a, **k: made.append(weakref.ref(self)) or init(self, *a, **k))
    service = open_app(settings, "serve", root, watch=False, encoder=FakeEncoder()).start()
    try:
        service.served.writer.reconcile().result(timeout=60)
        assert [h.path for h in service.served.search("topic3", 1, SearchFilters(), "dense").result(timeout=60).results] == ["3.txt"]
        (root / "3.txt").write_text("rewritten: zeppelins and airships " * 4)
        service.served.writer.reconcile().result(timeout=60)  # the writer saves the index: the searchers' one
        assert [h.path for h in service.served.search("zeppelins", 1, SearchFilters(), "dense").result(timeout=60).results] == ["3.txt"]
        gc.collect()
        held = [o for o in (ref() for ref in made) if o is not None]
        assert len(held) == 1 and held[0] is service.served.snapshots.snapshot().index.index  # type: ignore[attr-defined]
        assert held[0].kind == ("compressed" if kind == "compressed" else "flat")
        check_index(service.store, root, persisted=True, vector_atol=1e-6)  # the saved file: exactly this version's chunks
    finally:
        service.close()


def _owners_state(owners) -> tuple:
    keys = [owners.keys[c].as_py() for c in owners.codes(owners.ids)]
    codes = owners.codes(owners.ids)
    members = [owners.members(np.array([c]))[0].tolist() for c in dict.fromkeys(codes.tolist())]
    together = owners.members(np.array(list(dict.fromkeys(codes.tolist())) + [-1], np.int64))  # several codes at once: the same
    assert together[0].tolist() == [i for m in members for i in m] and together[1].tolist() == [len(m) for m in members] + [0]
    rows = owners.row_ids_of(owners.ids)
    assert rows.tolist() == owners.row_ids.tolist() and owners.ids_at_rows(rows).tolist() == owners.ids.tolist()
    assert owners.has(owners.ids).all() and not owners.has(np.array([-5, 10**9])).any()
    last = owners.sorted_row_ids[-1] if len(owners) else -1
    assert owners.last_row_id == last
    return (
        owners.ids.tolist(),
        owners.row_ids.tolist(),
        keys,
        owners.sorted_row_ids.tolist(),
        sorted(map(tuple, members)),
        owners.ranked(owners.sorted_row_ids, np.zeros(len(owners), np.float32))[0].tolist(),
        sorted(owners.rows_of(np.ones(len(owners.keys), bool)).tolist()),
    )


@pytest.mark.parametrize("merge_rows", [4096, 16])  # changes kept beside the base, and merged into a new one often
@pytest.mark.parametrize("seed", range(5))
def test_chunk_owners_updated_by_rows_added_and_gone_equal_owners_built_afresh(seed: int, merge_rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow as pa

    from lodex.store.chunk_owners import ChunkOwners

    monkeypatch.setattr(ChunkOwners, "MERGE_ROWS", merge_rows)

    rng = np.random.default_rng(seed)
    hashes = 3 if seed < 3 else 400  # many keys: those no chunk uses any more are renumbered away
    next_row, next_id = 0, 1
    rows: dict[int, tuple[int, str, str]] = {}  # row id → (chunk id, document id, hash)

    def table(items: list[tuple[int, tuple[int, str, str]]]) -> pa.Table:
        return pa.table(
            {
                "id": pa.array([v[0] for _, v in items], pa.int64()),
                "document_id": pa.array([v[1] for _, v in items], pa.string()),
                "content_hash": pa.array([v[2] for _, v in items], pa.string()),
                "_rowid": pa.array([r for r, _ in items], pa.uint64()),
            }
        )

    owners = ChunkOwners(table([]))
    for _ in range(80):
        gone = [r for r in rows if rng.random() < 0.2]
        moved = [r for r in rows if r not in gone and rng.random() < 0.05]  # a compaction moves rows: same chunk, new row id
        added = []
        for r in moved:
            added.append((next_row, rows.pop(r)))
            next_row += 1
        for _ in range(int(rng.integers(0, 12))):
            added.append((next_row, (next_id, f"d{rng.integers(0, 6)}", f"h{rng.integers(0, hashes)}")))  # keys seen before, too
            next_row, next_id = next_row + 1, next_id + 1
        for r in gone:
            del rows[r]
        owners = owners.updated(np.array(gone + moved, np.uint64), table(added))
        rows.update(added)
        assert _owners_state(owners) == _owners_state(ChunkOwners(table(sorted(rows.items()))))


def test_a_lent_index_is_saved_by_its_keeper_after_each_write_and_at_close(tmp_path: Path) -> None:
    """A writer whose index the searchers keep holds no callable of theirs: its saves are asked for (a ticket), the
    source makes them after the writer's request (`after_write`) and, for the last one asked (a stopping writer's),
    when it closes; a save asked while one is being made is not taken for made."""
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.txt").write_text("alpha " * 40)
    encoder = FakeEncoder()
    writer, indexer, _ = make_pipeline(tmp_path / "data", encoder)
    source = SnapshotSource(LanceStore(tmp_path / "data", encoder.dim))
    source.keep_index_for(writer)
    indexer.run(root)  # a full run: its end asks for a save
    assert writer.index_save_due() is not None and writer._faiss._index is None  # the writer keeps no index itself
    source.after_write()
    assert writer.index_save_due() is None
    assert (tmp_path / "data" / f"chunks.v{writer.chunks.version}.faiss").exists()
    (root / "b.txt").write_text("bravo " * 40)
    indexer.run(root)
    writer.persist_index()  # as a stopping writer does
    source.close()
    assert writer.index_save_due() is None
    assert (tmp_path / "data" / f"chunks.v{writer.chunks.version}.faiss").exists()
    lifecycle = faiss_lifecycle.FaissLifecycle(tmp_path, 8, None, AnnPolicy())
    lifecycle.lend()
    lifecycle.persist()
    first = lifecycle.save_due()
    lifecycle.persist()  # asked while the first is being made
    assert first is not None
    lifecycle.saved(first, 0.1)
    assert lifecycle.save_due() is not None
