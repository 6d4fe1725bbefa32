"""The command line: index/search/status, JSON shapes, global options, one-line errors with exit codes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lodex.api.cli import app

runner = CliRunner()


@pytest.fixture
def folder(cli_home: Path) -> Path:
    tmp_path = cli_home
    root = tmp_path / "docs"
    root.mkdir()
    (root / "wings.md").write_text("# Wings\n\nLift and drag of swept wings at transonic speed. " * 5)
    (root / "heat.txt").write_text("Heat transfer through a hypersonic boundary layer. " * 5)
    (root / "blob.txt").write_bytes(b"\x00\x01\x02 binary" * 50)
    return root


def _json(result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_index_search_status_json(folder: Path, tmp_path: Path) -> None:
    summary = _json(runner.invoke(app, ["index", str(folder), "--json"]))
    assert summary["added"] == 2 and summary["failed"] == 1 and "blob.txt" in summary["failures"]
    assert (tmp_path / ".lodex" / "origin.json").exists()  # data dir defaults to ./.lodex
    phases = summary["phases"]  # where the wall time went, start (the process's age when the run began) first
    assert list(phases) == ["start", "scan", "read", "encode", "commit", "finish"] and all(v >= 0 for v in phases.values())
    assert sum(v for k, v in phases.items() if k != "start") <= summary["seconds"] + 0.01 and phases["start"] > 0
    body = _json(runner.invoke(app, ["search", "swept wings lift", "-k", "1", "--json"]))
    assert set(body) == {"query", "mode", "took_ms", "results"}
    assert [r["path"] for r in body["results"]] == ["wings.md"]
    status = _json(runner.invoke(app, ["status", "--json"]))
    assert (status["documents"], status["chunks"], status["failed"]) == (2, 2, 1)
    assert isinstance(status["documents"], int) and status["model"] == "fake-bag-of-words"
    assert status["root"] == str(folder)
    again = _json(runner.invoke(app, ["index", str(folder), "--json"]))
    assert again["unchanged"] == 2 and again["added"] == 0


def test_every_door_reports_one_status(folder: Path) -> None:
    """`lodex status --json`, the in-process index, GET /status and /stats and MCP's status report the same fields with
    the same values (one function computes them: api/reading.py index_status)."""
    import anyio
    from fastapi.testclient import TestClient

    import lodex
    from lodex.api.factory import open_app
    from lodex.api.http.app import create_app
    from lodex.api.mcp.server import build_mcp
    from lodex.api.settings import Settings

    assert runner.invoke(app, ["index", str(folder)]).exit_code == 0
    cli = _json(runner.invoke(app, ["status", "--json"]))
    with lodex.open(folder.parent / ".lodex") as index:
        own = index.status().model_dump()
        mcp = anyio.run(build_mcp(index).call_tool, "status", {}).structured_content
    assert {key: cli[key] for key in own} == own == mcp
    assert own["keywords_segmented"] is True and (own["documents"], own["failed"]) == (2, 1)
    settings = Settings(base_dir=folder.parent)
    with open_app(settings, "serve", folder, watch=False) as served, TestClient(create_app(served), base_url="http://127.0.0.1:8765") as client:
        status, stats = client.get("/status").json(), client.get("/stats").json()
    assert status == {key: stats[key] for key in status} == own


def test_global_options_before_or_after_the_command(folder: Path, tmp_path: Path) -> None:
    data = tmp_path / "elsewhere"
    assert runner.invoke(app, ["--data-dir", str(data), "index", str(folder)]).exit_code == 0
    assert _json(runner.invoke(app, ["status", "--data-dir", str(data), "--json"]))["documents"] == 2
    env_status = runner.invoke(app, ["status", "--json"], env={"LODEX_DATA_DIR": str(data)})
    assert _json(env_status)["documents"] == 2


def test_config_file_and_env_override(folder: Path, tmp_path: Path) -> None:
    config = tmp_path / "conf" / "lodex.toml"
    config.parent.mkdir()
    config.write_text(f'[index]\nroot = "{folder}"\ndata_dir = "idx"\nexclude = ["heat.*"]\n')
    summary = _json(runner.invoke(app, ["--config", str(config), "index", "--json"]))
    assert summary["added"] == 1
    assert (config.parent / "idx" / "origin.json").exists()  # relative to the config file
    status = runner.invoke(app, ["status", "--json"], env={"LODEX_CONFIG": str(config)})
    assert _json(status)["documents"] == 1
    overridden = runner.invoke(app, ["index", "--json"], env={"LODEX_CONFIG": str(config), "LODEX_INDEX__EXCLUDE": "[]"})
    assert _json(overridden)["added"] == 1 and _json(overridden)["unchanged"] == 1


@pytest.mark.parametrize(
    "args, env, expected",
    [
        (["search", "anything"], {}, "no index"),
        (["status"], {}, "no index"),
        (["index", "/no/such/folder"], {}, "not a folder"),
        (["index"], {}, "no folder to index"),
        (["index", "."], {"LODEX_SEARCH__K": "many"}, "invalid setting search.k"),
        (["index", "."], {"LODEX_ENCODER__BACKEND": "nope"}, "unknown encoder.backend"),
        (["--config", "missing.toml", "status"], {}, "config file missing.toml not found"),
    ],
)
def test_errors_are_one_line_with_a_fix(folder: Path, args: list[str], env: dict, expected: str) -> None:
    result = runner.invoke(app, args, env=env)
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and expected in lines[0] and "—" in lines[0], result.stderr
    assert "Traceback" not in result.output


def test_origin_mismatch_from_the_cli(folder: Path, tmp_path: Path) -> None:
    assert runner.invoke(app, ["index", str(folder)]).exit_code == 0
    result = runner.invoke(app, ["index", str(folder)], env={"LODEX_CHUNKING__OVERLAP": "8"})
    assert result.exit_code == 2 and "chunk_overlap" in result.stderr and "--rebuild" in result.stderr
    rebuilt = runner.invoke(app, ["index", str(folder), "--rebuild", "--json"], env={"LODEX_CHUNKING__OVERLAP": "8"})
    assert _json(rebuilt)["added"] == 2


def test_another_folder_into_the_same_index_is_refused(folder: Path, tmp_path: Path) -> None:
    assert runner.invoke(app, ["index", str(folder)]).exit_code == 0
    other = tmp_path / "other"
    other.mkdir()
    result = runner.invoke(app, ["index", str(other)])
    assert result.exit_code == 2 and "mirrors" in result.stderr


@pytest.mark.slow
def test_real_cli_process_with_the_bundled_model(tmp_path: Path) -> None:
    """The installed console script, end to end, on the real model."""
    root = tmp_path / "docs"
    root.mkdir()
    (root / "terns.md").write_text("# Birds\n\nArctic terns migrate from pole to pole every year.\n")
    (root / "wings.txt").write_text("Swept wings delay the drag rise at transonic Mach numbers.\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LODEX_DATA_DIR": str(tmp_path / "data")}
    lodex = [sys.executable, "-m", "lodex.api.cli"]
    cwd = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [*lodex, "index", str(root)],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "2 added" in done.stderr
    found = subprocess.run([*lodex, "search", "bird migration", "--json"], env=env, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    body = json.loads(found.stdout)
    assert body["results"][0]["path"] == "terns.md"
    assert body["results"][0]["passages"][0]["char_start"] == 0
    assert cwd.exists()


def test_progress_bar_draws_on_a_terminal_and_runs_no_redraw_thread_elsewhere() -> None:
    import io
    import threading

    from rich.console import Console

    from lodex.api.cli.progress import progress_bar
    from lodex.indexer.run_state import Progress

    piped = io.StringIO()
    before = threading.active_count()
    with progress_bar(Console(file=piped)) as update:  # stderr redirected to a file or a pipe
        assert threading.active_count() == before  # no redraw thread taking CPU from the encoder
        update(Progress(files_total=3, files_done=1, chunks=7))
    assert piped.getvalue() == ""
    terminal = io.StringIO()
    with progress_bar(Console(file=terminal, force_terminal=True, width=100)) as update:
        update(Progress(files_total=3, files_done=1, chunks=7))
    assert "1/3" in terminal.getvalue() and "7 chunks" in terminal.getvalue()


def test_the_search_stack_runs_numpy_blas_on_one_thread() -> None:
    """OpenBLAS's idle workers spin after each call: loading lodex's search and index stack caps numpy's to one thread
    even when the environment asks for four, and leaves FAISS's own OpenBLAS alone."""
    probe = (
        "import faiss, numpy, threadpoolctl\n"
        "def blas():\n    return {i['filepath'].split('/')[-2]: i['num_threads'] for i in threadpoolctl.threadpool_info()"
        " if i['user_api'] == 'blas'}\n"
        "before = blas()\nimport lodex.api.factory\n"
        "print([before, blas()])"
    )
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "4", "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120, check=True)
    before, after = eval(out.stdout.strip().splitlines()[-1])  # noqa: S307 — the two dicts the probe printed
    assert after["numpy.libs"] == 1
    assert after.get("faiss_cpu.libs") == before.get("faiss_cpu.libs")
