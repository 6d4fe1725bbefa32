"""End to end: a real `lodex serve` process on a free loopback port, watching a folder, with the real model."""

import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, timeout: float = 10) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


class Server:
    """A `lodex serve` subprocess; waits for /ready."""

    def __init__(self, root: Path, data: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.home = data.parent  # its data dir and its log: what a wait for it watches
        self.log = open(data.parent / f"serve-{self.port}.log", "w+")  # noqa: SIM115
        full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "LODEX_DATA_DIR": str(data), "LODEX_WATCH__QUIET_S": "0.5", **(env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lodex.api.cli", "serve", str(root), "--port", str(self.port), *args],
            env=full_env,
            cwd=REPO,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout: float = 180, path: str = "/ready") -> None:
        """Until `path` answers 200 (/health for a server with an API key: it listens once the service is up)."""

        def ready() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"serve exited: {self.output()}")
            try:
                return get(self.url + path, 2)[0] == 200
            except OSError:
                return False

        wait_until(ready, [self.home], timeout, f"serve to answer {path}", detail=self.output)

    def output(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


@pytest.mark.slow
def test_serve_watches_and_answers(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "wings.md").write_text("# Wings\n\nSwept wings delay the drag rise at transonic Mach numbers.\n")
    server = Server(root, tmp_path / "data")
    try:
        server.wait_ready()
        assert "http://127.0.0.1:" in server.output() and "all-MiniLM-L6-v2" in server.output()
        (root / "terns.txt").write_text("Arctic terns migrate from the Arctic to the Antarctic and back every year.\n")

        def found() -> dict | None:
            status, body = get(server.url + "/search?q=bird%20migration%20between%20poles&k=1")
            assert status == 200
            return body if body["results"] and body["results"][0]["path"] == "terns.txt" else None

        body = wait_until(found, [server.home], 60, "the new file found by a search", detail=server.output)
        assert body["results"][0]["passages"][0]["char_start"] == 0
    finally:
        server.stop()
    assert server.proc.returncode in (0, -15), server.output()  # uvicorn re-raises SIGTERM after a clean shutdown
    assert server.output().rstrip().endswith("stopped")


def test_non_loopback_without_key_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    env = {**os.environ, "LODEX_DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run(
        [sys.executable, "-m", "lodex.api.cli", "serve", str(root), "--host", "0.0.0.0"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "without an API key" in done.stderr and "--insecure" in done.stderr and "Traceback" not in done.stderr
