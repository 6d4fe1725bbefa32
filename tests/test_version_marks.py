"""Seeing new versions without asking Lance: a stat of each table's version directory, trusted only when it can tell."""

import os
import time
from pathlib import Path

import lodex.store.lance_bridge as lance_bridge
from lodex.store.lance_store import LanceStore
from lodex.store.version_marks import VersionMarks
from tests.conftest import make_pipeline
from tests.fakes import FakeEncoder


def _age(directory: Path, seconds: float) -> None:
    then = time.time_ns() - int(seconds * 1e9)
    os.utime(directory, ns=(then, then))


def test_marks_vouch_only_for_directories_that_settled(tmp_path: Path) -> None:
    directory = tmp_path / "_versions"
    directory.mkdir()
    marks = VersionMarks([directory, tmp_path / "missing"])
    assert marks.read() is None  # one directory is missing
    marks = VersionMarks([directory])
    _age(directory, 0.001)
    assert marks.read() is None  # changed within a timestamp tick: a second change could hide in it
    _age(directory, 5)
    settled = marks.read()
    assert settled is not None and not marks.unchanged(settled)  # Lance not asked yet
    marks.answered(settled)
    assert marks.unchanged(marks.read())
    (directory / "2.manifest").write_text("")  # a commit
    _age(directory, 5)
    assert not marks.unchanged(marks.read())
    marks.answered(None)  # asked while the marks could not vouch: ask again next time
    assert not marks.unchanged(marks.read())


def test_refresh_asks_lance_only_after_a_commit(tmp_path: Path, monkeypatch) -> None:
    store, indexer, _ = make_pipeline(tmp_path / "data", FakeEncoder())
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.txt").write_text("wings and lift " * 50)
    indexer.run(root)
    reader = LanceStore(tmp_path / "data", store.dim)
    versions_dirs = [tmp_path / "data" / "lance" / f"{t}.lance" / "_versions" for t in ("documents", "chunks")]
    for directory in versions_dirs:
        _age(directory, 5)
    asked = []
    real_run = lance_bridge.run
    monkeypatch.setattr(lance_bridge, "run", lambda coroutine: asked.append(1) or real_run(coroutine))

    def refresh() -> tuple[tuple[int, int], int]:
        """The versions the reader sees, and how many round trips to Lance that took."""
        asked.clear()
        return reader.refresh(), len(asked)

    first, trips = refresh()
    assert trips == 1 and refresh() == (first, 0) and refresh() == (first, 0)  # nothing new: no round trip
    (root / "b.txt").write_text("flutter of panels " * 50)
    indexer.run(root)  # another handle commits
    second, trips = refresh()
    assert trips == 1 and second[1] > first[1] and second[0] > first[0]
    assert reader.chunks.count_rows() == store.chunks.count_rows()
    reader.chunks.delete("ordinal = 0")  # this handle's own commit, a moment ago: asked until it settles
    third, trips = refresh()
    assert trips == 1 and third[1] > second[1]
