"""Lance's optimize of a serving writer's tables in a helper process at the writer's CPU priority: done in the serving
process, its seconds of compaction ran on the Lance threads that answer the queries' keyword searches, at their priority
(every request of the slowest 1% overlapped one, at 102,690 chunks)."""

import json
import os
import subprocess
import sys
import threading
from datetime import timedelta
from typing import Any

from lodex.store.errors import StoreError
from lodex.store.lancedb_import import import_lancedb

# Old table versions are kept this long after an optimize (a reader may still be on one).
KEEP_VERSIONS = timedelta(minutes=10)
# Tables smaller than this many rows are optimized in the process itself: a fraction of a second, not worth a helper.
APART_ROWS = 10_000


def optimize_here(table: Any) -> None:
    """Compact a lancedb table, fold its new rows into its indexes, and drop versions older than KEEP_VERSIONS."""
    table.optimize(cleanup_older_than=KEEP_VERSIONS)


class Compactor:
    """Optimizes tables of the Lance database at `uri` in the calling process, or once given a CPU priority (`nice`),
    those of APART_ROWS rows or more in one long-lived helper process running at it (started at the first such optimize;
    importing lancedb costs it ~0.6 s of CPU once). The caller waits for it: it is the writer, nothing else writes."""

    def __init__(self, uri: str, options: dict[str, str] | None, nice: int | None = None, apart_rows: int = APART_ROWS) -> None:
        self.uri, self.options, self.nice, self.apart_rows = uri, options, nice, apart_rows
        self._process: subprocess.Popen | None = None
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
                optimize_here(table)
            return
        with self._lock:
            self._ask({"uri": self.uri, "options": self.options, "tables": [name for name, _ in tables],
                       "keep_s": KEEP_VERSIONS.total_seconds()})
        for _, table in tables:
            table.checkout_latest()

    def _ask(self, request: dict[str, Any]) -> None:
        process = self._process
        if process is None or process.poll() is not None:
            process = self._process = subprocess.Popen([sys.executable, "-m", "lodex.store.compactor", str(self.nice or 0)],
                                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
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
    """The helper: at CPU priority argv[1], one JSON request a line on stdin ({"uri", "options", "tables", "keep_s"}),
    one answer a line ({} or {"error"}) on what was stdout (anything printed meanwhile goes to stderr)."""
    if hasattr(os, "setpriority"):  # this thread, and the threads Lance starts from it
        os.setpriority(os.PRIO_PROCESS, 0, max(int(sys.argv[1]), os.getpriority(os.PRIO_PROCESS, 0)))
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    lancedb = import_lancedb()

    for line in sys.stdin:
        request = json.loads(line)
        try:
            db = lancedb.connect(request["uri"], storage_options=request["options"])
            for name in request["tables"]:
                db.open_table(name).optimize(cleanup_older_than=timedelta(seconds=request["keep_s"]))
            answer: dict[str, str] = {}
        except Exception as exc:  # noqa: BLE001 — told to the writer, which goes on
            answer = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:500]}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
