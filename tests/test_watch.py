"""A real watcher on tmp_path: creates, edits, deletes, renames, folder moves, atomic saves, slow writes, bursts."""

import os
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from lodex.api.factory import build_watch
from lodex.api.settings import Settings
from lodex.indexer.scanner import ScanRules
from lodex.indexer.watch_service import WatchService
from lodex.indexer.watcher import ChangeCollector, FolderWatcher
from lodex.indexer.writer import RunHooks
from lodex.store.job_log import FileRecord
from lodex.store.lance_store import LanceStore
from tests.conftest import make_pipeline
from tests.fakes import FakeEncoder
from tests.waiting import Wake, wait_until


def _text(topic: str) -> str:
    return "\n\n".join(f"{topic} paragraph {i}: " + " ".join(f"{topic}{j}" for j in range(15)) for i in range(6))


class Harness:
    """A running WatchService over tmp_path/docs with the fake encoder, and helpers to wait on its effects."""

    def __init__(self, tmp_path: Path, quiet_s: float = 0.3, polling: bool = False) -> None:
        self.root = tmp_path / "docs"
        self.root.mkdir(exist_ok=True)
        self.data = tmp_path / "data"
        self.encoder = FakeEncoder()
        self.records: list[FileRecord] = []
        store, indexer, _ = make_pipeline(self.data, self.encoder)
        settings = Settings(base_dir=tmp_path)
        settings.watch.quiet_s = quiet_s
        settings.watch.polling = polling
        settings.watch.poll_interval_s = 0.2
        self.wake = Wake()  # notified by every hook below: what the settle waits wake on
        self.service: WatchService = build_watch(settings, indexer, self.root, RunHooks(on_file=self._record))
        self.reader = LanceStore(self.data, self.encoder.dim)
        self.noted: list[str] = []  # every path the watcher's filter let through to the collector (work to do)
        add = self.service.collector.add
        self.service.collector.add = lambda rel: self.noted.append(rel) or add(rel) or self.wake.notify()  # type: ignore[method-assign]
        self.events: Counter[str] = Counter()  # how many events named each path, before the watcher's filter
        relevant = self.service.watcher.relevant
        self.service.watcher.relevant = lambda path: self._event(path) or relevant(path)  # type: ignore[method-assign]
        self.collected = [0]  # the service's looks at the collector, each after handing the previous batch to the writer
        ready = self.service.collector.ready
        self.service.collector.ready = lambda: self._look(ready)  # type: ignore[method-assign]
        self.markers = 0

    def _record(self, record: object) -> None:
        self.records.append(record)
        self.wake.notify()

    def _event(self, path: str) -> None:
        self.events.update([os.path.abspath(path)])
        self.wake.notify()

    def _look(self, ready: Callable[[], list[str]]) -> list[str]:
        self.collected[0] += 1  # counted as the look begins: the batch before it has been handed to the writer
        try:
            return ready()
        finally:
            self.wake.notify()  # after the look: what it took has left the collector

    def start(self) -> "Harness":
        self.service.start()
        self.service.startup.result(timeout=60)  # watchdog's observer.start() set its inotify watches (or its polling
        return self  # snapshot) before returning: no wait needed for them

    def docs(self) -> dict[str, str]:
        self.reader.refresh()
        return {p: r.content_hash for p, r in self.reader.document_records().items()}

    def wait(self, condition: Callable[[dict[str, str]], bool], timeout: float = 20.0) -> dict[str, str]:
        """Until the index's documents meet `condition`; they are returned."""
        seen: list[dict[str, str]] = [{}]

        def met() -> bool:
            seen[0] = self.docs()
            return condition(seen[0])

        wait_until(
            met,
            [self.data],
            timeout,
            "the index to reach the condition",  # each commit writes there last
            detail=lambda: f"index holds {sorted(seen[0])}",
        )
        return seen[0]

    def settle(self) -> None:
        """Until everything the test did has reached the index, for checks of what must NOT happen (a second
        indexing, a temporary file reaching the collector): a hidden marker file written last is a barrier — once its
        own event has arrived (the filter then drops it), so have the earlier ones; then the collector is drained, the
        service has handed its last batch over (it looked at the collector again), and the writer is flushed."""
        self.markers += 1
        marker = self.root / f".settle-{self.markers}"
        marker.write_text("")
        wait_until(lambda: str(marker) in self.events, self.wake, 20, "the marker's event to reach the watcher")
        wait_until(lambda: len(self.service.collector) == 0, self.wake, 20, "the collector to hand over every change")
        looked = self.collected[0]
        wait_until(lambda: self.collected[0] > looked, self.wake, 20, "the service's next look at the collector")
        self.service.writer.submit(lambda ix: None).result(timeout=30)

    def indexed(self, path: str, since: int = 0) -> int:
        return sum(1 for r in self.records[since:] if r.path == path and r.status in ("indexed", "reused"))


