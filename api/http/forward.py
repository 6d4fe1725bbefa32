"""The CLI's short way to a running `lodex serve`: the server records where it listens in its data dir, with a per-start
secret (a file only its owner reads; api/http/server_record.py), and `lodex search` / `lodex status` ask it over loopback instead of loading the
model and opening the index themselves, once the listener has proven it holds that secret (before the API key is
sent); anything amiss (no server, a stale or hostile record, no proof, 401, past the deadline) and they do it
themselves. Standard library only: this runs before any heavy import (api/http/json_client.py, lodex's one HTTP client of
its own API, gives the connection and reads the error shape)."""

import hmac
import http.client
import json
import secrets
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lodex.api.http.json_client import connection as new_connection
from lodex.api.http.json_client import error_of
from lodex.api.http.server_record import Identity, is_loopback_address, read_server

DEADLINE_S = 3.0  # the whole forward (connect, proof, request, answer), then the CLI searches by itself
PROOF_S = 1.0  # of which the listener has this long to prove it is the server of the record (a lodex answers in ms)
_CONNECT_S = 0.5  # a server on this machine accepts at once, or is not there
_MAX_PROOF = 4096  # bytes of the identity answer (a few dozen are expected)


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
