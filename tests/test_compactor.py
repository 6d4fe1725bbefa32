"""A serving writer optimizes large tables in a helper process at its CPU priority: same tables as an optimize in the
process, the handles at the new version, and a helper that dies is started again."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lodex.search.results import SearchFilters
from lodex.store.errors import StoreError
from lodex.store.lance_store import Store
from tests.conftest import make_pipeline, notes_and_settings
from tests.fakes import FakeEncoder
from tests.invariants import check_index


def _indexed(tmp_path: Path) -> tuple[Path, Store, object]:
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
    from lancedb.table import LanceTable

    def refuse(self, **kwargs) -> None:  # noqa: ANN001, ANN003
        raise AssertionError("optimized in the serving process")

    monkeypatch.setattr(LanceTable, "optimize", refuse)


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
        assert store.chunks.version > before and store.chunks.version == Store(tmp_path / "data", store.dim).refresh()[1]
        assert store._text_index_covers(store.chunks.version)  # new rows folded into the full-text index
        assert store.chunks.count_rows() == here_store.chunks.count_rows()
        for query in ("zeppelins airships", "wings lift topic3"):
            for mode in ("bm25", "dense", "hybrid"):
                assert [(h.path, round(h.score, 5)) for h in searcher.search(query, k=6, filters=SearchFilters(), mode=mode).results] == \
                    [(h.path, round(h.score, 5)) for h in here_searcher.search(query, k=6, filters=SearchFilters(), mode=mode).results]
        check_index(store, root, encoder=FakeEncoder())
    finally:
        store.close()
    assert store._compactor.pid is None


def test_a_helper_that_dies_fails_that_optimize_only(tmp_path: Path) -> None:
    root, store, _ = _indexed(tmp_path)
    store.optimize_apart(nice=19)
    store._compactor.apart_rows = 1
    store._compactor._process = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.readline()"],  # reads, dies
                                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        with pytest.raises(StoreError, match="stopped"):
            store.optimize()
        store.optimize()  # a new helper
        assert store._text_index_covers(store.chunks.version)
        check_index(store, root, encoder=FakeEncoder())
    finally:
        store.close()


def test_serve_optimizes_its_large_tables_apart_and_stops_the_helper_when_it_closes(tmp_path: Path) -> None:
    from lodex.api.service import LodexService

    root, settings = notes_and_settings(tmp_path, 4)
    settings.watch.writer_nice = 5
    service = LodexService(settings, root, watch=False, encoder=FakeEncoder()).start()
    try:
        compactor = service.side.store._compactor
        assert compactor.nice == 5
        compactor.apart_rows = 1
        service.writer.reconcile().result(timeout=60)  # a full run: optimized
        helper = compactor.pid
        assert helper is not None
        assert [h.path for h in service.search("topic3", 1, SearchFilters(), "bm25").result(timeout=60).results] == ["3.txt"]
    finally:
        service.close()
    assert compactor.pid is None and not Path(f"/proc/{helper}").exists()
