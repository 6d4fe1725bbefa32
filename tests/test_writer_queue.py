"""The writer's queue: updates of paths waiting one after another are applied as one run, in order with the rest."""

import threading
from pathlib import Path

from lodex.indexer.pipeline import Indexer
from lodex.indexer.writer import IndexWriter
from tests.conftest import make_pipeline
from tests.fakes import FakeEncoder


def _writer(tmp_path: Path) -> tuple[IndexWriter, Path, list[list[str] | None]]:
    """A started writer over tmp_path/docs (three files), and the `only` paths of each indexing run it makes."""
    root = tmp_path / "docs"
    root.mkdir()
    for name in ("a.txt", "b.txt", "c.txt"):
        (root / name).write_text(f"{name} holds a few words about {name[0]} and nothing else.")
    _, indexer, _ = make_pipeline(tmp_path / "data", FakeEncoder())
    runs: list[list[str] | None] = []
    run = indexer.run
    indexer.run = lambda *args, only=None, **kw: runs.append(None if only is None else list(only)) or run(*args, only=only, **kw)  # type: ignore[method-assign]
    return IndexWriter(indexer, root, nice=0).start(), root, runs


def _hold(writer: IndexWriter) -> threading.Event:
    """Keep the writer busy until the returned event is set."""
    release, busy = threading.Event(), threading.Event()

    def wait(ix: Indexer) -> None:
        busy.set()
        release.wait(30)

    writer.submit(wait)
    assert busy.wait(30)
    return release


def test_changes_that_wait_together_are_committed_in_one_run(tmp_path: Path) -> None:
    writer, _, runs = _writer(tmp_path)
    try:
        release = _hold(writer)
        first, second, again = writer.paths(["a.txt"]), writer.paths(["b.txt", "c.txt"]), writer.paths(["a.txt"])
        assert first is second is again
        release.set()
        summary = first.result(timeout=30)
        assert runs == [["a.txt", "b.txt", "c.txt"]] and summary.added == 3
    finally:
        writer.stop(timeout=30)


def test_changes_keep_their_order_with_other_requests_and_do_not_join_a_run_under_way(tmp_path: Path) -> None:
    writer, root, runs = _writer(tmp_path)
    try:
        release = _hold(writer)
        before = writer.paths(["a.txt"])
        reconcile = writer.reconcile()  # between two updates: neither joins the other across it
        after = writer.paths(["b.txt"])
        assert before is not after
        release.set()
        assert after.result(timeout=30).added == 0  # the reconciliation in between indexed it already
        assert runs == [["a.txt"], None, ["b.txt"]] and reconcile.result().added == 2
        started, running = threading.Event(), threading.Event()
        run = writer.indexer.run

        def slow(*args, **kw):  # noqa: ANN002, ANN003, ANN202
            started.set()
            running.wait(30)
            return run(*args, **kw)

        writer.indexer.run = slow  # type: ignore[method-assign]
        (root / "c.txt").write_text("c.txt changed while an update of it was being applied.")
        under_way = writer.paths(["c.txt"])
        assert started.wait(30)
        later = writer.paths(["c.txt"])  # the run has started: a new request, applied after it
        assert later is not under_way
        running.set()
        assert under_way.result(timeout=30).updated == 1 and later.result(timeout=30).unchanged == 1
    finally:
        writer.stop(timeout=30)
