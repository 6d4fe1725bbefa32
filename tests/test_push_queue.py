"""Pushed documents are durable from the moment they are answered 202: a stop loses none of them (the next start
indexes them), a request waiting on the writer answers 503 in the error shape when lodex stops, a delete of a queued
push applies after it, and search filters are bounded."""

import threading
import time
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from lodex.api.http.app import create_app
from lodex.api.push_spool import SPOOL_DIR
from lodex.indexer.paths import PUSHED_PREFIX
from lodex.indexer.pipeline import document_id
from tests.fakes import FakeEncoder
from tests.test_api import _error, _service
from tests.waiting import Wake, wait_until

BASE = "http://127.0.0.1:8765"


class HeldEncoder(FakeEncoder):
    """While the test holds it (`hold()`), document batches wait at a gate until the test opens it: pushes queue behind
    one another for as long as the test decides, not for as long as a sleep lasts. `encoding` is set once one waits."""

    def __init__(self) -> None:
        super().__init__()
        self.gate, self.encoding = threading.Event(), threading.Event()
        self.gate.set()  # open: the service's start indexes its folder

    def hold(self) -> "HeldEncoder":
        self.encoding.clear()
        self.gate.clear()
        return self

    def embed(self, texts, kind="document", lengths=None) -> np.ndarray:
        if kind == "document" and not self.gate.is_set():
            self.encoding.set()
            assert self.gate.wait(30), "the test never opened the gate"
        return super().embed(texts, kind, lengths)


def test_pushes_answered_202_survive_a_stop(tmp_path: Path) -> None:
    encoder = HeldEncoder()
    service = _service(tmp_path, encoder=encoder)
    encoder.hold()
    ids = [service.served.pushes.push(f"memo-{i}", f"memo {i} about airship number{i} " * 40, "", {"i": i})[0] for i in range(5)]
    assert encoder.encoding.wait(30)  # the first one is being encoded, the others wait
    service.halt()
    encoder.gate.set()
    service.close()
    assert len(list((tmp_path / "data" / SPOOL_DIR).glob("*.json"))) >= 4  # kept on disk, not dropped
    again = _service(tmp_path)  # the next start indexes them, in order
    try:
        wait_until(
            lambda: all(again.queued_push(i) is None for i in ids),
            [tmp_path / "data"],  # spool files go as pushes apply
            what="every kept push indexed after the restart",
        )
        with TestClient(create_app(again), base_url=BASE) as client:
            for i, doc_id in enumerate(ids):
                body = client.get(f"/documents/{doc_id}").json()
                assert body["path"] == f"@api/memo-{i}" and body["metadata"] == {"i": i}
        assert list((tmp_path / "data" / SPOOL_DIR).glob("*.json")) == []
    finally:
        again.close()


def test_a_request_waiting_on_the_writer_answers_503_when_lodex_stops(tmp_path: Path) -> None:
    encoder = HeldEncoder()
    service = _service(tmp_path, encoder=encoder)
    encoder.hold()
    answers: list = []
    try:
        with TestClient(create_app(service), base_url=BASE) as client:
            service.served.pushes.push("ahead", "a long document about zeppelins " * 400, "", {})  # keeps the writer busy
            waiting = threading.Thread(
                target=lambda: answers.append(client.post("/documents?wait=true", json={"name": "behind", "text": "kites and gliders " * 20}))
            )
            waiting.start()
            wait_until(
                lambda: service.queued_push(document_id(PUSHED_PREFIX + "behind")),
                [tmp_path / "data"],  # its spool file
                what="the second push queued behind the first",
            )
            started = time.monotonic()
            service.halt()
            waiting.join(timeout=20)
            assert time.monotonic() - started < 5
            message = _error(answers[0], 503, "stopping")
            assert "applied when lodex starts again" in message  # while the push ahead is still being encoded
    finally:
        encoder.gate.set()
        service.close()


def test_deleting_a_queued_push_deletes_it_once_it_is_applied(tmp_path: Path) -> None:
    encoder = HeldEncoder()
    service = _service(tmp_path, encoder=encoder)
    encoder.hold()
    try:
        with TestClient(create_app(service), base_url=BASE) as client:
            client.post("/documents", json={"name": "ahead", "text": "a long document about zeppelins " * 100})
            queued = client.post("/documents", json={"name": "doomed", "text": "kites and gliders " * 20}).json()
            assert client.get(f"/documents/{queued['id']}").status_code == 202
            assert service.served.door is not None and service.served.writer is not None
            queued_now, submit = Wake(), service.served.door.submit

            def submitted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
                try:
                    return submit(*args, **kwargs)
                finally:
                    queued_now.notify()  # a job reached the door: its depth has changed

            service.served.door.submit = submitted  # type: ignore[method-assign]
            deleted: list = []  # the delete answers once applied, behind the push ahead and the doomed one
            deleting = threading.Thread(target=lambda: deleted.append(client.delete(f"/documents/{queued['id']}")))
            deleting.start()
            wait_until(lambda: service.served.door.depth + service.served.writer.depth >= 2, queued_now, what="the doomed push and its delete queued")
            encoder.gate.set()
            deleting.join(30)
            assert deleted[0].json() == {"deleted": queued["id"]}
            wait_until(
                lambda: service.queued_push(queued["id"]) is None and not service.served.writer.busy,
                [tmp_path / "data"],
                what="the queued push applied",
            )
            _error(client.get(f"/documents/{queued['id']}"), 404, "not_found")
    finally:
        encoder.gate.set()
        service.close()


@pytest.mark.parametrize("params", [{"q": "wings", "path": "a*" * 600}, {"q": "wings", "ext": ["md"] * 51}, {"q": "wings", "ext": ["x" * 33]}])
def test_search_filters_are_bounded(tmp_path: Path, params: dict) -> None:
    service = _service(tmp_path)
    try:
        with TestClient(create_app(service), base_url=BASE) as client:
            _error(client.get("/search", params=params), 400, "bad_request")
            _error(client.post("/search", json=params), 400, "bad_request")
            _error(client.post("/search", json={"q": "wings", "k": True}), 422, "invalid_request")
            assert client.get("/search", params={"q": "wings", "path": "*.md"}).json()["results"][0]["path"] == "wings.md"
    finally:
        service.close()


@pytest.mark.parametrize("host", ["localhost:@evil.example", "[::1%25evil.example]", "localhost evil.example", "127.0.0.1:80:80"])
def test_host_headers_that_are_not_plain_names_are_refused(tmp_path: Path, host: str) -> None:
    service = _service(tmp_path)
    try:
        with TestClient(create_app(service), base_url=BASE) as client:
            _error(client.get("/documents", headers={"host": host}), 403, "forbidden")
            assert client.get("/documents", headers={"host": "127.0.0.1."}).status_code == 200
            assert client.get("/documents", headers={"host": "[::ffff:127.0.0.1]:8765"}).status_code == 200
    finally:
        service.close()


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"])
def test_a_cross_site_form_cannot_push(tmp_path: Path, content_type: str) -> None:
    """A page can send these content types without a CORS preflight: JSON bodies in them are refused."""
    service = _service(tmp_path)
    try:
        with TestClient(create_app(service), base_url=BASE) as client:
            body = b'{"name": "csrf", "text": "planted by a web page"}'
            _error(client.post("/documents", content=body, headers={"content-type": content_type}), 422, "invalid_request")
            assert client.get("/documents").json()["total"] == 3
    finally:
        service.close()
