"""Failing files never stop a run: they are recorded with their reason, listed by status --failed, and retried."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from lodex.store.job_log import JobLog
from tests.conftest import make_pipeline
from tests.fakes import FakeEncoder

REPO = Path(__file__).resolve().parents[1]
_ENV = {"LODEX_ENCODER__BACKEND": "tests.fakes:fake_encoder", "LODEX_INDEX__RETRY_BACKOFF_S": "0.01"}  # the fake encoder, and quick retries


def _index_unprivileged(root: Path, data: Path, cwd: Path) -> subprocess.CompletedProcess:
    """`lodex index` in a process without the power to bypass file permissions (root keeps it unless we drop it)."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: cannot make a file unreadable")
        prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", **_ENV, "LODEX_DATA_DIR": str(data)}
    args = [*prefix, sys.executable, "-m", "lodex.api.cli", "index", str(root), "--json"]
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_failed_files_are_listed_and_retried_once_fixed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first run in a process that cannot read the locked file (as a user's would); the status and retry commands
    after it in this one (they read the job log, and the retry finds the file readable)."""
    from lodex.api.cli import app

    root, data = tmp_path / "docs", tmp_path / "data"
    root.mkdir()
    for i in range(5):
        (root / f"good-{i}.txt").write_text(f"good document {i} about wings and flow " * 20)
    (root / "blob.txt").write_bytes(b"\x00\x01\x02\x03 binary " * 100)
    locked = root / "locked.md"
    locked.write_text("# Locked\n\nThis file cannot be read yet.")
    locked.chmod(0)
    monkeypatch.chdir(tmp_path)
    env = {**_ENV, "LODEX_DATA_DIR": str(data)}

    def cli(*args: str) -> Result:
        result = CliRunner().invoke(app, list(args), env=env)
        assert result.exit_code == 0, result.output
        return result

    try:
        first = _index_unprivileged(root, data, tmp_path)
        assert first.returncode == 0, first.stderr
        summary = json.loads(first.stdout)
        assert summary["added"] == 5 and summary["failed"] == 2
        listed = cli("status", "--failed")
        assert "blob.txt: binary file" in listed.stdout
        assert "locked.md: cannot read: Permission denied (attempts: 4)" in listed.stdout
        status = json.loads(cli("status", "--json").stdout)
        assert status["failed"] == 2 and status["documents"] == 5
        locked.chmod(0o644)
        (root / "blob.txt").write_text("now a readable text file about propellers")
        assert json.loads(cli("retry", "--json").stdout)["added"] == 2
        status = json.loads(cli("status", "--json").stdout)
        assert (status["failed"], status["documents"]) == (0, 7)
        assert cli("status", "--failed").stdout.strip().endswith("no failed files")
    finally:
        locked.chmod(0o644)


class VanishingEncoder(FakeEncoder):
    """Deletes a file of the folder on its first call: that file vanishes while the run goes on."""

    def __init__(self, victim: Path) -> None:
        super().__init__()
        self.victim = victim

    def embed(self, texts: list[str], kind: str = "document", lengths: list[int] | None = None) -> np.ndarray:
        if self.victim.exists():
            self.victim.unlink()
        return super().embed(texts, kind, lengths)


def test_file_vanishing_mid_run_is_recorded_and_retried(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    for i in range(40):
        (root / f"d{i:02d}.txt").write_text(f"document {i} " + " ".join(f"w{i}x{j}" for j in range(150)))
    victim = root / "d39.txt"
    content = victim.read_text()
    jobs = JobLog(tmp_path / "data")
    store, indexer, _ = make_pipeline(tmp_path / "data", VanishingEncoder(victim))
    indexer.jobs, indexer.retry_backoff_s, indexer.flush_tokens = jobs, 0.01, 100
    summary = indexer.run(root)
    assert summary.added == 39
    assert summary.failures == {"d39.txt": "vanished while being read"}
    assert jobs.failed()["d39.txt"]["attempts"] == 2  # 1 try + 1 retry (a save in progress would be back by then)
    victim.write_text(content)
    indexer.encoder.victim = root / "no-such-file"  # this time nothing vanishes while it is encoded
    retried = indexer.run(root, only=list(jobs.failed()), kind="retry")
    assert retried.added == 1 and jobs.failed() == {}
    records = jobs.files_of_run(jobs.last_run()["id"])
    assert [(r.path, r.status) for r in records] == [("d39.txt", "indexed")]
    assert records[0].chunks > 0 and records[0].tokens > 0 and records[0].seconds >= 0


class FolderDeletingEncoder(FakeEncoder):
    """Deletes a whole subfolder on its first call, while the run still has its files to read."""

    def __init__(self, victim: Path) -> None:
        super().__init__()
        self.victim = victim

    def embed(self, texts: list[str], kind: str = "document", lengths: list[int] | None = None) -> np.ndarray:
        if self.victim.exists():  # moved out at once (as a file manager's delete does), then removed
            trash = self.victim.parent.parent / "trash"
            self.victim.rename(trash)
            shutil.rmtree(trash)
        return super().embed(texts, kind, lengths)


def test_a_folder_deleted_mid_run_is_not_waited_for(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    (root / "gone").mkdir(parents=True)
    (root / "a.txt").write_text("first " + " ".join(f"a{j}" for j in range(150)))
    for i in range(30):
        (root / "gone" / f"g{i:02d}.txt").write_text(f"doomed {i} " + " ".join(f"g{i}x{j}" for j in range(150)))
    jobs = JobLog(tmp_path / "data")
    store, indexer, _ = make_pipeline(tmp_path / "data", FolderDeletingEncoder(root / "gone"))
    indexer.jobs, indexer.retry_backoff_s, indexer.flush_tokens = jobs, 5.0, 100  # a retry would show in the time
    started = time.monotonic()
    summary = indexer.run(root)
    assert time.monotonic() - started < 5.0  # no file of the deleted folder was waited for
    assert summary.added + len(summary.failures) == 31 and summary.added >= 1
    assert set(summary.failures.values()) <= {"vanished while being read"}
    assert all(record["attempts"] == 1 for record in jobs.failed().values())
