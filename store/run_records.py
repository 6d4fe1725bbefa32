"""Run records kept beside the index: the indexed root, the last run's summary, and failed files."""

import json
import time
from pathlib import Path
from typing import Any

from store.origin import write_json_atomic

RECORDS_FILE = "runs.json"


class RunRecords:
    """A small JSON record under the data dir; written atomically after each run."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / RECORDS_FILE
        try:
            self.data: dict[str, Any] = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.data = {}

    @property
    def root(self) -> str | None:
        """Absolute path of the folder this index mirrors."""
        return self.data.get("root")

    @property
    def last_run(self) -> dict[str, Any] | None:
        """Summary of the last finished run."""
        return self.data.get("last_run")

    @property
    def failed(self) -> dict[str, dict[str, Any]]:
        """{path: {"reason", "at"}} of files that could not be indexed at their current version."""
        return self.data.get("failed", {})

    def save_run(self, root: str, summary: dict[str, Any], failures: dict[str, str]) -> None:
        """Record a finished full run; its failures replace the earlier ones."""
        stamp = time.time()
        failed = {p: {"reason": r, "at": stamp} for p, r in failures.items()}
        self.data = {"root": root, "last_run": {**summary, "finished_at": stamp}, "failed": failed}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.path, self.data)
