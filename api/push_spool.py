"""Pushed documents kept on disk from the moment they are accepted until they are indexed, so that a stop, a crash or
a full queue loses none of the documents answered 202: the next start indexes what is left, in order."""

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

SPOOL_DIR = "pushes"


class PushSpool:
    """One JSON file per accepted push in data_dir/pushes/, named so that they sort in arrival order."""

    def __init__(self, data_dir: Path) -> None:
        self.folder = data_dir / SPOOL_DIR
        self.folder.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._seq = 0

    def add(self, request: dict[str, Any]) -> Path:
        """Write a push request durably (written, flushed, then renamed into place); returns its file."""
        with self._lock:
            self._seq += 1
            name = f"{time.time_ns():020d}-{os.getpid()}-{self._seq:06d}.json"
        path = self.folder / name
        temp = path.with_suffix(".part")
        with temp.open("w", encoding="utf-8") as fh:
            json.dump(request, fh, ensure_ascii=False)
            fh.flush()
            os.fsync(fh.fileno())
        temp.replace(path)
        return path

    def pending(self) -> list[tuple[Path, dict[str, Any]]]:
        """Push requests not indexed yet, oldest first (unreadable leftovers are dropped)."""
        out = []
        for path in sorted(self.folder.glob("*.json")):
            try:
                out.append((path, json.loads(path.read_text(encoding="utf-8"))))
            except (OSError, ValueError):
                path.unlink(missing_ok=True)
        for stale in self.folder.glob("*.part"):
            stale.unlink(missing_ok=True)  # a write a crash interrupted: never answered 202
        return out

    def done(self, path: Path) -> None:
        """Forget a push request: it is indexed (or failed for good)."""
        path.unlink(missing_ok=True)
