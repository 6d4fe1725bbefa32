"""A moto S3 server in a process of its own (so that its Python does not share the simulation's interpreter lock), with
faults injected per request: added latency, requests refused with a 503 before they are served, and replies lost after
the request took effect (the client sees a 500 and cannot tell that it did). Faults are set and counted over HTTP
(`/__faults__`), so one server serves a whole sweep.

usage (a helper of bench/scale/scaleout.py): python bench/scale/scaleout_s3.py PORT  (0: a free port, printed on stdout)
"""

import json
import logging
import os
import random
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

CONTROL = "/__faults__"
Start = Callable[[str, list[tuple[str, str]]], Any]


@dataclass
class Faults:
    """What is injected into each request (`latency_ms` before it is served; `refuse`, `lose`: the share of requests
    refused with a 503, or served and answered with a 500), and what was done so far."""

    latency_ms: float = 0.0
    refuse: float = 0.0
    lose: float = 0.0
    seed: int = 0
    counts: dict[str, int] = field(default_factory=dict)


class FaultyApp:
    """A WSGI middleware over moto's app that injects `Faults`; GET/POST `/__faults__` reads or sets them."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app, self.faults, self.lock = app, Faults(), threading.Lock()
        self.random = random.Random(0)

    def __call__(self, environ: dict[str, Any], start: Start) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == CONTROL:
            return self._control(environ, start)
        with self.lock:
            faults, roll = self.faults, self.random.random()
        self._count(environ["REQUEST_METHOD"])
        if faults.latency_ms:
            time.sleep(faults.latency_ms / 1000)
        if roll < faults.refuse:
            self._count("refused")
            return _error(start, "503 Service Unavailable", "SlowDown")
        reply: list[Any] = []
        body = b"".join(self.app(environ, lambda status, headers, *rest: reply.extend((status, headers))))
        if roll < faults.refuse + faults.lose:  # served, and the reply lost: the client cannot tell it took effect
            self._count(f"lost {environ['REQUEST_METHOD']}")
            return _error(start, "500 Internal Server Error", "InternalError")
        if not reply[0].startswith("2"):
            self._count(f"answered {reply[0].split()[0]}")  # 412: a conditional commit put that lost its race
        start(reply[0], reply[1])
        return [body]

    def _count(self, key: str) -> None:
        with self.lock:
            self.faults.counts[key] = self.faults.counts.get(key, 0) + 1

    def _control(self, environ: dict[str, Any], start: Start) -> Iterable[bytes]:
        if environ["REQUEST_METHOD"] == "POST":
            size = int(environ.get("CONTENT_LENGTH") or 0)
            settings = json.loads(environ["wsgi.input"].read(size) or b"{}")
            with self.lock:
                self.faults = Faults(**settings)
                self.random = random.Random(self.faults.seed)
        start("200 OK", [("Content-Type", "application/json")])
        return [json.dumps(asdict(self.faults)).encode()]


def _error(start: Start, status: str, code: str) -> Iterable[bytes]:
    start(status, [("Content-Type", "application/xml")])
    return [f"<?xml version='1.0'?><Error><Code>{code}</Code><Message>injected</Message></Error>".encode()]


def serve(port: int) -> None:
    """Run the faulty moto server on loopback until killed; print its port first."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = make_server(
        "127.0.0.1", port, FaultyApp(DomainDispatcherApplication(create_backend_app)), threaded=True, request_handler=MotoRequestHandler
    )
    print(server.server_address[1], flush=True)
    server.serve_forever()


@dataclass(frozen=True)
class Endpoint:
    """A running server: its URL, and the Lance storage options that reach it."""

    url: str
    pid: int = 0

    def cpu_seconds(self) -> float:
        """CPU seconds the server process has used so far (user and system)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    @property
    def options(self) -> dict[str, str]:
        return {
            "aws_endpoint": self.url,
            "allow_http": "true",
            "aws_region": "us-east-1",
            "aws_access_key_id": "bench",
            "aws_secret_access_key": "bench",
        }

    def set_faults(self, latency_ms: float = 0.0, refuse: float = 0.0, lose: float = 0.0, seed: int = 0) -> None:
        """Inject these faults from now on (all zero: none)."""
        self._call({"latency_ms": latency_ms, "refuse": refuse, "lose": lose, "seed": seed})

    def counts(self) -> dict[str, int]:
        """Requests by method, refused and lost, since the faults were last set."""
        return dict(self._call(None)["counts"])

    def _call(self, settings: dict[str, Any] | None) -> dict[str, Any]:
        data = None if settings is None else json.dumps(settings).encode()
        with urllib.request.urlopen(urllib.request.Request(self.url + CONTROL, data=data), timeout=10) as reply:
            return dict(json.loads(reply.read()))

    def filesystem(self) -> Any:
        import pyarrow.fs as pafs

        return pafs.S3FileSystem(
            endpoint_override=self.url.removeprefix("http://"),
            scheme="http",
            region="us-east-1",
            access_key="bench",
            secret_key="bench",
            allow_bucket_creation=True,
        )

    def create_bucket(self, name: str) -> None:
        self.filesystem().create_dir(name)

    def newest_size(self, folder: str) -> int:
        """The size of the newest object in `folder` (bucket/path): a table's latest manifest in its _versions."""
        import pyarrow.fs as pafs

        infos = self.filesystem().get_file_info(pafs.FileSelector(folder, allow_not_found=True))
        return max(infos, key=lambda i: i.mtime_ns or 0).size if infos else 0


@contextmanager
def s3_server(nice: int = 0) -> Iterator[Endpoint]:
    """A faulty moto server in a child process (at CPU priority `nice`), stopped on exit."""
    child = subprocess.Popen([sys.executable, __file__, "0"], stdout=subprocess.PIPE, text=True, preexec_fn=(lambda: os.nice(nice)) if nice else None)
    try:
        assert child.stdout is not None
        yield Endpoint(f"http://127.0.0.1:{int(child.stdout.readline())}", child.pid)
    finally:
        child.terminate()
        child.wait(10)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
