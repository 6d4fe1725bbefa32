"""A push flood never blocks the server's event loop: with the writer stuck, pushes past its queue are still answered
(202 while the spool has room, then 429 with Retry-After), /health answers throughout, a start with a large spool
returns at once, and nothing accepted is lost across a SIGTERM and a restart of a real `lodex serve`."""

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from lodex.api.application import Application
from lodex.api.http.app import create_app
from lodex.api.push_spool import SPOOL_DIR, PushSpool
from lodex.indexer import writer
from lodex.indexer.identity import document_id
from lodex.store.errors import BusyError
from tests.test_api import _service

BASE = "http://127.0.0.1:8765"
WRITER_QUEUE = 16  # the writer's queue in these tests (256 in use): a flood past it is a few dozen pushes, not hundreds


@pytest.fixture(autouse=True)
def small_writer_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer, "QUEUE_SIZE", WRITER_QUEUE)


def _within(seconds: float, work: Callable[[], Any]) -> Any:
    """Run `work` on a thread; fail if it has not returned after `seconds` (it blocked)."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(work()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still waiting after {seconds} s: the server blocked"
    return out[0]


def _until(condition: Callable[[], bool]) -> bool:
    """Ask until the condition holds (the caller bounds the wait)."""
    while not condition():
        threading.Event().wait(0.05)
    return True


def _stuck(service: Application) -> threading.Event:
    """Hold the writer on a job until the returned event is set."""
    gate = threading.Event()
    assert service.served.writer is not None
    service.served.writer.submit(lambda ix: gate.wait(120))
    return gate


def test_pushes_past_the_writers_queue_never_block_the_event_loop(tmp_path: Path) -> None:
    service = _service(tmp_path)
    service.settings.api.max_queued_pushes = 30
    service.served.pushes.spool.max_files = 30
    assert service.served.writer is not None and service.served.door is not None
    gate = _stuck(service)
    try:
        with TestClient(create_app(service), base_url=BASE) as client:

            def flood() -> list[Any]:  # more than the writer's queue holds: the old server waited there
                return [client.post("/documents", json={"name": f"memo-{i}", "text": f"memo {i} on kites"}) for i in range(40)]

            assert service.served.writer.capacity == WRITER_QUEUE < 30
            answers = _within(60, flood)
            assert [a.status_code for a in answers[:30]] == [202] * 30
            refused = answers[30:]
            assert all(a.status_code == 429 for a in refused)
            assert all(int(a.headers["retry-after"]) >= 1 for a in refused)
            assert {a.json()["error"]["code"] for a in refused} == {"busy"}
            assert "api.max_queued_pushes" in refused[0].json()["error"]["message"]
            assert _within(5, lambda: client.get("/health")).status_code == 200
            assert len(list((tmp_path / "data" / SPOOL_DIR).glob("*.json"))) == 30  # never past its bound
            assert client.get(f"/documents/{answers[5].json()['id']}").status_code == 202  # known as queued
            reindex = _within(5, lambda: client.post("/reindex"))  # a reindex waits its turn without blocking either
            assert reindex.status_code == 202
            gate.set()
            last = answers[29].json()["id"]
            _within(120, lambda: _until(lambda: client.get(f"/documents/{last}").status_code == 200))
            assert _within(120, lambda: client.post("/documents?wait=true", json={"name": "last", "text": "gliders"})).status_code == 201
            assert client.get("/stats").json()["documents"] == 3 + 30 + 1
        assert list((tmp_path / "data" / SPOOL_DIR).glob("*.json")) == []
    finally:
        gate.set()
        service.close()


def test_a_large_spool_is_queued_at_start_without_waiting_for_the_writer(tmp_path: Path) -> None:
    spool = PushSpool(tmp_path / "data")
    ids = []
    for i in range(40):  # more than the writer's queue holds
        spool.add({"name": f"kept-{i}", "text": f"kept memo {i} about balloons", "title": "", "metadata": "{}"}, document_id(f"@api/kept-{i}"))
        ids.append(document_id(f"@api/kept-{i}"))
    service = _service(tmp_path, start=False)
    gate = _stuck(service)
    try:
        _within(30, service.start)  # the old start handed each push to the writer here, and waited once its queue was full
        with TestClient(create_app(service), base_url=BASE) as client:
            assert client.get("/health").status_code == 200
            waiting = client.get(f"/documents/{ids[39]}")
            assert waiting.status_code == 202 and waiting.json()["status"] == "queued"
            gate.set()
            assert _within(120, lambda: client.post("/documents?wait=true", json={"name": "after", "text": "kites"})).status_code == 201
            assert all(client.get(f"/documents/{i}").status_code == 200 for i in ids)
            assert client.get(f"/documents/{ids[7]}").json()["path"] == "@api/kept-7"
    finally:
        gate.set()
        service.close()


def test_the_spool_refuses_past_its_bytes(tmp_path: Path) -> None:
    spool = PushSpool(tmp_path, max_files=100, max_bytes=5_000)
    kept = []
    with pytest.raises(BusyError) as refused:
        for i in range(100):
            kept.append(spool.add({"name": f"n{i}", "text": "x" * 900}))
    assert 4 <= len(kept) <= 5 and spool.bytes <= 5_000
    assert refused.value.code == "busy" and refused.value.retry_after >= 1 and "api.max_queued_push_mb" in refused.value.message
    spool.done(kept[0])  # room again once one is indexed
    spool.add({"name": "again", "text": "x" * 900})
    assert PushSpool(tmp_path, max_bytes=5_000).bytes == spool.bytes  # a restart counts what is there


def test_reindex_requests_waiting_together_share_one_run(tmp_path: Path) -> None:
    service = _service(tmp_path)
    gate = _stuck(service)
    try:
        first, second = service.queue_reindex(), service.queue_reindex()
        assert first is second
        gate.set()
        summary = first.result(timeout=60)
        assert summary.added + summary.unchanged >= 3 and not summary.interrupted
    finally:
        gate.set()
        service.close()


@pytest.mark.slow
def test_a_flood_against_a_real_server_loses_nothing_it_accepted(tmp_path: Path) -> None:
    from bench.serving.push_flood import Serve, all_indexed, flood

    root, data = tmp_path / "docs", tmp_path / "data"
    root.mkdir()
    (root / "wings.md").write_text("# Wings\n\nSwept wings delay the drag rise at transonic Mach numbers.\n")
    env = {"LODEX_API__MAX_QUEUED_PUSHES": "30", "LODEX_ENCODER__BACKEND": "tests.fakes:fake_encoder"}  # the server and
    server = Serve(root, data, env)  # its queues are under test, not the model (whose start-up took most of the time)
    server.wait_ready()
    try:
        seen = flood(server.url, data / "pushes", pushes=80, clients=8, text_chars=2000)
        assert seen.refused > 0 and seen.refused_without_retry_after == 0 and not seen.other
        assert len(seen.accepted) + seen.refused == 80
        assert seen.health_failures == 0 and seen.search_failures == 0 and seen.search_ms
        assert seen.spool_max <= 30
    finally:
        server.terminate()  # uvicorn ends by re-raising SIGTERM once the service is closed
    again = Serve(root, data, env)
    again.wait_ready()
    try:
        assert all_indexed(again.url, seen.accepted, timeout=300) == []
    finally:
        again.terminate()
