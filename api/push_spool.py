"""Pushed documents kept on disk from the moment they are accepted until they are indexed, so that a stop, a crash or
a full queue loses none of the documents answered 202: the next start indexes what is left, in order. The spool is
bounded in files and bytes (api.max_queued_pushes, api.max_queued_push_mb): beyond them a push is refused (429)."""

import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

from lodex.store.errors import BusyError

SPOOL_DIR = "pushes"
# {arrival time ns}-{pid}-{sequence}[-{document id}].json: sorted by name = arrival order; the id (since 2026-12)
# lets a start know which documents wait without reading the files (older spools: read when indexed)
_NAME = re.compile(r"^\d{20}-\d+-\d{6}(?:-(?P<doc>[0-9a-f]{16}))?\.json$")


class PushSpool:
    """One JSON file per accepted push in data_dir/pushes/, named so that they sort in arrival order; at most
    `max_files` files and `max_bytes` bytes wait at once."""

    def __init__(self, data_dir: Path, max_files: int = 10_000, max_bytes: int = 1024 * 2**20, retry_after: float = 5.0) -> None:
        self.folder = data_dir / SPOOL_DIR
        self.folder.mkdir(parents=True, exist_ok=True)
        self.max_files, self.max_bytes, self.retry_after = max_files, max_bytes, retry_after
        self._lock = threading.Lock()
        self._seq = 0
        self._sizes: dict[str, int] = {}  # file name → bytes, for every push kept and not done
        for stale in self.folder.glob("*.part"):
            stale.unlink(missing_ok=True)  # a write a crash interrupted: never answered 202
        for path in self.folder.glob("*.json"):
            try:
                self._sizes[path.name] = path.stat().st_size
            except OSError:
                pass

    @property
    def files(self) -> int:
        """Pushes kept and not indexed yet."""
        return len(self._sizes)

    @property
    def bytes(self) -> int:
        """Their size on disk."""
        return sum(self._sizes.values())

    def add(self, request: dict[str, Any], doc_id: str = "") -> Path:
        """Write a push request durably (written, flushed, then renamed into place); returns its file. Raises
        BusyError (429) when the spool holds its most files or bytes already."""
        body = json.dumps(request, ensure_ascii=False).encode("utf-8")
        with self._lock:
            if len(self._sizes) >= self.max_files or sum(self._sizes.values()) + len(body) > self.max_bytes:
                raise BusyError(
                    f"{len(self._sizes):,} pushes ({sum(self._sizes.values()) / 2**20:,.1f} MB) wait to be indexed already, the "
                    f"most this server keeps (api.max_queued_pushes = {self.max_files:,}, api.max_queued_push_mb = "
                    f"{self.max_bytes / 2**20:,.0f})",
                    "send it again after the time in Retry-After, or raise the limits",
                    retry_after=self.retry_after,
                )
            self._seq += 1
            name = f"{time.time_ns():020d}-{os.getpid()}-{self._seq % 1_000_000:06d}{'-' + doc_id if doc_id else ''}.json"
            self._sizes[name] = len(body)  # counted before the write, so that parallel pushes cannot overshoot
        path = self.folder / name
        temp = path.with_suffix(".part")
        try:
            with temp.open("wb") as fh:
                fh.write(body)
                fh.flush()
                os.fsync(fh.fileno())
            temp.replace(path)
        except BaseException:
            temp.unlink(missing_ok=True)
            with self._lock:
                self._sizes.pop(name, None)
            raise
        return path

    def pending(self) -> list[tuple[Path, str | None]]:
        """Push requests not indexed yet, oldest first, with their document id when the name holds it (the files are
        not read: a large spool is listed at once)."""
        out = []
        for path in sorted(self.folder.glob("*.json")):
            match = _NAME.match(path.name)
            out.append((path, match.group("doc") if match else None))
        return out

    @staticmethod
    def load(path: Path) -> dict[str, Any] | None:
        """A kept push request, or None when it is unreadable (a leftover no one was answered 202 for)."""
        try:
            request = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return request if isinstance(request, dict) and {"name", "text"} <= request.keys() else None

    def done(self, path: Path) -> None:
        """Forget a push request: it is indexed (or failed for good)."""
        path.unlink(missing_ok=True)
        with self._lock:
            self._sizes.pop(path.name, None)
