"""Structured log lines for long-running commands: one JSON object per processed file, scan progress."""

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime

from rich.console import Console

from lodex.indexer.run_state import Progress
from lodex.store.job_log import FileRecord


def _line(console: Console, event: str, **fields: object) -> None:
    stamp = datetime.now(UTC).isoformat(timespec="milliseconds")
    console.print(json.dumps({"ts": stamp, "event": event, **fields}), highlight=False, markup=False, soft_wrap=True)


def file_logger(console: Console) -> Callable[[FileRecord], None]:
    """One line per file processed (unchanged files are not logged)."""

    def log(record: FileRecord) -> None:
        if record.status == "unchanged":
            return
        fields: dict[str, object] = {"path": record.path, "status": record.status, "ms": round(record.seconds * 1000), "chunks": record.chunks}
        if record.error:
            fields["error"] = record.error
        _line(console, "file", **fields)

    return log


def scan_logger(console: Console, every_s: float = 2.0) -> Callable[[Progress], None]:
    """A progress line at most every `every_s` seconds while many files are processed, and at the end."""
    last = [0.0]

    def log(state: Progress) -> None:
        now = time.monotonic()
        if state.files_total >= 20 and (now - last[0] >= every_s or state.files_done == state.files_total):
            last[0] = now
            _line(console, "progress", done=state.files_done, total=state.files_total, chunks=state.chunks, tokens_per_s=round(state.tokens_per_s))

    return log
