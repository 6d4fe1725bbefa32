"""`lodex search` and `lodex status` ask a running `lodex serve` of the same data dir (no model to load), print what
they would print on their own, and search by themselves when the server is gone or killed (a refused key is shown)."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lodex.api.cli import app
from lodex.api.http.server_record import SERVER_FILE, Identity, forget_server, record_server, running_server
from tests.test_serve import REPO, Server, get
from tests.waiting import wait_until


def _cli(data: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "LODEX_DATA_DIR": str(data), "LODEX_ENCODER__BACKEND": "tests.fakes:fake_encoder", **(env or {})}
    return subprocess.run([sys.executable, "-m", "lodex.api.cli", *args], env=full_env, cwd=REPO, capture_output=True, text=True, timeout=120)


def _here(data: Path, *args: str) -> Any:
    """The same command run by the CLI's code in this process (what is set up and compared with, not what is checked)."""
    env = {"HF_HUB_OFFLINE": "1", "LODEX_DATA_DIR": str(data), "LODEX_ENCODER__BACKEND": "tests.fakes:fake_encoder"}
    return CliRunner().invoke(app, list(args), env=env)


def _where(data: Path) -> tuple[str, int] | None:
    found = running_server(data)
    return None if found is None else (found.host, found.port)


def test_a_record_names_a_live_server_on_this_machine_only(tmp_path: Path) -> None:
    assert running_server(tmp_path) is None
    record_server(tmp_path, "0.0.0.0", 8123, Identity.new())
    assert _where(tmp_path) == ("127.0.0.1", 8123)  # this process is alive; a wildcard bind is reached on loopback
    record = json.loads((tmp_path / SERVER_FILE).read_text())
    (tmp_path / SERVER_FILE).write_text(json.dumps(record | {"hostname": "another-machine"}))
    assert running_server(tmp_path) is None  # a data dir shared over the network, served elsewhere
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / SERVER_FILE).write_text(json.dumps(record | {"pid": dead.pid}))
    assert running_server(tmp_path) is None  # left by a killed server
    (tmp_path / SERVER_FILE).write_text("{not json")
    assert running_server(tmp_path) is None
    record_server(tmp_path, "127.0.0.1", 8123, Identity.new())
    (tmp_path / SERVER_FILE).write_text(json.dumps(json.loads((tmp_path / SERVER_FILE).read_text()) | {"pid": 1}))
    forget_server(tmp_path)
    assert (tmp_path / SERVER_FILE).exists()  # another process's record is left alone


def _wait_listening(server: Server, timeout: float = 120) -> None:
    """Until the server answers (/health needs no key; it listens once its model is loaded and its index open)."""

    def listening() -> bool:
        assert server.proc.poll() is None, server.output()
        try:
            return get(server.url + "/health", 2)[0] == 200
        except OSError:
            return False

    wait_until(listening, [server.home], timeout, "serve to listen", detail=server.output)


HEAVY = {"lodex.api.factory", "numpy", "pyarrow", "lancedb", "onnxruntime", "torch"}  # what a forwarded command never needs


def _imports(done: subprocess.CompletedProcess) -> set[str]:
    """The modules a CLI run with PYTHONPROFILEIMPORTTIME=1 imported."""
    return {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}


@pytest.mark.slow
def test_the_cli_asks_a_running_server_and_falls_back_when_it_cannot(tmp_path: Path) -> None:
    root, data = tmp_path / "docs", tmp_path / "data"
    root.mkdir()
    (root / "wings.md").write_text("# Wings\n\nSwept wings delay the drag rise at transonic Mach numbers.\n")
    (root / "terns.txt").write_text("Arctic terns migrate from the Arctic to the Antarctic and back every year.\n")
    assert _here(data, "index", str(root)).exit_code == 0
    local = _here(data, "search", "swept wings drag", "--json", "--local")
    assert local.exit_code == 0, local.output
    server = Server(root, data, env={"LODEX_ENCODER__BACKEND": "tests.fakes:fake_encoder", "LODEX_API__API_KEY": "sesame"})
    try:
        _wait_listening(server)
        assert _where(data) == ("127.0.0.1", server.port)
        asked = _cli(data, "search", "swept wings drag", "--json", env={"LODEX_API__API_KEY": "sesame"})
        assert asked.returncode == 0 and "searching the index here" not in asked.stderr
        assert "loading" not in asked.stderr
        traced = _cli(data, "search", "swept wings drag", "--json", env={"LODEX_API__API_KEY": "sesame", "PYTHONPROFILEIMPORTTIME": "1"})
        assert "lodex.api.http.forward" in _imports(traced)  # the trace works
        assert not _imports(traced) & HEAVY, "a forwarded search imports the search stack"
        assert json.loads(asked.stdout)["results"] == json.loads(local.stdout)["results"]
        human = _cli(data, "search", "swept wings drag", env={"LODEX_API__API_KEY": "sesame"})
        assert "wings.md" in human.stdout and "1. " in human.stdout
        status = json.loads(_cli(data, "status", "--json", env={"LODEX_API__API_KEY": "sesame"}).stdout)
        assert status["documents"] == 2 and status["chunks"] >= 2
        traced = _cli(data, "status", "--json", env={"LODEX_API__API_KEY": "sesame", "PYTHONPROFILEIMPORTTIME": "1"})
        assert json.loads(traced.stdout)["documents"] == 2
        assert not _imports(traced) & HEAVY, "a forwarded status imports the search stack"
        refused = _cli(data, "search", "swept wings drag", "--json", env={"LODEX_API__API_KEY": "wrong"})
        assert refused.returncode == 2 and "answered 401 (check api.api_key)" in refused.stderr and not refused.stdout
        assert "searching the index here" not in refused.stderr  # a refused request is shown, never searched around
        server.proc.send_signal(signal.SIGKILL)  # killed: its record stays behind
        server.proc.wait(timeout=30)
        assert (data / SERVER_FILE).exists() and running_server(data) is None
        alone = _cli(data, "search", "swept wings drag", "--json", env={"LODEX_API__API_KEY": "sesame"})
        assert alone.returncode == 0 and json.loads(alone.stdout)["results"] == json.loads(local.stdout)["results"]
    finally:
        if server.proc.poll() is None:
            server.stop()
    restarted = Server(root, data, env={"LODEX_ENCODER__BACKEND": "tests.fakes:fake_encoder"})
    try:
        restarted.wait_ready()
        assert _where(data) == ("127.0.0.1", restarted.port)
    finally:
        restarted.stop()
    assert not (data / SERVER_FILE).exists()  # a server that stops takes its record with it
