"""One writer per index: an exclusive advisory lock on the data dir, held while a process writes (and for an index on
object storage, the lease beside its tables too)."""

import fcntl
import os
from pathlib import Path

from lodex.store.errors import StoreError
from lodex.store.lease import Lease
from lodex.store.object_store import ObjectStore

LOCK_FILE = "writer.lock"


class WriteLock:
    """Exclusive, non-blocking flock on data_dir/writer.lock; released on close or process death. With `remote` (the
    index on object storage, data_dir its local cache), the writer's lease on it is taken after the flock."""

    def __init__(self, data_dir: Path, remote: ObjectStore | None = None) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self.path = data_dir / LOCK_FILE
        self._fd: int | None = None
        self._lease = Lease(remote) if remote is not None else None

    def acquire(self) -> "WriteLock":
        """Take the lock or raise StoreError naming the process that holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise StoreError(
                f"another lodex process (pid {holder}) is writing to the index in {self.path.parent}",
                "wait for it to finish, stop it, or send changes through it (lodex watch/serve pick up folder changes)",
            ) from exc
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd
        if self._lease is not None:
            try:
                self._lease.acquire()
            except BaseException:
                self.release()
                raise
        return self

    def release(self) -> None:
        """Give the lock (and the lease) back."""
        if self._lease is not None and self._fd is not None:
            self._lease.release()
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "WriteLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