@pytest.fixture
def harness(tmp_path: Path):
    h = Harness(tmp_path)
    yield h
    h.service.stop()


def test_create_modify_delete(harness: Harness) -> None:
    harness.start()
    (harness.root / "a.md").write_text(_text("alpha"))
    first = harness.wait(lambda d: "a.md" in d)["a.md"]
    (harness.root / "a.md").write_text(_text("beta"))
    harness.wait(lambda d: d.get("a.md") not in (None, first))
    (harness.root / "a.md").unlink()
    harness.wait(lambda d: "a.md" not in d)


@pytest.mark.parametrize("old, new", [("old.txt", "new.txt"), ("旧稿.txt", "定稿.txt")])
def test_rename_reuses_vectors(harness: Harness, old: str, new: str) -> None:
    harness.start()
    (harness.root / old).write_text(_text("gamma"))
    harness.wait(lambda d: old in d)
    harness.settle()
    encoded = harness.encoder.texts_encoded
    (harness.root / old).rename(harness.root / new)
    harness.wait(lambda d: set(d) == {new})
    assert harness.encoder.texts_encoded == encoded


def test_folders_moved_in_out_and_deleted(harness: Harness, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    for i in range(3):
        (outside / f"f{i}.txt").write_text(_text(f"out{i}"))
    (outside / "deep" / "g.md").write_text(_text("deep"))
    harness.start()
    shutil.move(str(outside), str(harness.root / "moved"))
    wanted = {"moved/f0.txt", "moved/f1.txt", "moved/f2.txt", "moved/deep/g.md"}
    harness.wait(lambda d: set(d) == wanted)
    (harness.root / "moved").rename(harness.root / "renamed")
    harness.wait(lambda d: set(d) == {p.replace("moved/", "renamed/") for p in wanted})
    shutil.move(str(harness.root / "renamed"), str(tmp_path / "away"))
    harness.wait(lambda d: d == {})
    shutil.move(str(tmp_path / "away"), str(harness.root / "back"))
    harness.wait(lambda d: len(d) == 4)
    shutil.rmtree(harness.root / "back")
    harness.wait(lambda d: d == {})


def test_editor_atomic_save_is_one_update(harness: Harness) -> None:
    (harness.root / "note.md").write_text(_text("before"))
    harness.start()
    before, since = harness.docs()["note.md"], len(harness.records)
    for name in (".note.md.swp", "note.md.tmp"):
        tmp = harness.root / name
        tmp.write_text(_text("after"))
        os.replace(tmp, harness.root / "note.md")
    docs = harness.wait(lambda d: d.get("note.md") not in (None, before))
    harness.settle()
    assert set(docs) == {"note.md"}
    assert harness.indexed("note.md", since) == 1
    assert set(harness.noted) == {"note.md"}, "the editor's temporary files never reach the collector"


def test_file_written_slowly_is_indexed_once_complete(harness: Harness) -> None:
    harness.start()
    path = harness.root / "slow.txt"
    pieces = [f"piece {i}: " + " ".join(f"slow{i}x{j}" for j in range(30)) + "\n\n" for i in range(8)]
    with path.open("w") as fh:
        for piece in pieces:  # a slow writer: each piece reaches the watcher as an event before the next is written
            seen = harness.events[str(path)]
            fh.write(piece)
            fh.flush()
            wait_until(lambda seen=seen: harness.events[str(path)] > seen, harness.wake, 20, "the watcher to see the file grow")
    harness.wait(lambda d: "slow.txt" in d)
    harness.settle()
    assert harness.indexed("slow.txt") == 1
    harness.reader.refresh()
    texts = harness.reader.chunks.search().select(["text"]).limit(None).to_arrow()["text"].to_pylist()
    assert "slow7x29" in " ".join(texts)


def test_burst_of_200_files(harness: Harness) -> None:
    harness.start()
    for i in range(200):
        (harness.root / f"burst-{i:03d}.txt").write_text(f"file {i} " + _text(f"b{i}"))
    harness.wait(lambda d: len(d) == 200, timeout=60)
    harness.settle()
    assert all(harness.indexed(f"burst-{i:03d}.txt") == 1 for i in range(200))


def test_temporary_and_hidden_files_are_ignored(harness: Harness) -> None:
    harness.start()
    for name in ("x.txt.swp", "draft.md~", "scratch.tmp", ".hidden.md", "#autosave.md#"):
        (harness.root / name).write_text(_text("ignored"))
    (harness.root / ".git").mkdir()
    (harness.root / ".git" / "HEAD.txt").write_text("ref")
    (harness.root / "real.md").write_text(_text("real"))
    harness.wait(lambda d: "real.md" in d)
    harness.settle()
    assert set(harness.docs()) == {"real.md"}
    assert set(harness.noted) == {"real.md"}, "ignored names trigger no work (the scanner would drop them too late)"


def test_changes_while_stopped_are_applied_at_start(tmp_path: Path) -> None:
    first = Harness(tmp_path).start()
    (first.root / "kept.txt").write_text(_text("kept"))
    (first.root / "edited.txt").write_text(_text("v1"))
    (first.root / "removed.txt").write_text(_text("removed"))
    (first.root / "moved.txt").write_text(_text("moving"))
    first.wait(lambda d: len(d) == 4)
    first.settle()
    first.service.stop()
    first.reader.refresh()
    assert (first.data / f"chunks.v{first.reader.chunks.version}.faiss").exists(), "a stopping writer saves the index"
    (first.root / "edited.txt").write_text(_text("v2"))
    (first.root / "removed.txt").unlink()
    (first.root / "moved.txt").rename(first.root / "arrived.txt")
    (first.root / "new.txt").write_text(_text("new"))
    second = Harness(tmp_path)
    second.start()
    try:
        docs = second.docs()
        assert set(docs) == {"kept.txt", "edited.txt", "arrived.txt", "new.txt"}
        assert second.indexed("arrived.txt") == 1 and second.indexed("kept.txt") == 0
    finally:
        second.service.stop()


def test_polling_observer(tmp_path: Path) -> None:
    h = Harness(tmp_path, polling=True).start()
    try:
        (h.root / "polled.md").write_text(_text("poll"))
        h.wait(lambda d: "polled.md" in d)
    finally:
        h.service.stop()


@pytest.mark.skipif(not hasattr(os, "getpriority"), reason="thread priorities are a POSIX feature")
def test_the_writer_runs_at_the_configured_low_priority(tmp_path: Path) -> None:
    import threading

    from lodex.api.factory import build_writer

    root = tmp_path / "docs"
    root.mkdir()
    _, indexer, _ = make_pipeline(tmp_path / "data", FakeEncoder())
    settings = Settings(base_dir=tmp_path, watch={"writer_nice": 7})
    writer = build_writer(settings, indexer, root).start()
    try:
        nice = writer.submit(lambda ix: os.getpriority(os.PRIO_PROCESS, threading.get_native_id())).result(timeout=30)
    finally:
        writer.stop(timeout=30)
    assert nice == max(7, os.getpriority(os.PRIO_PROCESS, 0))  # raised, never lowered below the process's own
    assert Settings().watch.writer_nice == 19


# ---- the watcher's filter and the collector, without a watcher running (no sleeps) ------------------------------

EDITOR_TEMPORARIES = [
    "x.txt.swp",
    "x.txt.swx",
    "x.txt.swo",
    "draft.md~",
    "scratch.tmp",
    "note.md.tmp",
    "a.temp",
    ".#lock.md",
    "#autosave.md#",
    "4913",
    "video.part",
    "f.crdownload",
    "~$report.docx",
]


def _watcher(root: Path, rules: ScanRules | None = None, ignore: list[str] | None = None) -> FolderWatcher:
    return FolderWatcher(root, rules or ScanRules(), ChangeCollector(root), ignore=Settings().watch.ignore if ignore is None else ignore)


@pytest.mark.parametrize("name", EDITOR_TEMPORARIES)
def test_the_filter_drops_every_default_ignore_glob_at_any_depth(tmp_path: Path, name: str) -> None:
    watcher = _watcher(tmp_path)
    assert watcher.relevant(str(tmp_path / name)) is None
    assert watcher.relevant(str(tmp_path / "sub" / "deeper" / name)) is None


def test_the_filter_keeps_lookalikes_and_maps_paths_to_root_relative_ones(tmp_path: Path) -> None:
    watcher = _watcher(tmp_path)
    for rel in ("a.md", "sub/b.txt", "notes.tmp.md", "4913.txt", "swp", "draft~.md", "my#notes#.md", "tilde~dir/c.txt"):
        assert watcher.relevant(str(tmp_path / rel)) == rel, rel
    assert watcher.relevant(str(tmp_path / "sub" / ".." / "c.md")) == "c.md"
    assert watcher.relevant(str(tmp_path / "sub")) == "sub"  # a folder: its subtree is rescanned
    assert watcher.relevant(str(tmp_path)) is None
    assert watcher.relevant(str(tmp_path.parent / "elsewhere.md")) is None


def test_the_filter_drops_hidden_names_and_git_unless_hidden_files_are_wanted(tmp_path: Path) -> None:
    hidden = [".hidden.md", ".git", ".git/HEAD", "sub/.cache/x.txt", ".obsidian/workspace.json", "sub/.note.md.swp"]
    watcher = _watcher(tmp_path)
    assert [watcher.relevant(str(tmp_path / rel)) for rel in hidden] == [None] * len(hidden)
    showing = _watcher(tmp_path, ScanRules(skip_hidden=False))
    assert [showing.relevant(str(tmp_path / rel)) for rel in hidden] == [
        ".hidden.md",
        None,
        None,
        "sub/.cache/x.txt",
        ".obsidian/workspace.json",
        None,
    ]  # .git never; a swap file still ignored


def test_the_ignore_globs_are_the_configured_ones(tmp_path: Path) -> None:
    watcher = _watcher(tmp_path, ignore=["*.bak"])
    assert watcher.relevant(str(tmp_path / "old.bak")) is None
    assert watcher.relevant(str(tmp_path / "x.txt.swp")) == "x.txt.swp"  # not ignored any more: the scanner decides
    assert _watcher(tmp_path, ignore=[]).relevant(str(tmp_path / "scratch.tmp")) == "scratch.tmp"


class Clock:
    """A hand-moved monotonic clock."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _collector(root: Path, quiet_s: float = 1.0) -> tuple[ChangeCollector, Clock]:
    clock = Clock()
    return ChangeCollector(root, quiet_s=quiet_s, clock=clock), clock


def test_a_path_is_ready_once_quiet_for_the_quiet_period_and_only_once(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one")
    collector, clock = _collector(tmp_path)
    collector.add("a.txt")
    assert collector.ready() == [] and len(collector) == 1
    clock.now += 0.875
    assert collector.ready() == []
    clock.now += 0.125  # (steps exact in binary: the boundary itself is tested)
    assert collector.ready() == ["a.txt"]
    assert len(collector) == 0 and collector.ready() == []
    clock.now += 10
    assert collector.ready() == []


def test_repeated_events_coalesce_and_each_one_restarts_the_quiet_period(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one")
    collector, clock = _collector(tmp_path)
    for _ in range(3):
        collector.add("a.txt")
        assert len(collector) == 1
        clock.now += 0.75  # an event every 0.75 s: never quiet for 1 s
        assert collector.ready() == []
    clock.now += 0.25
    assert collector.ready() == ["a.txt"]  # one batch entry for the burst


def test_paths_become_ready_each_on_its_own_schedule_sorted(tmp_path: Path) -> None:
    for name in ("b.txt", "a.txt", "c.txt"):
        (tmp_path / name).write_text(name)
    collector, clock = _collector(tmp_path, quiet_s=0.5)
    collector.add("b.txt")
    collector.add("a.txt")
    clock.now += 0.25
    collector.add("c.txt")
    clock.now += 0.25
    assert collector.ready() == ["a.txt", "b.txt"]
    clock.now += 0.25
    assert collector.ready() == ["c.txt"]


def test_a_file_whose_size_or_mtime_keeps_moving_is_held_back(tmp_path: Path) -> None:
    path = tmp_path / "slow.txt"
    path.write_text("part 1\n")
    collector, clock = _collector(tmp_path)
    collector.add("slow.txt")
    for i in range(2, 5):  # written on without events reaching the collector (a lost or coalesced inotify event)
        clock.now += 1.0
        with path.open("a") as fh:
            fh.write(f"part {i}\n")
        assert collector.ready() == [], f"held while its size moves ({i})"
    clock.now += 0.5
    assert collector.ready() == [], "the quiet period starts again from the moment the move was seen"
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # same size, newer mtime
    clock.now += 0.5
    assert collector.ready() == [], "held while its mtime moves"
    clock.now += 1.0
    assert collector.ready() == ["slow.txt"]


def test_a_path_that_vanishes_is_reported_once_its_absence_is_stable(tmp_path: Path) -> None:
    (tmp_path / "going.txt").write_text("x")
    collector, clock = _collector(tmp_path)
    collector.add("going.txt")
    collector.add("never-existed.txt")  # a delete event: no signature, and none later either
    (tmp_path / "going.txt").unlink()
    clock.now += 1.0
    assert collector.ready() == ["never-existed.txt"]  # going.txt changed (it vanished) since its event: held
    clock.now += 1.0
    assert collector.ready() == ["going.txt"]


@pytest.mark.parametrize("old, new", [("old.txt", "new.txt"), ("笔记/旧稿.txt", "笔记/定稿.txt"), ("Übersicht.md", "Änderungen/Übersicht.md")])
def test_a_renamed_files_two_halves_are_ready_together(tmp_path: Path, old: str, new: str) -> None:
    """The old name's event (the file gone) is quiet first; it waits for the new name's, so the writer sees a move
    (vectors kept) and not a delete and then a new file (encoded again)."""
    (tmp_path / new).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / new).write_text("moved here")
    collector, clock = _collector(tmp_path)
    collector.add(old)  # gone: renamed to `new`
    clock.now += 0.25  # the new name's event comes a little later (a loaded machine)
    collector.add(new)
    clock.now += 0.75
    assert collector.ready() == [], "the old name is quiet, but waits for the new one"
    clock.now += 0.25
    assert collector.ready() == sorted([new, old])


def test_a_deleted_file_waits_for_later_events_only_so_long(tmp_path: Path) -> None:
    (tmp_path / "busy.txt").write_text("written on and on")
    collector, clock = _collector(tmp_path)
    collector.add("gone.txt")
    for _ in range(5):  # another file's events every half second: never quiet
        clock.now += 0.5
        collector.add("busy.txt")
        assert collector.ready() == []
    clock.now += 0.5  # three quiet periods after its own event
    assert collector.ready() == ["gone.txt"]
    collector.add("alone.txt")  # a deletion with nothing after it is ready after one quiet period, as any path
    clock.now += 1.0
    assert "alone.txt" in collector.ready()
