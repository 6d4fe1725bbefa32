"""A serving writer optimizes large tables in a helper process at its CPU priority: same tables as an optimize in the
process, the handles at the new version, and a helper that dies is started again."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lodex.search.results import SearchFilters
from lodex.store import compactor
from lodex.store.errors import StoreError
from lodex.store.lance_store import LanceStore
from tests.conftest import indexed_notes, make_pipeline, notes_and_settings
from tests.fakes import FakeEncoder
from tests.invariants import check_index


def _indexed(tmp_path: Path) -> tuple[Path, LanceStore, object]:
    root = tmp_path / "docs"
    root.mkdir(parents=True)
    for i in range(6):
        (root / f"{i}.txt").write_text(f"note {i} on wings, lift and drag; topic{i} " * 12)
    store, indexer, searcher = make_pipeline(tmp_path / "data", FakeEncoder())
    indexer.run(root)
    (root / "2.txt").write_text("rewritten: zeppelins and airships " * 12)
    indexer.run(root, only=["2.txt"])  # unoptimized rows, a deletion: an optimize has work to do
    return root, store, searcher


def _forbid_optimizing_here(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs) -> None:  # noqa: ANN002, ANN003
        raise AssertionError("optimized in the serving process")

    monkeypatch.setattr(compactor, "optimize_dataset", refuse)


def test_an_optimize_apart_runs_in_a_helper_at_the_writer_priority_and_leaves_the_tables_as_one_here(tmp_path: Path, monkeypatch) -> None:
    root, store, searcher = _indexed(tmp_path)
    here_root, here_store, here_searcher = _indexed(tmp_path / "here")
    here_store.optimize()
    store.optimize_apart(nice=7)
    store._compactor.apart_rows = 1  # these tables are small
    before = store.chunks.version
    with monkeypatch.context() as patched:
        _forbid_optimizing_here(patched)
        store.optimize()
    try:
        helper = store._compactor.pid
        assert helper is not None and os.getpriority(os.PRIO_PROCESS, helper) >= 7
        assert store.chunks.version > before and store.chunks.version == LanceStore(tmp_path / "data", store.dim).refresh()[1]
        assert store.keywords.covers(store.chunks.version)  # new rows folded into the full-text index
        assert store.chunks.count_rows() == here_store.chunks.count_rows()
        for query in ("zeppelins airships", "wings lift topic3"):
            for mode in ("bm25", "dense", "hybrid"):
                assert [(h.path, round(h.score, 5)) for h in searcher.search(query, k=6, filters=SearchFilters(), mode=mode).results] == [
                    (h.path, round(h.score, 5)) for h in here_searcher.search(query, k=6, filters=SearchFilters(), mode=mode).results
                ]
        check_index(store, root, encoder=FakeEncoder())
    finally:
        store.close()
    assert store._compactor.pid is None


def test_a_helper_that_dies_fails_that_optimize_only(tmp_path: Path) -> None:
    root, store, _ = _indexed(tmp_path)
    store.optimize_apart(nice=19)
    store._compactor.apart_rows = 1
    store._compactor._process = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.readline()"],  # reads, dies
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        with pytest.raises(StoreError, match="stopped"):
            store.optimize()
        store.optimize()  # a new helper
        assert store.keywords.covers(store.chunks.version)
        check_index(store, root, encoder=FakeEncoder())
    finally:
        store.close()


def test_serve_optimizes_its_large_tables_apart_and_stops_the_helper_when_it_closes(tmp_path: Path) -> None:
    from lodex.api.factory import open_app

    root, settings = notes_and_settings(tmp_path, 4)
    settings.watch.writer_nice = 5
    service = open_app(settings, "serve", root, watch=False, encoder=FakeEncoder()).start()
    try:
        compactor = service.store._compactor
        assert compactor.nice == 5
        compactor.apart_rows = 1
        service.served.writer.reconcile().result(timeout=60)  # a full run: optimized
        helper = compactor.pid
        assert helper is not None
        assert [h.path for h in service.served.search("topic3", 1, SearchFilters(), "bm25").result(timeout=60).results] == ["3.txt"]
    finally:
        service.close()
    assert compactor.pid is None and not Path(f"/proc/{helper}").exists()


@pytest.mark.parametrize(
    "rows, new, merged", [([10], 5, 1), ([60_000], 500, 0), ([1_000_000, 50_000], 500, 0), ([10, 1_000_000], 5, 0), ([1_000_000] + [10] * 5, 1, 6)]
)
def test_new_rows_go_into_a_new_segment_until_an_index_has_max_segments_then_it_is_folded_into_one(rows: list[int], new: int, merged: int) -> None:
    assert compactor.segments_to_merge(rows, new) == merged


def _segments(store: LanceStore) -> dict[str, int]:
    import lance

    names = [index["name"] for index in lance.dataset(store.chunks.uri).list_indices()]
    return {name: names.count(name) for name in names}


def test_an_optimize_leaves_large_fragments_alone_and_puts_new_rows_in_a_delta_segment(tmp_path: Path, monkeypatch) -> None:
    import lance
    from lancedb.table import LanceTable

    monkeypatch.setattr(compactor, "COMPACT_ROWS", 4)
    monkeypatch.setattr(compactor, "DELTA_FROM_ROWS", 10)
    monkeypatch.setattr(compactor, "MAX_SEGMENTS", 2)
    root, store, indexer, searcher = indexed_notes(tmp_path, {f"{i}.txt": f"note {i} on wings, lift and drag; topic{i} " * 12 for i in range(12)})
    store.optimize()
    files = {
        f.fragment_id: [d.path for d in f.data_files()] for f in lance.dataset(store.chunks.uri).get_fragments() if f.metadata.physical_rows >= 4
    }
    assert files and _segments(store) == {"id_idx": 1, "document_id_idx": 1, "keywords_idx": 1}
    (root / "new.txt").write_text("zeppelins and airships over the lake " * 12)
    indexer.run(root, only=["new.txt"])
    store.optimize()
    after = {f.fragment_id: [d.path for d in f.data_files()] for f in lance.dataset(store.chunks.uri).get_fragments()}
    assert all(after.get(fragment) == paths for fragment, paths in files.items())  # not rewritten
    assert _segments(store)["keywords_idx"] == 2
    assert store.keywords.covers(store.chunks.version)
    # the same folder optimized by lancedb's own optimize (one segment, every fragment rewritten) ranks the same
    _, here_store, here_searcher = _indexed_as(root, tmp_path / "here")
    LanceTable.optimize(here_store.chunks)
    for query in ("zeppelins airships", "wings lift topic3", "drag"):
        assert [(h.path, round(h.score, 4)) for h in searcher.search(query, k=6, filters=SearchFilters(), mode="bm25").results] == [
            (h.path, round(h.score, 4)) for h in here_searcher.search(query, k=6, filters=SearchFilters(), mode="bm25").results
        ]
    for i in range(4):  # the index has MAX_SEGMENTS segments: folded into one
        (root / f"more{i}.txt").write_text(f"more notes {i} on balloons " * 12)
    indexer.run(root, only=[f"more{i}.txt" for i in range(4)])
    store.optimize()
    assert _segments(store)["keywords_idx"] == 1 and store.keywords.covers(store.chunks.version)
    store.optimize()  # the fragments now all in one segment, the small ones compacted: the large ones still not rewritten
    after = {f.fragment_id: [d.path for d in f.data_files()] for f in lance.dataset(store.chunks.uri).get_fragments()}
    assert all(after.get(fragment) == paths for fragment, paths in files.items())
    assert {h.path for h in searcher.search("balloons", k=4, filters=SearchFilters(), mode="bm25").results} == {f"more{i}.txt" for i in range(4)}
    check_index(store, root, encoder=FakeEncoder())


def _indexed_as(root: Path, data: Path) -> tuple[Path, LanceStore, object]:
    store, indexer, searcher = make_pipeline(data, FakeEncoder())
    indexer.run(root)
    return root, store, searcher
