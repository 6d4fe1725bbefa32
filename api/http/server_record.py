"""The record a running `lodex serve` keeps in its data dir (server.json, mode 0600): where it listens and its per-start
identity secret, and the checks that tell a live server of this machine from a stale, foreign or hostile record.
Standard library only: the CLI's forward (api/http/forward.py) reads it before any heavy import."""

import hashlib
import hmac
import ipaddress
import json
import os
import secrets
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SERVER_FILE = "server.json"
_MAX_RECORD = 64 * 1024
CHALLENGE_PATTERN = "^[0-9a-f]{32,128}$"


@dataclass(frozen=True)
class Identity:
    """Who a `lodex serve` is: a random instance id and a per-start secret, written to its record (mode 0600) and
    never sent; it answers a challenge with proof(challenge), which only a holder of the secret can compute."""

    instance: str
    secret: str

    @classmethod
    def new(cls) -> "Identity":
        return cls(secrets.token_hex(16), secrets.token_hex(32))

    def proof(self, challenge: str) -> str:
        """HMAC-SHA256 of the challenge (bound to this instance) under the secret, in hex."""
        message = f"lodex-identity-v1\0{self.instance}\0{challenge}".encode()
        return hmac.new(self.secret.encode(), message, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class ServerRecord:
    """A live server of this data dir, as its record says: where to reach it, and what it must prove."""

    host: str
    port: int
    identity: Identity


def _client_host(host: str) -> str:
    """Where to reach a server bound to `host` from this machine."""
    return "127.0.0.1" if host in ("", "0.0.0.0", "::") else host


def is_loopback_address(host: str) -> bool:
    """Whether `host` is 127.0.0.0/8, ::1 or localhost (nothing that a resolver or another machine could answer for)."""
    host = host.strip("[]").lower()
    if host in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _process_start(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot, from /proc), to tell a reused pid; None where unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError, ValueError):
        return None


def record_server(data_dir: Path, host: str, port: int, identity: Identity) -> Path:
    """Write where this process serves `data_dir`, with its identity, readable by its owner only (mode 0600; replaced
    atomically; removed by forget_server)."""
    path = data_dir / SERVER_FILE
    tmp = path.with_name(f".{SERVER_FILE}.{os.getpid()}")
    record = {
        "pid": os.getpid(),
        "process_start": _process_start(os.getpid()),
        "host": host,
        "port": port,
        "hostname": socket.gethostname(),
        "started": time.time(),
        "instance": identity.instance,
        "secret": identity.secret,
    }
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(json.dumps(record))
    os.replace(tmp, path)
    return path


def forget_server(data_dir: Path) -> None:
    """Remove this process's record (another server's record is left alone)."""
    path = data_dir / SERVER_FILE
    try:
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError, AttributeError):
        pass


def _read_record(path: Path) -> tuple[dict[str, Any] | None, str]:
    """The record's fields, or (None, why it is ignored): it must be a regular file of this user that no one else can
    read or write (it holds the secret), at most 64 KiB of JSON."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None, ""
    except OSError:
        return None, f"ignoring {path}: not a regular file"
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not (st.st_mode & 0o170000 == 0o100000):
            return None, f"ignoring {path}: not a regular file"
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            return None, f"ignoring {path}: it belongs to another user"
        if st.st_mode & 0o077:
            return None, f"ignoring {path}: other users can read or change it (a server writes it with mode 0600)"
        try:
            record = json.loads(fh.read(_MAX_RECORD + 1))
        except (OSError, ValueError):
            return None, ""
    return (record, "") if isinstance(record, dict) else (None, "")


def read_server(data_dir: Path) -> tuple[ServerRecord | None, str]:
    """The live `lodex serve` of this data dir on this machine, from its record; or (None, why a record is refused: "" when
    there is none or it is stale, a server killed or another machine's)."""
    record, reason = _read_record(data_dir / SERVER_FILE)
    if record is None:
        return None, reason
    try:
        pid, host, port = int(record["pid"]), _client_host(str(record["host"])), int(record["port"])
    except (KeyError, ValueError, TypeError):
        return None, ""
    if not isinstance(record.get("instance"), str) or not isinstance(record.get("secret"), str):
        return None, f"ignoring {data_dir / SERVER_FILE}: a server without an identity secret (an older lodex serve; restart it)"
    identity = Identity(record["instance"], record["secret"])
    if record.get("hostname") != socket.gethostname():
        return None, ""  # a data dir shared over the network, served from another machine
    if not is_loopback_address(host):
        return None, f"ignoring {data_dir / SERVER_FILE}: it names {host[:100]!r}, not a loopback address"
    if not (0 < port < 65536 and len(identity.secret) >= 32):
        return None, f"ignoring {data_dir / SERVER_FILE}: not a record lodex serve writes"
    try:
        os.kill(pid, 0)
    except OSError:
        return None, ""  # gone (a record left by a killed server), or another user's process: not that server
    started = record.get("process_start")
    if started is not None and _process_start(pid) not in (None, started):
        return None, ""  # the pid was reused by another process
    return ServerRecord(host, port, identity), ""


def running_server(data_dir: Path) -> ServerRecord | None:
    """The live `lodex serve` of this data dir on this machine, from its record; None when there is none."""
    return read_server(data_dir)[0]
