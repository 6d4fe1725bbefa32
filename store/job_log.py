"""Job records in SQLite beside the index: runs, one record per file processed, the latest status per path. For an
index on object storage the database lives in the local cache and the writer puts a copy beside the tables after
every run."""

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from lodex.store.object_store import ObjectStore

JOBS_FILE = "jobs.sqlite"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY, kind TEXT NOT NULL, started REAL NOT NULL, finished REAL, summary TEXT);
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL, path TEXT NOT NULL, status TEXT NOT NULL,
    seconds REAL NOT NULL, chunks INTEGER NOT NULL, tokens INTEGER NOT NULL, error TEXT,
    attempts INTEGER NOT NULL, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS latest (
    path TEXT PRIMARY KEY, status TEXT NOT NULL, error TEXT, attempts INTEGER NOT NULL, at REAL NOT NULL);
"""


def storable(text: str) -> str:
    """`text` as SQLite (UTF-8) can hold it: a lone surrogate (an undecodable byte of a file name) as \\xNN or \\udNNN."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape" if _escaped_bytes_only(text) else "backslashreplace").decode("utf-8", "backslashreplace")


def _escaped_bytes_only(text: str) -> bool:
    return all(not 0xD800 <= ord(c) <= 0xDFFF or 0xDC80 <= ord(c) <= 0xDCFF for c in text)


FileStatus = Literal["indexed", "reused", "unchanged", "failed", "deleted"]


@dataclass(frozen=True)
class FileRecord:
    """What happened to one file in one run: indexed, reused, unchanged, failed or deleted."""

    path: str
    status: FileStatus
    seconds: float = 0.0
    chunks: int = 0
    tokens: int = 0
    error: str = ""
    attempts: int = 1


class JobLog:
    """Run and per-file records; safe to share between threads, and between processes through SQLite. With `remote`
    (the writer of an index on object storage, data_dir its cache): started from the copy on the store (the last
    writer's, from whatever host), and copied back there whenever a run ends and at close."""

    def __init__(self, data_dir: Path, remote: ObjectStore | None = None, name: str = JOBS_FILE) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self.remote = remote
        self.path = data_dir / name
        if remote is not None:
            for stale in (self.path.with_name(name + "-wal"), self.path.with_name(name + "-shm")):
                stale.unlink(missing_ok=True)
            remote.pull(JOBS_FILE, data_dir, name)
        self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(_SCHEMA)

    @classmethod
    def replica(cls, data_dir: Path, remote: ObjectStore) -> "JobLog":
        """A reader's copy of the job log on the store (status, stats of a read-only replica), apart from a writer's."""
        return cls(data_dir, remote, "jobs.replica.sqlite")

    def close(self) -> None:
        """Close the database (its last state copied to the object store first, for a writer of one)."""
        try:
            self.upload()
        finally:
            with self._lock:
                self._db.close()

    def upload(self) -> None:
        """Put a consistent copy of the database beside the tables on the object store (a writer's; no-op otherwise)."""
        if self.remote is None or self.path.name != JOBS_FILE:
            return
        copy = self.path.with_name(f".{JOBS_FILE}.{os.getpid()}.upload")
        with self._lock:
            target = sqlite3.connect(copy)
            try:
                self._db.backup(target)
            finally:
                target.close()
        try:
            self.remote.push(copy, JOBS_FILE)
        finally:
            copy.unlink(missing_ok=True)

    # ---- the folder this index mirrors ---------------------------------------------------
    @property
    def root(self) -> str | None:
        """Absolute path of the folder this index mirrors (None before the first run)."""
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = 'root'").fetchone()
        return row[0] if row else None

    def set_root(self, root: str) -> None:
        """Remember the folder this index mirrors."""
        with self._transaction() as db:
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('root', ?)", (storable(root),))

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One transaction under the lock: committed when the block ends, rolled back when it raises (so one bad
        record never leaves the connection inside a transaction that every later write would trip on)."""
        with self._lock:
            self._db.execute("BEGIN")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    # ---- runs and file records -----------------------------------------------------------
    def start_run(self, kind: str) -> int:
        """Open a run record (kind: index, watch, retry, …) and return its id."""
        with self._transaction() as db:
            return int(db.execute("INSERT INTO runs (kind, started) VALUES (?, ?)", (storable(kind), time.time())).lastrowid or 0)

    def record(self, run_id: int, records: list[FileRecord]) -> None:
        """Append file records and update each path's latest status, in one transaction."""
        if not records:
            return
        stamp = time.time()
        with self._transaction() as db:
            db.executemany(
                "INSERT INTO files (run_id, path, status, seconds, chunks, tokens, error, attempts, at) VALUES (?,?,?,?,?,?,?,?,?)",
                [(run_id, storable(r.path), r.status, r.seconds, r.chunks, r.tokens, storable(r.error), r.attempts, stamp) for r in records],
            )
            db.executemany(
                "INSERT OR REPLACE INTO latest (path, status, error, attempts, at) VALUES (?,?,?,?,?)",
                [(storable(r.path), r.status, storable(r.error), r.attempts, stamp) for r in records if r.status != "unchanged"],
            )

    def finish_run(self, run_id: int, summary: dict[str, Any]) -> None:
        """Close a run record with its summary."""
        with self._transaction() as db:
            db.execute("UPDATE runs SET finished = ?, summary = ? WHERE id = ?", (time.time(), json.dumps(summary), run_id))
        self.upload()

    # ---- reading -------------------------------------------------------------------------
    def failed(self) -> dict[str, dict[str, Any]]:
        """{path: {"reason", "attempts", "at"}} for files whose latest attempt failed."""
        with self._lock:
            rows = self._db.execute("SELECT path, error, attempts, at FROM latest WHERE status = 'failed' ORDER BY path").fetchall()
        return {p: {"reason": e, "attempts": a, "at": t} for p, e, a, t in rows}

    def last_run(self) -> dict[str, Any] | None:
        """The last finished run: kind, start, end and summary."""
        with self._lock:
            row = self._db.execute(
                "SELECT id, kind, started, finished, summary FROM runs WHERE finished IS NOT NULL ORDER BY id DESC LIMIT 1"
            ).fetchone()
        if row is None:
            return None
        return {"id": row[0], "kind": row[1], "started": row[2], "finished": row[3], **json.loads(row[4] or "{}")}

    def files_of_run(self, run_id: int) -> list[FileRecord]:
        """Every file record of one run, in order."""
        with self._lock:
            rows = self._db.execute(
                "SELECT path, status, seconds, chunks, tokens, error, attempts FROM files WHERE run_id = ? ORDER BY id", (run_id,)
            ).fetchall()
        return [FileRecord(*row) for row in rows]
