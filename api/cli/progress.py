"""Terminal rendering of an indexing run: a live progress bar and the closing summary."""

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from lodex.indexer.paths import printable

if TYPE_CHECKING:  # types only: the CLI's renderers load without the indexing pipeline
    from lodex.indexer.run_state import Progress as RunProgress
    from lodex.indexer.run_state import RunSummary

_IMPORTED = time.monotonic()


@contextmanager
def progress_bar(console: Console) -> Iterator[Callable[["RunProgress"], None]]:
    """A callback that draws files done/total, chunks and tokens/s while a run goes on (a terminal only: the bar is
    transient, so elsewhere it would never show, and its redraws would take CPU from the encoder)."""
    if not console.is_terminal:
        yield lambda state: None
        return
    bar = Progress(
        TextColumn("indexing"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("files"),
        TextColumn("{task.fields[chunks]:,} chunks"),
        TextColumn("{task.fields[rate]:,.0f} tokens/s"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        refresh_per_second=4,
    )
    task = bar.add_task("index", total=None, chunks=0, rate=0.0)

    def update(state: "RunProgress") -> None:
        bar.update(task, total=state.files_total, completed=state.files_done, chunks=state.chunks, rate=state.tokens_per_s)

    with bar:
        yield update


def skipped_line(skipped: dict[str, int]) -> str:
    """'12 .pages, 3 .key' from {".pages": 12, ".key": 3}."""
    return ", ".join(f"{n} {printable(ext)}" for ext, n in skipped.items())


def summary_lines(summary: "RunSummary") -> list[str]:
    """Human summary of a run, first line the totals, then one line per failed file."""
    rate = summary.tokens / summary.seconds if summary.seconds else 0.0
    lines = [
        f"done in {summary.seconds:.1f} s: {summary.added} added, {summary.updated} updated, {summary.reused} re-used "
        f"(moved/copied), {summary.unchanged} unchanged, {summary.deleted} deleted, {summary.failed} failed; "
        f"{summary.chunks:,} chunks written, {summary.tokens:,} tokens encoded ({rate:,.0f} tokens/s)"
    ]
    if summary.phases:
        lines.append("time: " + " · ".join(f"{name} {seconds:.1f} s" for name, seconds in summary.phases.items()))
    if summary.skipped:
        lines.append(f"skipped: {skipped_line(summary.skipped)} (no reader)")
    if summary.interrupted:
        lines.append("stopped before the end: run it again to index the rest")
    lines += [f"note: {note}" for note in summary.notes]
    lines += [f"  failed: {printable(path)}: {printable(reason)}" for path, reason in sorted(summary.failures.items())]
    return lines


def process_seconds() -> float:
    """Seconds since this process started (from /proc on Linux; elsewhere since this module was imported)."""
    try:
        stat = Path("/proc/self/stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22, starttime: clock ticks after boot
        return max(0.0, float(Path("/proc/uptime").read_text().split()[0]) - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.monotonic() - _IMPORTED
