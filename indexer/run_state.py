"""Where an indexing run stands (Progress, told to the progress callback) and what it did (RunSummary)."""

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from lodex.indexer.paths import PUSHED_PREFIX
from lodex.indexer.prepared import CHANGED, VANISHED, Outcome
from lodex.indexer.scanner import FileEntry
from lodex.store.base import DocRecord

T = TypeVar("T")


@dataclass
class Progress:
    """Where a run stands; handed to the progress callback as files are processed."""

    files_total: int
    files_done: int = 0
    chunks: int = 0
    tokens: int = 0
    started: float = field(default_factory=time.monotonic)
    path: str = ""

    @property
    def tokens_per_s(self) -> float:
        """Encoded tokens per second since the run started."""
        return self.tokens / max(time.monotonic() - self.started, 1e-9)


@dataclass
class RunSummary:
    """What one run did, files counted by outcome."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    reused: int = 0
    deleted: int = 0
    failed: int = 0
    chunks: int = 0
    tokens: int = 0
    seconds: float = 0.0
    interrupted: bool = False  # stopped early (the process was stopping): the next run picks up the rest
    skipped: dict[str, int] = field(default_factory=dict)  # files no reader takes, by extension (".pages": 12)
    failures: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # worth saying once: a folder's language the model does not cover
    # where the run's wall time went, in seconds on the indexing thread: "start" (process start to the run: imports, the
    # encoder and the store opened; set by the CLI), "scan" (the folder listed and compared with the index), "read" (waiting for files read and chunked), "encode", "commit"
    # (waiting for the store's writes), "finish" (deletions, the full-text and vector indexes brought up to date)
    phases: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time a block of the run into phases[name]."""
        started = time.monotonic()
        try:
            yield
        finally:
            self.phases[name] = round(self.phases.get(name, 0.0) + time.monotonic() - started, 3)

    def timed(self, items: Iterator[T], name: str) -> Iterator[T]:
        """`items`, the time spent waiting for each counted into phases[name]."""
        while True:
            with self.phase(name):
                item = next(items, None)
            if item is None:
                return
            yield item

    def count(self, outcome: Outcome) -> None:
        """One more file of this outcome."""
        if outcome == "added":
            self.added += 1
        elif outcome == "updated":
            self.updated += 1
        else:
            self.reused += 1

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON output and run records."""
        return asdict(self)


def unchanged_file(record: DocRecord | None, entry: FileEntry) -> bool:
    """Whether a listed file is as the index recorded it (same size and modification time)."""
    return record is not None and record.size == entry.size and record.mtime == entry.mtime


def moved_on(entry: FileEntry) -> str | None:
    """Why a file being indexed must be dropped (it changed or vanished since it was listed), or None."""
    if entry.path.startswith(PUSHED_PREFIX):
        return None  # pushed text: no file behind it
    try:
        info = entry.abspath.stat()
    except FileNotFoundError:
        return VANISHED
    except OSError:
        return None
    return None if (info.st_size, info.st_mtime) == (entry.size, entry.mtime) else CHANGED
