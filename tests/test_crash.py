"""kill -9 at many moments of `lodex index` (in a subprocess): every restart converges to the folder, exactly."""

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lodex.store.lance_store import LanceStore
from tests.fakes import FakeEncoder
from tests.invariants import check_index

REPO = Path(__file__).resolve().parents[1]
MARK = re.compile(r"\bf(\d{3})w\d+\b")


def _write_folder(root: Path, n: int = 520, version: str = "v1") -> None:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        words = " ".join(f"f{i:03d}w{j}" for j in range(40))
        (root / f"doc-{i:03d}.txt").write_text(f"{version} document {i}\n\n{words}\n\n{words} {version}\n")


def _lodex(data: Path, root: Path, log: Path, kill_after: int = 0, delay_ms: float = 0) -> subprocess.CompletedProcess:
    """`lodex index` of the folder; with `kill_after`, killed in its Nth commit (a commit every few files), else a run
    to the end in fewer, larger commits (a restart's or a first run's commit size is not under test)."""
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "HF_HUB_OFFLINE": "1",
        "LODEX_DATA_DIR": str(data),
        "LODEX_ENCODER__BACKEND": "tests.fakes:crashing_encoder",
        "LODEX_INDEX__FLUSH_TOKENS": "256" if kill_after else "2048",
        "LODEX_TEST_ENCODE_LOG": str(log),
        "LODEX_TEST_KILL_AFTER": str(kill_after),
        "LODEX_TEST_KILL_DELAY_MS": str(delay_ms),
    }
    return subprocess.run(
        [sys.executable, "-m", "lodex.api.cli", "index", str(root), "--json"], env=env, cwd=root.parent, capture_output=True, text=True, timeout=600
    )


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
@pytest.mark.parametrize("kill_after, delay_ms", [(1, 0), (3, 1), (25, 3), (60, 8), (100, 2), (125, 15)])
def test_kill_during_indexing_then_restart_converges(tmp_path: Path, kill_after: int, delay_ms: float) -> None:
    root, data = tmp_path / "docs", tmp_path / "data"
    _write_folder(root)
    killed = _lodex(data, root, tmp_path / "killed.log", kill_after, delay_ms)
    assert killed.returncode == -9, killed.stderr[-2000:]
    committed = _committed(data, root)
    assert len(committed) < 520
    restart = _lodex(data, root, tmp_path / "restart.log")
    assert restart.returncode == 0, restart.stderr[-2000:]
    check_index(LanceStore(data, 256), root, persisted=True, encoder=FakeEncoder())
    re_encoded = _encoded_files(tmp_path / "restart.log")
    assert not (re_encoded & committed), f"finished files encoded again: {sorted(re_encoded & committed)[:10]}"
    assert re_encoded == set(range(520)) - committed


@pytest.mark.slow
def test_kill_during_an_update_run(tmp_path: Path) -> None:
    """Changed, deleted and renamed files in a run killed mid-way; the restart converges."""
    root, data = tmp_path / "docs", tmp_path / "data"
    _write_folder(root, 520)
    assert _lodex(data, root, tmp_path / "first.log").returncode == 0
    for i in range(0, 100):
        (root / f"doc-{i:03d}.txt").write_text(f"v2 document {i}\n\n" + " ".join(f"f{i:03d}w{j}" for j in range(60)))
    for i in range(100, 150):
        (root / f"doc-{i:03d}.txt").unlink()
    for i in range(150, 200):
        (root / f"doc-{i:03d}.txt").rename(root / f"doc-{i + 400:03d}.txt")
    killed = _lodex(data, root, tmp_path / "killed.log", kill_after=12, delay_ms=4)
    assert killed.returncode == -9
    restart = _lodex(data, root, tmp_path / "restart.log")
    assert restart.returncode == 0, restart.stderr[-2000:]
    check_index(LanceStore(data, 256), root, persisted=True, encoder=FakeEncoder())
    assert _encoded_files(tmp_path / "restart.log") <= set(range(100)), "only changed files may be encoded"
