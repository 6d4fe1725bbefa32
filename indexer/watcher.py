"""Folder watching: watchdog events debounced per path into batches of quiet, stable changes."""

import os
import threading
import time
from collections.abc import Callable
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from lodex.indexer.scanner import ScanRules


def _signature(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


# A path gone from the folder (deleted, or the first half of a rename) waits, up to this many quiet periods after its
# event, for the paths whose events came after it: a rename's two halves then reach the writer in one batch, which
# moves the document and its vectors instead of deleting it and encoding it again.
GONE_WAIT_QUIETS = 3


class ChangeCollector:
    """Coalesces events per path; a path is ready once quiet for `quiet_s` and its size/mtime are stable (a path gone
    from the folder: once the paths whose events came after its own are ready too, or GONE_WAIT_QUIETS quiet periods
    after its event)."""

    def __init__(self, root: Path, quiet_s: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.root = root
        self.quiet_s = quiet_s
        self.clock = clock
        self._pending: dict[str, tuple[float, tuple[int, int] | None]] = {}
        self._lock = threading.Lock()

    def add(self, rel: str) -> None:
        """Note an event on a root-relative path (a file or a folder)."""
        with self._lock:
            self._pending[rel] = (self.clock(), _signature(self.root / rel))

    def __len__(self) -> int:
        with self._lock:
            return len(self._pending)

    def ready(self) -> list[str]:
        """Paths quiet long enough whose size and mtime did not move since their last event."""
        now = self.clock()
        out: list[str] = []
        with self._lock:
            unquiet = [seen for seen, _ in self._pending.values() if now - seen < self.quiet_s]
            newest_unquiet = max(unquiet, default=None)
            for rel, (seen, signature) in list(self._pending.items()):
                if now - seen < self.quiet_s:
                    continue
                current = _signature(self.root / rel)
                if current != signature:  # still being written without events reaching us: wait again
                    self._pending[rel] = (now, current)
                    continue
                if current is None and newest_unquiet is not None and newest_unquiet >= seen and now - seen < GONE_WAIT_QUIETS * self.quiet_s:
                    continue  # gone: maybe renamed, and the new name's event came later; wait for it
                out.append(rel)
                del self._pending[rel]
        return sorted(out)


class FolderWatcher:
    """Runs a watchdog observer on `root` and feeds relevant paths to a ChangeCollector."""

    def __init__(
        self,
        root: Path,
        rules: ScanRules,
        collector: ChangeCollector,
        polling: bool = False,
        ignore: list[str] | None = None,
        poll_interval_s: float = 1.0,
    ) -> None:
        """`ignore`: file-name globs of editors' and tools' temporary files, whose events never trigger work."""
        self.root = root
        self.rules = rules
        self.collector = collector
        self.polling = polling
        self.ignore = ignore or []
        self.poll_interval_s = poll_interval_s
        self._observer: Any = None  # a watchdog observer while watching

    def relevant(self, path: str) -> str | None:
        """The root-relative path of an event's path, or None when lodex ignores it."""
        try:
            rel = Path(os.path.abspath(path)).relative_to(self.root).as_posix()
        except ValueError:
            return None
        if rel in (".", ""):
            return None
        parts = rel.split("/")
        if any(self.rules.skips_dir(p) for p in parts[:-1]) or self.rules.skips_dir(parts[-1]):
            return None
        if self.rules.skip_hidden and parts[-1].startswith("."):
            return None
        if any(fnmatch(parts[-1], g) for g in self.ignore):
            return None
        return rel

    def start(self) -> None:
        """Start watching (events arrive on watchdog's thread)."""
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer
        from watchdog.observers.polling import PollingObserver

        watcher = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:  # watchdog FileSystemEvent
                if event.event_type in ("opened", "closed_no_write"):
                    return
                if event.is_directory and event.event_type == "modified":
                    return  # a folder's mtime changes with every file event inside it
                for path in (event.src_path, getattr(event, "dest_path", "")):
                    rel = watcher.relevant(os.fsdecode(path)) if path else None
                    if rel is not None:
                        watcher.collector.add(rel)

        observer = PollingObserver(timeout=self.poll_interval_s) if self.polling else Observer()
        observer.schedule(Handler(), str(self.root), recursive=True)
        observer.start()
        self._observer = observer

    def stop(self) -> None:
        """Stop watching."""
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
            self._observer = None
