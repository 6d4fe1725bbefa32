"""The CLI's short way to a running `lodex serve`: the server records where it listens in its data dir, with a per-start
secret (a file only its owner reads), and `lodex search` / `lodex status` ask it over loopback instead of loading the
model and opening the index themselves, once the listener has proven it holds that secret (before the API key is
sent); anything amiss (no server, a stale or hostile record, no proof, 401, past the deadline) and they do it
themselves. Standard library only: this runs before any heavy import (api/http/json_client.py, lodex's one HTTP client of
its own API, gives the connection and reads the error shape)."""

import hashlib
import hmac
import http.client
import ipaddress
import json
import os
import secrets
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lodex.api.http.json_client import connection as new_connection
from lodex.api.http.json_client import error_of

SERVER_FILE = "server.json"
DEADLINE_S = 3.0  # the whole forward (connect, proof, request, answer), then the CLI searches by itself
PROOF_S = 1.0  # of which the listener has this long to prove it is the server of the record (a lodex answers in ms)
_CONNECT_S = 0.5  # a server on this machine accepts at once, or is not there
_MAX_RECORD = 64 * 1024
_MAX_PROOF = 4096  # bytes of the identity answer (a few dozen are expected)
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


@dataclass(frozen=True)
class Forwarded:
    """A server's answer, or why there is none (`reason`, for the one line the CLI prints before searching itself); a
    4xx answer is `refused`, with its `status` and the server's `error` message (the CLI shows it, and does not search
    itself: the request, not the server, is at fault)."""

    body: Any = None
    reason: str = ""
    status: int = 0
    error: str = ""

    @property
    def refused(self) -> bool:
        """The server answered 4xx: it refused the request."""
        return 400 <= self.status < 500


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


class _Unproven(Exception):
    """The listener did not prove it is the server of the record."""


def _prove(connection: http.client.HTTPConnection, headers: dict[str, str], identity: Identity) -> None:
    """Ask the listener for proof of the record's secret on this connection; _Unproven unless it gives it."""
    sock = connection.sock
    if sock is None or not is_loopback_address(str(sock.getpeername()[0])):
        raise _Unproven("it is not on a loopback address")
    challenge = secrets.token_hex(16)
    connection.request("GET", f"/identity?challenge={challenge}", headers=headers)
    response = connection.getresponse()
    data = response.read(_MAX_PROOF + 1)
    if response.status != 200 or len(data) > _MAX_PROOF or not response.isclosed():
        raise _Unproven(f"it answered {response.status} to the identity challenge")
    try:
        answer = json.loads(data)
        proven = answer["instance"] == identity.instance and hmac.compare_digest(str(answer["proof"]).encode(), identity.proof(challenge).encode())
    except (ValueError, KeyError, TypeError):
        proven = False
    if not proven:
        raise _Unproven("it does not hold the secret of the record")


def ask_server(
    data_dir: Path, api_key: str, method: str, target: str, body: dict[str, Any] | None = None, deadline_s: float = DEADLINE_S
) -> Forwarded:
    """The JSON answer of the server of `data_dir` to one request, or Forwarded(reason=...) when it cannot be had: the
    listener first proves it holds the record's secret (within PROOF_S), and only then gets the request and the key,
    on the same connection; the whole exchange ends within `deadline_s`."""
    found, reason = read_server(data_dir)
    if found is None:
        return Forwarded(reason=reason)
    host, port, where = found.host, found.port, f"{found.host}:{found.port}"
    headers = {"Accept": "application/json", "Host": f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"}
    connection = new_connection(host, port, min(_CONNECT_S, deadline_s))
    connection.auto_open = 0  # never reconnect: the key goes only over the connection that proved itself
    started = time.monotonic()
    cutter = _Cutter(connection, started)
    timer, proven = cutter.at(min(PROOF_S, deadline_s)), False
    try:
        connection.connect()
        _prove(connection, headers, found.identity)
        timer.cancel()
        proven = True
        timer = cutter.at(deadline_s)
        if connection.sock is not None:
            connection.sock.settimeout(max(0.01, deadline_s - (time.monotonic() - started)))
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        connection.request(method, target, payload, headers)
        response = connection.getresponse()
        data = response.read()
        if cutter.cut.is_set():
            raise TimeoutError()
    except _Unproven as exc:
        return Forwarded(reason=f"the listener on {where} did not prove it is the lodex server of this data dir ({exc}); the key was not sent")
    except (OSError, http.client.HTTPException) as exc:
        if not proven:
            why = f"no answer within {min(PROOF_S, deadline_s):g} s" if cutter.cut.is_set() or isinstance(exc, TimeoutError) else type(exc).__name__
            return Forwarded(reason=f"the listener on {where} did not prove it is the lodex server of this data dir ({why}); the key was not sent")
        if cutter.cut.is_set():
            return Forwarded(reason=f"the server on {where} did not answer within {deadline_s:g} s")
        return Forwarded(reason=f"the server on {where} did not answer ({type(exc).__name__})")
    finally:
        timer.cancel()
        connection.close()
    return _answered(response.status, data, where)


class _Cutter:
    """Ends a connection's reads at a deadline counted from `started`: a trickling listener keeps every read short, so
    a per-read timeout alone would never end the exchange."""

    def __init__(self, connection: http.client.HTTPConnection, started: float) -> None:
        self.connection, self.started, self.cut = connection, started, threading.Event()

    def at(self, limit: float) -> threading.Timer:
        """A started timer that cuts the connection `limit` seconds after the start (cancel it when done in time)."""
        timer = threading.Timer(max(0.0, limit - (time.monotonic() - self.started)), self._stop)
        timer.daemon = True
        timer.start()
        return timer

    def _stop(self) -> None:
        self.cut.set()
        if self.connection.sock is not None:
            try:
                self.connection.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _answered(status: int, data: bytes, where: str) -> "Forwarded":
    """The server's answer (its JSON), or the reason it is not one: an error status or something other than JSON."""
    if 400 <= status < 500:
        return Forwarded(
            reason=f"the server on {where} answered {status}" + (" (check api.api_key)" if status == 401 else ""),
            status=status,
            error=(error_of(data) or ("", ""))[1],
        )
    if status != 200:
        return Forwarded(reason=f"the server on {where} answered {status}", status=status)
    try:
        return Forwarded(json.loads(data))
    except ValueError:
        return Forwarded(reason=f"the server on {where} answered something other than JSON")
