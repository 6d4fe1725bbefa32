"""One writer per index on object storage: a lease file beside the tables, renewed while the writer lives, that another
writer refuses to take until it expires."""

import json
import os
import socket
import threading
import time
import uuid

from lodex.store.errors import StoreError
from lodex.store.object_store import ObjectStore

LEASE_FILE = "writer.lease"
LEASE_S = 30.0  # a writer killed without releasing its lease keeps others out this long at most
SETTLE_S = 0.2  # wait between writing the lease and reading it back: of two writers that raced, the later one wins


class Lease:
    """The writer's lease on an index on object storage: {owner, host, pid, expires}. Object stores offer no lock, and
    pyarrow no conditional write, so the lease is written, read back after a moment, and kept only if it is still
    ours; it keeps a second writer out (with a clear error), and should two start at the same instant, Lance's
    conditional-put commits still keep every table whole (no commit is lost or torn)."""

    def __init__(self, store: ObjectStore, ttl_s: float = LEASE_S) -> None:
        self.store = store
        self.ttl_s = ttl_s
        self.owner = uuid.uuid4().hex
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def _record(self) -> dict[str, object]:
        return {"owner": self.owner, "host": socket.gethostname(), "pid": os.getpid(), "expires": time.time() + self.ttl_s}

    def _holder(self) -> dict[str, object] | None:
        data = self.store.get(LEASE_FILE)
        try:
            held = json.loads(data) if data else None
        except ValueError:
            return None  # half a lease written by hand or a broken tool: nobody's
        return held if isinstance(held, dict) else None

    def _refuse(self, held: dict[str, object]) -> StoreError:
        left = max(0, round(_expires(held) - time.time()))
        return StoreError(
            f"another lodex process (pid {held.get('pid')} on {held.get('host')}) is writing to the index in {self.store}",
            f"wait for it to finish or stop it; a writer that was killed lets go within {left} s",
        )

    def acquire(self) -> "Lease":
        """Take the lease or raise StoreError naming the process (and host) that holds it; renewed from now on."""
        held = self._holder()
        if held is not None and held.get("owner") != self.owner and _expires(held) > time.time():
            raise self._refuse(held)
        self.store.put(LEASE_FILE, json.dumps(self._record()).encode())
        time.sleep(SETTLE_S)
        held = self._holder()
        if held is None or held.get("owner") != self.owner:
            raise self._refuse(held or {})
        self._renewer = threading.Thread(target=self._renew, name="lodex-lease", daemon=True)
        self._renewer.start()
        return self

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl_s / 3):
            try:
                self.store.put(LEASE_FILE, json.dumps(self._record()).encode())
            except StoreError:
                pass  # the store unreachable for a moment: the next renewal tries again, within the lease

    def release(self) -> None:
        """Stop renewing and remove the lease (when it is still ours)."""
        if self._renewer is None:
            return
        self._stop.set()
        self._renewer.join()
        self._renewer = None
        held = self._holder()
        if held is not None and held.get("owner") == self.owner:
            self.store.delete(LEASE_FILE)


def _expires(held: dict[str, object]) -> float:
    """When a held lease runs out (0 where its record says nothing readable: nobody holds it then)."""
    value = held.get("expires", 0)
    try:
        return float(value) if isinstance(value, (int, float, str)) else 0.0
    except ValueError:
        return 0.0
