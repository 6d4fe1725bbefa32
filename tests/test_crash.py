"""kill -9 at many moments of `lodex index` (in a subprocess): every rerun resumes what the killed runs left, encodes no
committed file again, and the run that finishes converges to the folder, exactly; an update run killed mid-way too."""

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lodex.store.lance_store import LanceStore
from tests.fakes import FakeEncoder
from tests.invariants import check_index

REPO = Path(__file__).resolve().parents[1]
MARK = re.compile(r"\bf(\d{3})w\d+\b")
FILES = 520  # a whole run over them: 131 commits of 256 tokens (about 4 files each)
# Where the runs are killed, in turn, each resuming what the ones before left: (the embed call of that run whose commit
# is killed, ms from that encode to the kill, so that it lands at different moments of the commit). The first is the
# first commit of a fresh index; the others, run after run, about 3, 25, 60, 100 and 125 of the 131 commits into the
# folder (each run first encodes again the few files the kill before left uncommitted).
KILL_POINTS = [(1, 0), (3, 1), (24, 3), (36, 8), (41, 2), (30, 15)]


def _write_folder(root: Path, n: int = FILES, version: str = "v1") -> None:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        words = " ".join(f"f{i:03d}w{j}" for j in range(40))
        (root / f"doc-{i:03d}.txt").write_text(f"{version} document {i}\n\n{words}\n\n{words} {version}\n")


def _env(data: Path, log: Path, kill_after: int = 0, delay_ms: float = 0) -> dict[str, str]:
    """`lodex index`'s environment: killed in its `kill_after`th commit (a commit every few files), or, without it, a
    run to the end in fewer, larger commits (a rerun's commit size is not under test)."""
    return {
        "LODEX_DATA_DIR": str(data),
        "LODEX_ENCODER__BACKEND": "tests.fakes:crashing_encoder",
        "LODEX_INDEX__FLUSH_TOKENS": "256" if kill_after else "2048",
        "LODEX_TEST_ENCODE_LOG": str(log),
        "LODEX_TEST_KILL_AFTER": str(kill_after),
        "LODEX_TEST_KILL_DELAY_MS": str(delay_ms),
    }


def _killed(data: Path, root: Path, log: Path, kill_after: int, delay_ms: float) -> None:
    """`lodex index` of the folder in a subprocess, SIGKILLed as it commits (asserted)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", **_env(data, log, kill_after, delay_ms)}
    args = [sys.executable, "-m", "lodex.api.cli", "index", str(root), "--json"]
    run = subprocess.run(args, env=env, cwd=root.parent, capture_output=True, text=True, timeout=600)
    assert run.returncode == -9, f"not killed at {kill_after}: {run.stderr[-2000:]}"


def _finished(data: Path, root: Path, log: Path) -> dict:
    """`lodex index` of the folder run to the end in this process (nothing to kill: no import paid again); its summary."""
    from lodex.api.cli import app

    result = CliRunner().invoke(app, ["index", str(root), "--json"], env=_env(data, log))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _committed(data: Path, root: Path) -> set[int]:
    """Files whose current content is committed in the index (by their number)."""
    if not (data / "origin.json").exists():
        return set()
    store = LanceStore(data, 256)
    done = set()
    for path, record in store.document_records().items():
        file = root / path
        if file.exists() and record.content_hash == hashlib.blake2b(file.read_bytes(), digest_size=16).hexdigest():
            done.add(int(path[4:7]))
    return done


def _encoded_files(log: Path) -> set[int]:
    return {int(m.group(1)) for line in log.read_text().splitlines() for m in MARK.finditer(line)} if log.exists() else set()


@pytest.mark.slow
def test_runs_killed_at_each_point_resume_and_converge_then_an_update_run_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs killed at each of KILL_POINTS in turn: each kill comes before the end (not every file committed), no run
    encodes a file committed before it, and nothing committed is lost; the rerun that finishes encodes exactly the
    files not committed and leaves an index equal to the folder (tests/invariants.py). Then changed, deleted and
    renamed files in a run killed mid-way: its rerun converges, encoding only the changed files."""
    root, data = tmp_path / "docs", tmp_path / "data"
    monkeypatch.chdir(tmp_path)
    _write_folder(root)
    committed: set[int] = set()
    for kill_after, delay_ms in KILL_POINTS:
        log = tmp_path / f"killed-{kill_after}.log"
        _killed(data, root, log, kill_after, delay_ms)
        encoded, now = _encoded_files(log), _committed(data, root)
        assert encoded and not encoded & committed, f"{kill_after}: committed files encoded again: {sorted(encoded & committed)[:10]}"
        assert committed <= now and len(now) < FILES, (kill_after, len(committed), len(now))
        committed = now
    assert len(committed) > FILES // 2, len(committed)  # the later kills came late in the folder
    assert _finished(data, root, tmp_path / "restart.log")["added"] == FILES - len(committed)
    check_index(LanceStore(data, 256), root, persisted=True, encoder=FakeEncoder())
    re_encoded = _encoded_files(tmp_path / "restart.log")
    assert not (re_encoded & committed), f"finished files encoded again: {sorted(re_encoded & committed)[:10]}"
    assert re_encoded == set(range(FILES)) - committed

    for i in range(0, 100):
        (root / f"doc-{i:03d}.txt").write_text(f"v2 document {i}\n\n" + " ".join(f"f{i:03d}w{j}" for j in range(60)))
    for i in range(100, 150):
        (root / f"doc-{i:03d}.txt").unlink()
    for i in range(150, 200):
        (root / f"doc-{i:03d}.txt").rename(root / f"doc-{i + 400:03d}.txt")
    _killed(data, root, tmp_path / "update-killed.log", kill_after=12, delay_ms=4)
    _finished(data, root, tmp_path / "update-restart.log")
    check_index(LanceStore(data, 256), root, persisted=True, encoder=FakeEncoder())
    assert _encoded_files(tmp_path / "update-restart.log") <= set(range(100)), "only changed files may be encoded"
