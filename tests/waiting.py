"""Waiting in tests for something another thread or process does: the condition is looked at again each time
something happens — a hook the test put in the code it drives calls `Wake.notify`, or a file changes under a watched
folder (inotify, through watchdog: a server's commits, its log lines, a spill file) — until it holds or a generous
timeout passes, and the wait fails saying what was awaited. Never a fixed sleep that hopes the work is done."""

import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

T = TypeVar("T")
# The longest one wait on events lasts before the condition is looked at again: a backstop for state that changes in
# memory after the last file write or hook call (a server's "indexing" flag set after its commit), not the mechanism.
RECHECK_S = 1.0


class Wake(FileSystemEventHandler):
    """What a wait wakes on: `notify()` calls (hooks in test doubles and wrapped methods) and every file event under
    the folders given (each watched recursively; a folder not made yet is watched through its nearest parent)."""

    def __init__(self, *folders: Path) -> None:
        super().__init__()
        self._event = threading.Event()
        self.paths: list[str] = []  # every file event's path, in order (a file made and removed again is still seen)
        self._observer = None
        if folders:
            self._observer = Observer()
            for folder in {_existing(Path(f)) for f in folders}:
                self._observer.schedule(self, str(folder), recursive=True)
            self._observer.start()

    def notify(self, *_args: object) -> None:
        """Something happened: the condition is looked at again."""
        self._event.set()

    def on_any_event(self, event: FileSystemEvent) -> None:
        self.paths.append(str(event.src_path))
        self._event.set()

    def arm(self) -> None:
        """Forget what happened before the next look at the condition (what happens after it still wakes)."""
        self._event.clear()

    def wait(self, seconds: float) -> None:
        """Until something happens, at most `seconds`."""
        self._event.wait(seconds)

    def close(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(10)

    def __enter__(self) -> "Wake":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _existing(folder: Path) -> Path:
    while not folder.exists():
        folder = folder.parent
    return folder


def wait_until(
    predicate: Callable[[], T],
    wake: Wake | Iterable[Path],
    timeout: float = 30.0,
    what: str = "the condition",
    detail: Callable[[], object] | None = None,
) -> T:
    """Look at `predicate` now and again each time `wake` wakes (a `Wake`, or folders to watch for this wait alone)
    until it returns something true, and return that; after `timeout` seconds, fail with an AssertionError naming
    `what` was awaited (and `detail()`, e.g. a server's output). The predicate may itself assert (a process still
    alive) to fail at once."""
    if isinstance(wake, Wake):
        return _wait(predicate, wake, timeout, what, detail)
    with Wake(*wake) as watching:
        return _wait(predicate, watching, timeout, what, detail)


def _wait(predicate: Callable[[], T], wake: Wake, timeout: float, what: str, detail: Callable[[], object] | None) -> T:
    deadline = time.monotonic() + timeout
    while True:
        wake.arm()
        got = predicate()
        if got:
            return got
        left = deadline - time.monotonic()
        if left <= 0:
            extra = f": {detail()}" if detail is not None else ""
            raise AssertionError(f"waited {timeout:g} s for {what}, in vain{extra}")
        wake.wait(min(left, RECHECK_S))
