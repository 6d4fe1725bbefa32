"""Watch a folder and keep its index current: reconcile at start, then apply debounced changes."""

import threading
from pathlib import Path

from lodex.indexer.paths import path_key
from lodex.indexer.watcher import ChangeCollector, FolderWatcher
from lodex.indexer.writer import IndexWriter


class WatchService:
    """Watcher + collector + writer: starts watching before the startup reconciliation, so nothing is missed."""

    def __init__(self, writer: IndexWriter, watcher: FolderWatcher, collector: ChangeCollector, tick_s: float = 0.1) -> None:
        self.writer = writer
        self.watcher = watcher
        self.collector = collector
        self.tick_s = tick_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="lodex-watch", daemon=True)

    @property
    def root(self) -> Path:
        """The watched folder."""
        return self.writer.root

    def start(self) -> "WatchService":
        """Watch, queue the startup reconciliation, and begin feeding changes to the writer."""
        self.writer.start()
        self.watcher.start()
        self.startup = self.writer.reconcile(kind="startup")
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.tick_s):
            batch = self.collector.ready()
            if batch:
                self.writer.paths([path_key(rel) for rel in batch])  # the writer takes index names

    def stop(self) -> None:
        """Stop watching and stop the writer at its next check; changes not applied yet are applied by the next
        start's reconciliation."""
        self.watcher.stop()
        self._stop.set()
        self._thread.join(timeout=5)
        self.writer.stop()
