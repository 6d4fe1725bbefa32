"""Lance's optimize of lodex's tables, by what changed: new small fragments compacted (large ones left alone), new
rows folded into each index as a small delta segment, old versions dropped; a serving writer's runs in a helper process
at the writer's CPU priority (done in the serving process, its seconds of compaction ran on the Lance threads that
answer the queries' keyword searches, at their priority)."""

import json
import os
import subprocess
import sys
import threading
from datetime import timedelta
from typing import Any

from lodex.store.errors import StoreError

# Old table versions are kept this long after an optimize (a reader may still be on one).
KEEP_VERSIONS = timedelta(minutes=10)
# Tables smaller than this many rows are optimized in the process itself: a fraction of a second, not worth a helper.
APART_ROWS = 10_000
# Compaction merges fragments smaller than this many rows (~30 MB of chunks): lancedb's own optimize targets 1M rows,
# so every optimize of a table under a million rows rewrote all of it (1.8 GB at 1M chunks, each time).
COMPACT_ROWS = 16_384
# New rows go into a new segment of each index (a delta: it costs what it holds); an index of MAX_SEGMENTS segments is
# folded into one (what the whole index costs: 2.5-3 s of CPU at 1M chunks). A keyword query searches every segment
# (~0.5 ms more each at 1M). Lance's merge of "the newest N segments" is not used: which those are after a compaction
# does not follow the order it lists them in.
MAX_SEGMENTS = 6
# Indexes of fewer rows than this are updated whole: cheap, and one segment.
DELTA_FROM_ROWS = 50_000


def segments_to_merge(rows: list[int], new: int) -> int:
    """How many of an index's segments (`rows` each) to fold `new` rows into: 0 starts a delta segment, all of them
    fold the index into one."""
    if len(rows) >= MAX_SEGMENTS or sum(rows) + new < DELTA_FROM_ROWS:
        return len(rows)
    return 0


def optimize_dataset(uri: str, options: dict[str, str] | None, keep: timedelta = KEEP_VERSIONS) -> None:
    """Compact the Lance dataset at `uri`, fold its new rows into its indexes, and drop versions older than `keep`."""
    import lance  # pylance, at lancedb's Lance version: only an optimize needs its options

    dataset = lance.dataset(uri, storage_options=options)
    dataset.optimize.compact_files(target_rows_per_fragment=COMPACT_ROWS)
    dataset = lance.dataset(uri, storage_options=options)
    rows = {fragment.fragment_id: fragment.metadata.physical_rows for fragment in dataset.get_fragments()}
    segments: dict[str, list[set[int]]] = {}
    for index in dataset.list_indices():
        segments.setdefault(index["name"], []).append(set(index["fragment_ids"]))
    for name, covered in segments.items():
        sizes = [sum(rows.get(i, 0) for i in fragments) for fragments in covered]
        new = sum(n for i, n in rows.items() if not any(i in fragments for fragments in covered))
        dataset.optimize.optimize_indices(index_names=[name], num_indices_to_merge=segments_to_merge(sizes, new))
        dataset = lance.dataset(uri, storage_options=options)
    dataset.cleanup_old_versions(older_than=keep)


class Compactor:
    """Optimizes lodex's Lance tables in the calling process, or once given a CPU priority (`nice`),
    those of APART_ROWS rows or more in one long-lived helper process running at it (started at the first such optimize;
    importing pylance costs it ~0.4 s of CPU once). The caller waits for it: it is the writer, nothing else writes."""

    def __init__(self, options: dict[str, str] | None, nice: int | None = None, apart_rows: int = APART_ROWS) -> None:
        self.options, self.nice, self.apart_rows = options, nice, apart_rows
        self._process: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        """The helper's process id while it runs."""
        return self._process.pid if self._process is not None and self._process.poll() is None else None

    def optimize(self, tables: list[tuple[str, Any]]) -> None:
        """Optimize these (name, lancedb table) pairs: in the helper when there is one to be and a table holds
        `apart_rows` rows or more, else here; either way each handle then reads the optimized version."""
        if self.nice is None or not any(table.count_rows() >= self.apart_rows for _, table in tables):
            for _, table in tables:
                optimize_dataset(table.uri, self.options)
                table.checkout_latest()
            return
        with self._lock:
            self._ask({"options": self.options, "datasets": [table.uri for _, table in tables], "keep_s": KEEP_VERSIONS.total_seconds()})
        for _, table in tables:
            table.checkout_latest()

    def _ask(self, request: dict[str, Any]) -> None:
        process = self._process
        if process is None or process.poll() is not None:
            process = self._process = subprocess.Popen(
                [sys.executable, "-m", "lodex.store.compactor", str(self.nice or 0)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
            answer = process.stdout.readline()
        except OSError:
            answer = ""
        if not answer:
            self.close()
            raise StoreError("the helper process that optimizes the index stopped", "it is started again at the next optimize")
        error = json.loads(answer).get("error")
        if error:
            raise StoreError(f"cannot optimize the index: {error}", "check the data directory's free space and permissions")

    def close(self) -> None:
        """Stop the helper (after the optimize it may be running)."""
        process, self._process = self._process, None
        if process is None:
            return
        try:
            if process.stdin is not None:
                process.stdin.close()
            process.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()


def main() -> None:
    """The helper: at CPU priority argv[1], one JSON request a line on stdin ({"options", "datasets", "keep_s"}),
    one answer a line ({} or {"error"}) on what was stdout (anything printed meanwhile goes to stderr)."""
    if hasattr(os, "setpriority"):  # this thread, and the threads Lance starts from it
        os.setpriority(os.PRIO_PROCESS, 0, max(int(sys.argv[1]), os.getpriority(os.PRIO_PROCESS, 0)))
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    import lance  # noqa: F401 — imported once, before the first request

    for line in sys.stdin:
        request = json.loads(line)
        try:
            for uri in request["datasets"]:
                optimize_dataset(uri, request["options"], timedelta(seconds=request["keep_s"]))
            answer: dict[str, str] = {}
        except Exception as exc:  # noqa: BLE001 — told to the writer, which goes on
            answer = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:500]}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
