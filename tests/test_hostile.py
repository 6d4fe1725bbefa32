"""Fault injection: a folder of hostile files indexed by `lodex index` and served by `lodex serve` (real processes,
the fake encoder): both finish or keep serving, every bad file is failed with its reason, every good file is
searchable, the job log agrees, and SIGTERM stops the server within 10 s even while it is busy indexing."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lodex.api.cli import app
from lodex.api.factory import open_reader
from lodex.api.settings import Settings
from lodex.search.searcher import Searcher
from tests.fakes import EncodeGate, FakeEncoder
from tests.proc_tree import process_tree
from tests.test_serve import REPO, Server, get
from tests.waiting import wait_until

pytestmark = [
    pytest.mark.slow,  # real lodex processes
    pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="pipes, sockets and links are POSIX"),
]

# file name → a word only it holds (every one must be found by a search)
GOOD = {
    "plain.txt": "albatross",
    os.fsdecode(b"bad\xffname.txt"): "bittern",
    "evil\x1b[31mname.txt": "cassowary",
    "@api/memo.txt": "dunlin",
    "utf16.txt": "egret",
    "marks.txt": "flamingo",
    "one-line.txt": "gannet",
    "cells.csv": "heron",
    "latin1.txt": "ibis",
    "grown/deep/down/notes.md": "jacana",
}
# file name → the start of its failure reason
BAD = {
    "pipe.txt": "not a regular file (named pipe)",
    "sock.md": "not a regular file (socket)",
    "zero.txt": "not a regular file (character device)",
    "sub/up": "symbolic link loop",
    "binary.txt": "binary file",
    "deep.json": "JSON nested too deeply",
    "nested.html": "HTML nested deeper than",
    "broken.json": "invalid JSON",
}


def build_hostile_folder(root: Path) -> socket.socket:
    """Every kind of file issue #14 found, next to good files; returns the socket (kept open while in use)."""
    for name, word in GOOD.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = f"A note that mentions the {word} among other birds of the coast.\n" * 5
        if name == "utf16.txt":
            path.write_bytes(text.encode("utf-16-le"))
        elif name == "marks.txt":
            path.write_bytes(("\ufeff" + text.replace(" ", " \u200b\u200e").replace("\n", "\r\n")).encode("utf-8"))
        elif name == "one-line.txt":
            path.write_bytes(b"x" * (3 << 20) + f" {word}".encode())  # one 3 MB "word", streamed (limit lowered)
        elif name == "cells.csv":
            path.write_text(f'id,notes\n1,"{"wader " * 40_000}{word}"\n')
        elif name == "latin1.txt":
            path.write_bytes(text.replace("coast", "côte").encode("latin-1"))
        else:
            path.write_text(text)
    os.mkfifo(root / "pipe.txt")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "sock.md"))
    (root / "zero.txt").symlink_to("/dev/zero")
    (root / "sub").mkdir()
    (root / "sub" / "up").symlink_to("..")
    (root / "binary.txt").write_bytes(bytes(range(256)) * 64)
    (root / "empty.txt").write_bytes(b"")
    (root / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (root / "nested.html").write_text("<html><body>" + "<div>x " * 150_000 + "</div>" * 150_000 + "</body></html>")
    (root / "broken.json").write_text('{"title": "half')
    return sock


FIRST_BATCHES = 4  # batches of a busy server's run let through: more than its first commit needs, far fewer than it has
ENV = {
    "LODEX_ENCODER__BACKEND": "tests.fakes:fake_encoder",
    "LODEX_INDEX__FOLLOW_SYMLINKS": "true",
    "LODEX_INDEX__STREAM_ABOVE_MB": "1",
    "LODEX_INDEX__RETRY_BACKOFF_S": "0.01",
    "HF_HUB_OFFLINE": "1",
}


def _cli(args: list[str], data: Path, cwd: Path, timeout: float = 180, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, **ENV, "PYTHONPATH": str(REPO), "LODEX_DATA_DIR": str(data), **env}
    return subprocess.run(
        [sys.executable, "-m", "lodex.api.cli", *args], env=full, cwd=cwd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )


def _check_failures(failures: dict[str, str]) -> None:
    assert set(failures) == set(BAD), failures
    for name, reason in BAD.items():
        assert failures[name].startswith(reason), (name, failures[name])


def _here(args: list[str], data: Path) -> Any:
    """The same command run by the CLI's code in this process (from the test's folder, as `_cli` runs it): the checks after the first
    run's, without another interpreter's start-up."""
    result = CliRunner().invoke(app, args, env={**ENV, "LODEX_DATA_DIR": str(data)})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def test_lodex_index_survives_a_hostile_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `lodex index` process ends on the hostile folder, each bad file failed with its reason; then (the same CLI, in
    this process) a second run finds everything unchanged, status and the job log agree, escapes never reach the
    terminal, and every good file is found by its word; `lodex retry` (a process again) fails them all again."""
    root, data = tmp_path / "docs", tmp_path / "data"
    root.mkdir()
    monkeypatch.chdir(tmp_path)
    sock = build_hostile_folder(root)
    try:
        done = _cli(["index", str(root), "--json"], data, tmp_path)
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        _check_failures(summary["failures"])
        assert summary["added"] == len(GOOD) + 1  # and the empty file
        again = _here(["index", str(root), "--json"], data)  # nothing poisoned: a second run is clean too
        assert again.exit_code == 0 and json.loads(again.stdout)["unchanged"] == len(GOOD) + 1
        status = json.loads(_here(["status", "--json"], data).stdout)
        assert status["failed"] == len(BAD) and status["documents"] == len(GOOD) + 1
        assert status["last_run"]["unchanged"] == len(GOOD) + 1  # the job log finished both runs
        _check_failures({p: f["reason"] for p, f in status["failures"].items()})
        listed = _here(["status", "--failed"], data)
        assert listed.exit_code == 0 and "\x1b" not in listed.stdout and "pipe.txt: not a regular file" in listed.stdout
        searcher = Searcher(open_reader(Settings(base_dir=tmp_path, index={"data_dir": str(data)}), FakeEncoder().dim), FakeEncoder())
        for name, word in GOOD.items():  # every good file is found by its word (in this process: one CLI search below)
            hits = searcher.search(word, 1, mode="bm25").results
            assert hits and word in hits[0].passages[0].text, (name, hits)
        shown = _here(["search", "cassowary", "--mode", "bm25", "-k", "1"], data)
        assert "\x1b" not in shown.stdout and "evil\\x1b[31mname.txt" in shown.stdout
        retried = _cli(["retry", "--json"], data, tmp_path)
        assert retried.returncode == 0 and json.loads(retried.stdout)["failed"] == len(BAD)
    finally:
        sock.close()


def _wait_idle(server: Server, timeout: float = 120) -> dict:

    def idle() -> dict | None:
        status, body = get(server.url + "/ready")
        return body if status == 200 and not body["indexing"] else None

    return wait_until(idle, [server.home], timeout, "the server to finish indexing", detail=server.output)


def _search(server: Server, word: str) -> list[dict]:
    status, body = get(server.url + "/search?" + urllib.parse.urlencode({"q": word, "k": 1, "mode": "bm25"}))
    assert status == 200, body
    return body["results"]


def _stop_within(server: Server, seconds: float, then: Callable[[], None] | None = None) -> float:
    """SIGTERM, then `then()` (a held batch let go: the work in hand ends as a model's would), until it has exited."""
    started = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    if then is not None:
        then()
    server.proc.wait(timeout=60)
    took = time.monotonic() - started
    assert took <= seconds, f"SIGTERM took {took:.1f} s: {server.output()}"
    return took


def test_lodex_serve_keeps_serving_a_hostile_folder_and_stops_on_sigterm(tmp_path: Path) -> None:
    root, data = tmp_path / "docs", tmp_path / "data"
    root.mkdir()
    sock = build_hostile_folder(root)
    server = Server(root, data, env=ENV)
    try:
        server.wait_ready()
        _wait_idle(server)
        for word in GOOD.values():
            assert _search(server, word), word
        status, body = get(server.url + "/documents?status=failed")
        _check_failures({f["path"]: f["reason"] for f in body["failed"]})
        os.mkfifo(root / "late-pipe.txt")  # new hostile files while watching: the writer goes on
        (root / "late-big.txt").write_bytes(b"y" * (2 << 20) + b" kittiwake")
        (root / "late-good.txt").write_text("the lapwing arrived after the pipe\n")
        wait_until(
            lambda: _search(server, "lapwing") and _search(server, "kittiwake"),
            [server.home],
            60,
            "the files added while watching found",
            detail=server.output,
        )
    finally:
        took = _stop_within(server, 10)
        sock.close()
    assert server.output().rstrip().endswith("stopped"), server.output()
    print(f"SIGTERM with the folder indexed: stopped in {took:.1f} s")


def test_sigterm_stops_a_busy_server_within_10_s_and_the_next_start_resumes(tmp_path: Path) -> None:
    root, data = tmp_path / "docs", tmp_path / "data"
    root.mkdir()
    for i in range(80):
        (root / f"doc-{i:02d}.txt").write_text(f"document {i} " + " ".join(f"w{i}x{j}" for j in range(400)))
    gate = EncodeGate(tmp_path / "gate")  # the model's batches go on only as the test lets them
    server = Server(root, data, env={**ENV, **gate.env, "LODEX_INDEX__FLUSH_TOKENS": "4096"})
    try:
        server.wait_ready()
        for _ in range(FIRST_BATCHES):
            assert gate.next_ask(60), f"the server asked to encode no batch: {server.output()}"
            gate.grant()
        wait_until(lambda: get(server.url + "/stats")[1]["documents"], [server.home], 60, "a first document indexed", detail=server.output)
        assert gate.next_ask(60), "the next batch was not asked for"  # held: indexing is under way, far from done
        assert get(server.url + "/ready")[1]["indexing"]
    finally:
        took = _stop_within(server, 10, then=gate.open_for_good)  # the batch in hand ends, then the run must stop
        gate.close()
    print(f"SIGTERM while indexing: stopped in {took:.1f} s")
    resumed = Server(root, data, env=ENV)
    try:
        resumed.wait_ready()
        _wait_idle(resumed)
        assert get(resumed.url + "/stats")[1]["documents"] == 80
    finally:
        _stop_within(resumed, 10)


def test_lodex_index_fails_the_files_of_hardening_ii_within_bounded_memory(tmp_path: Path) -> None:
    """The hostile files of #37 (spreadsheet amplification, PDF filter tricks, a 20,000-page shared stream, deep MIME)
    beside a normal file: `lodex index` ends, fails each with its reason, indexes the rest, and its processes (lodex
    and its reading processes) together hold at most 1.5 GiB, the ceiling it is given (index.max_memory_mb)."""
    from tests.hostile_files import write_all

    root, data = tmp_path / "docs", tmp_path / "data"
    reasons = write_all(root)
    (root / "notes.txt").write_text("Swept wings delay the drag rise at transonic speed. " * 20)
    full = {**os.environ, **ENV, "PYTHONPATH": str(REPO), "LODEX_DATA_DIR": str(data), "LODEX_INDEX__MAX_MEMORY_MB": "1536"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "lodex.api.cli", "index", str(root), "--json"],
        env=full,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    peaks: dict[int, int] = {}  # pid → its peak resident kB (VmHWM), for lodex and its reading processes
    watcher = threading.Thread(target=_watch_tree, args=(proc, peaks), daemon=True)
    watcher.start()
    out, _ = proc.communicate(timeout=300)
    watcher.join(10)
    assert proc.returncode == 0, out
    summary = json.loads(out)
    assert summary["added"] == 1 and summary["failed"] == len(reasons)
    for name, reason in reasons.items():
        assert summary["failures"][name].startswith(reason), (name, summary["failures"][name])
    total = sum(peaks.values()) / 1024  # each process's own peak, added up: at least the tree's peak at any moment
    assert peaks and total <= 1536, f"peak RSS of the run {total:.0f} MB: {peaks}"
    print(f"peak RSS of lodex and its reading processes, each process's peak added up: {total:.0f} MB ({len(peaks)} processes)")


def _watch_tree(proc: subprocess.Popen, peaks: dict[int, int]) -> None:
    """Until `proc` ends: the peak resident memory (VmHWM, the process's own since its exec) of it and of every
    process under it, read every 20 ms. (rusage's ru_maxrss would count the test process's pages its fork copied.)"""
    while proc.poll() is None:
        for pid in process_tree(proc.pid):
            try:
                hwm = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("VmHWM:"))
            except (OSError, StopIteration, ValueError):
                continue
            peaks[pid] = max(peaks.get(pid, 0), hwm)
        try:
            proc.wait(timeout=0.02)  # the next sample in 20 ms, or none once it has ended
        except subprocess.TimeoutExpired:
            pass
