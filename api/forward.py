"""The CLI's short way to a running `lodex serve`: the server records where it listens in its data dir, and
`lodex search` / `lodex status` ask it over loopback (with the configured key) instead of loading the model and
opening the index themselves; anything amiss (no server, a stale record, 401, a timeout) and they do it themselves.
Standard library only: this runs before any heavy import."""

import http.client
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SERVER_FILE = "server.json"
_CONNECT_S = 0.5  # a server on this machine accepts at once, or is not there
_ANSWER_S = 60.0  # a search under load may take a while; still less than loading the model when the machine is that busy


@dataclass(frozen=True)
class Forwarded:
    """A server's answer, or why there is none (`reason`, for the one line the CLI prints before searching itself)."""

    body: Any = None
    reason: str = ""


def _client_host(host: str) -> str:
    """Where to reach a server bound to `host` from this machine."""
    return "127.0.0.1" if host in ("", "0.0.0.0", "::") else host


def record_server(data_dir: Path, host: str, port: int) -> Path:
    """Write where this process serves `data_dir` (replaced atomically; removed by forget_server)."""
    path = data_dir / SERVER_FILE
    tmp = path.with_name(f".{SERVER_FILE}.{os.getpid()}")
    tmp.write_text(json.dumps({"pid": os.getpid(), "host": host, "port": port, "hostname": socket.gethostname(), "started": time.time()}))
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


def running_server(data_dir: Path) -> tuple[str, int] | None:
    """(host, port) of a live `lodex serve` of this data dir on this machine, from its record; None when there is none."""
    try:
        record = json.loads((data_dir / SERVER_FILE).read_text())
        pid, host, port = int(record["pid"]), str(record["host"]), int(record["port"])
        if record.get("hostname") != socket.gethostname():
            return None  # a data dir shared over the network, served from another machine
        os.kill(pid, 0)
    except ProcessLookupError:
        return None  # a record left by a server that was killed
    except PermissionError:
        pass  # alive, another user's
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return _client_host(host), port


def ask_server(data_dir: Path, api_key: str, method: str, target: str, body: dict[str, Any] | None = None) -> Forwarded:
    """The JSON answer of the server of `data_dir` to one request, or Forwarded(reason=...) when it cannot be had."""
    found = running_server(data_dir)
    if found is None:
        return Forwarded()
    host, port = found
    headers = {"Accept": "application/json", "Host": f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    payload = None
    if body is not None:
        payload = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    connection = http.client.HTTPConnection(host, port, timeout=_CONNECT_S)
    try:
        connection.connect()
        if connection.sock is not None:
            connection.sock.settimeout(_ANSWER_S)
        connection.request(method, target, payload, headers)
        response = connection.getresponse()
        data = response.read()
    except (OSError, http.client.HTTPException) as exc:
        return Forwarded(reason=f"the server on {host}:{port} did not answer ({type(exc).__name__})")
    finally:
        connection.close()
    if response.status != 200:
        return Forwarded(reason=f"the server on {host}:{port} answered {response.status}" + (" (check api.api_key)" if response.status == 401 else ""))
    try:
        return Forwarded(json.loads(data))
    except ValueError:
        return Forwarded(reason=f"the server on {host}:{port} answered something other than JSON")
