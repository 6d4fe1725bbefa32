"""Commits off the critical path: while one group of files commits in the background, the next one encodes; commits
stay in order and one at a time, a commit that fails fails the run with what came before it kept, and files are
reported done (callbacks, job log, progress) only once committed."""

import threading
import time
from pathlib import Path

import pytest

from tests.conftest import make_pipeline
from tests.fakes import FakeEncoder


def _folder(root: Path, n: int = 12) -> None:
    root.mkdir()
    for i in range(n):
        (root / f"f{i:02d}.txt").write_text(f"file{i} " + " ".join(f"w{i}x{k}" for k in range(400)))


class _Timeline:
    """When the store committed and when the encoder ran, from any thread."""

    def __init__(self) -> None:
        self.events: list[tuple[str, float, float]] = []
        self.lock = threading.Lock()

    def timed(self, kind: str, fn):  # noqa: ANN001, ANN201
        def wrapper(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            started = time.monotonic()
            try:
                return fn(*args, **kwargs)
            finally:
                with self.lock:
                    self.events.append((kind, started, time.monotonic()))

        return wrapper


def test_the_next_files_encode_while_a_commit_runs(tmp_path: Path) -> None:
    _folder(tmp_path / "docs")
    encoder = FakeEncoder()
    store, indexer, _ = make_pipeline(tmp_path / "data", encoder)
    indexer.flush_tokens = 400  # about one file per commit
    timeline, commit = _Timeline(), store.commit
    order: list[list[str]] = []

    committing, encoded_meanwhile = threading.Event(), threading.Event()

    def slow_commit(chunks, documents, deleted):  # noqa: ANN001, ANN202
        if not order:  # the first commit (a slow disk) lasts until the next files' encoding has begun, or 30 s
            committing.set()
            encoded_meanwhile.wait(30)
        order.append([d["path"] for d in documents])
        return commit(chunks, documents, deleted)

    def embed(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        if committing.is_set():
            encoded_meanwhile.set()
        return plain_embed(*args, **kwargs)

    plain_embed = encoder.embed
    store.commit = timeline.timed("commit", slow_commit)
    encoder.embed = timeline.timed("encode", embed)
    done_at: dict[str, int] = {}
    summary = indexer.run(tmp_path / "docs", on_file=lambda r: done_at.setdefault(r.path, len(store.document_records())))
    assert summary.added == 12 and summary.failed == 0
    commits = [(a, b) for kind, a, b in timeline.events if kind == "commit"]
    encodes = [(a, b) for kind, a, b in timeline.events if kind == "encode"]
    overlapping = [e for e in encodes if any(a < e[0] < b for a, b in commits)]
    assert overlapping, "no encoding ran while a commit was in progress"
    assert all(b1 <= a2 for (_, b1), (a2, _) in zip(commits, commits[1:]))  # one commit at a time, in order
    assert [p for paths in order for p in paths if p] == sorted(done_at, key=lambda p: done_at[p])[: len(done_at)]
    # each file was reported only once its document row was committed
    assert all(count >= 1 for count in done_at.values()) and len(store.document_records()) == 12
    assert indexer._in_flight is None and indexer._committer is None


def test_a_failing_background_commit_fails_the_run_and_keeps_what_came_before(tmp_path: Path) -> None:
    _folder(tmp_path / "docs")
    encoder = FakeEncoder()
    store, indexer, _ = make_pipeline(tmp_path / "data", encoder)
    indexer.flush_tokens = 400
    commit, calls = store.commit, []

    def failing_commit(chunks, documents, deleted):  # noqa: ANN001, ANN202
        calls.append(len(documents))
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return commit(chunks, documents, deleted)

    store.commit = failing_commit
    reported: list[str] = []
    with pytest.raises(OSError, match="No space left"):
        indexer.run(tmp_path / "docs", on_file=lambda r: reported.append(r.path))
    kept = store.document_records()
    assert 1 <= len(kept) < 12 and set(reported) == set(kept)  # what was reported done is exactly what was committed
    assert indexer._in_flight is None and indexer._committer is None
    store.commit = commit  # the disk has room again: the next run does the rest
    again = indexer.run(tmp_path / "docs")
    assert again.added == 12 - len(kept) and len(store.document_records()) == 12
