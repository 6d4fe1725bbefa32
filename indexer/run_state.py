"""Where an indexing run stands (Progress, told to the progress callback) and what it did (RunSummary)."""

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from lodex.indexer.preparation import Outcome


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
