"""The HTTP API in-process (ASGI) on a real store: every endpoint, the one error shape, limits, auth."""

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from lodex.api.application import Application
from lodex.api.factory import open_app
from lodex.api.http.app import create_app
from lodex.api.settings import Settings
from tests.fakes import FakeEncoder
from tests.waiting import Wake, wait_until


def _service(
    tmp_path: Path, api_key: str = "", watch: bool = False, on_file=None, quiet_s: float = 1.0, encoder: FakeEncoder | None = None, start: bool = True
) -> Application:
    root = tmp_path / "docs"
    root.mkdir(exist_ok=True)
    (root / "wings.md").write_text("# Wings\n\nLift and drag of swept wings at transonic speed. " * 8)
    (root / "heat.txt").write_text("Heat transfer through a hypersonic boundary layer. " * 8)
    (root / "notes").mkdir(exist_ok=True)
    (root / "notes" / "fins.txt").write_text("Stabilizing fins of rockets and their drag. " * 8)
    settings = Settings(base_dir=tmp_path)
    settings.index.data_dir = str(tmp_path / "data")
    settings.api.api_key = api_key
    settings.api.max_k = 20
    settings.api.max_query_chars = 200
    settings.api.max_document_kb = 4
    settings.api.max_body_kb = 16
    settings.watch.quiet_s = quiet_s
    service = open_app(settings, "serve", root, watch=watch, encoder=encoder or FakeEncoder(), on_file=on_file)
    if start:  # started, with the folder indexed
        service.start().served.writer.reconcile().result(timeout=60)
    return service


@contextmanager
def app_client(service: Application, **api: object) -> Iterator[TestClient]:
    """A client of a new app over `service`, made while its api settings are `api` (the app reads its key, Host rule
    and body limit when it is made, as `lodex serve` makes it); the service's own settings are left as they were."""
    saved = {name: getattr(service.settings.api, name) for name in api}
    try:
        for name, value in api.items():
            setattr(service.settings.api, name, value)
        app = create_app(service)
    finally:
        for name, value in saved.items():
            setattr(service.settings.api, name, value)
    with TestClient(app, base_url="http://127.0.0.1:8765") as c:
        yield c


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Application]:
    """One indexed service (3 files) for the tests that change nothing in it; a test that does opens its own."""
    service = _service(tmp_path_factory.mktemp("api-served"))
    try:
        yield service
    finally:
        service.close()


@pytest.fixture
def client(served: Application) -> Iterator[TestClient]:
    """A client of a new app (its own metrics) over the module's service."""
    with app_client(served) as c:
        yield c


@pytest.fixture
def own_client(tmp_path: Path) -> Iterator[TestClient]:
    """A client of a service of the test's own, in tmp_path (for a test that changes what is indexed)."""
    service = _service(tmp_path)
    try:
        with app_client(service) as c:
            yield c
    finally:
        service.close()


def _error(response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}
    assert body["error"]["code"] == code
    return body["error"]["message"]


def test_search_get_and_post(client: TestClient) -> None:
    body = client.get("/search", params={"q": "swept wings lift", "k": 2}).json()
    assert set(body) == {"query", "mode", "took_ms", "results"} and body["mode"] == "hybrid"
    assert body["results"][0]["path"] == "wings.md"
    passage = body["results"][0]["passages"][0]
    assert set(passage) == {"text", "char_start", "char_end", "score", "highlights", "page", "page_end", "section"}
    assert (passage["page"], passage["section"]) == (None, "Wings")  # Markdown: headings, no pages
    assert {passage["text"][s:e].lower() for s, e in passage["highlights"]} >= {"swept", "wings", "lift"}
    for mode in ("dense", "bm25", "hybrid"):
        got = client.get("/search", params={"q": "swept wings lift", "k": 1, "mode": mode}).json()
        assert got["mode"] == mode and got["results"][0]["path"] == "wings.md"
        assert client.post("/search", json={"q": "swept wings lift", "k": 1, "mode": mode}).json()["mode"] == mode
    assert _error(client.get("/search", params={"q": "x", "mode": "fuzzy"}), 422, "invalid_request")
    for where in ({"path_glob": "notes/*"}, {"path": "notes/*"}):  # path: path_glob's former name, still read
        posted = client.post("/search", json={"q": "rocket fins drag", "k": 1, **where}).json()
        assert [r["path"] for r in posted["results"]] == ["notes/fins.txt"]
        got = client.get("/search", params={"q": "rocket fins drag", "k": 1, **where}).json()
        assert [r["path"] for r in got["results"]] == ["notes/fins.txt"]
        assert client.get("/documents", params=where).json()["total"] == 1
    only_md = client.get("/search", params={"q": "drag", "ext": ["md"]}).json()
    assert {r["path"] for r in only_md["results"]} == {"wings.md"}
    future = client.post("/search", json={"q": "drag", "modified_after": "2999-01-01T00:00:00Z"}).json()
    assert future["results"] == []


def test_documents_list_detail_push_delete(own_client: TestClient, tmp_path: Path) -> None:
    client = own_client  # its own service: it pushes, reindexes and deletes
    listed = client.get("/documents", params={"limit": 2}).json()
    assert listed["total"] == 3 and len(listed["documents"]) == 2 and listed["documents"][0]["path"] == "heat.txt"
    doc = client.get(f"/documents/{listed['documents'][1]['id']}").json()
    assert doc["path"] == "notes/fins.txt" and doc["chunks"][0]["ordinal"] == 0 and doc["source"] == "folder"
    pushed = client.post(
        "/documents", json={"name": "memo-1", "text": "Zeppelins and airships floating over the sea.", "title": "Memo", "metadata": {"team": "blue"}}
    )
    assert pushed.status_code == 202 and pushed.json()["status"] == "queued"  # answered once queued, not indexed
    doc_id = pushed.json()["id"]

    def indexed() -> bool:
        waiting = client.get(f"/documents/{doc_id}")
        assert waiting.status_code == 200 or waiting.json()["status"] == "queued"
        return waiting.status_code == 200

    wait_until(indexed, [tmp_path / "data"], what="the pushed document indexed")  # the writer commits there
    hit = client.get("/search", params={"q": "zeppelins airships", "k": 1}).json()["results"][0]
    assert hit["doc_id"] == doc_id and hit["path"] == "@api/memo-1" and hit["title"] == "Memo"
    detail = client.get(f"/documents/{doc_id}").json()
    assert detail["metadata"] == {"team": "blue"} and detail["source"] == "api"
    again = client.post(
        "/documents?wait=true",
        json={"name": "memo-1", "text": "Zeppelins and airships floating over the sea.", "title": "Memo", "metadata": {"team": "blue"}},
    )
    assert again.status_code == 201 and again.json()["status"] == "unchanged"
    retitled = client.post(
        "/documents?wait=true",
        json={"name": "memo-1", "text": "Zeppelins and airships floating over the sea.", "title": "Memo v2", "metadata": {"team": "red"}},
    )
    assert retitled.json()["status"] == "indexed"
    detail = client.get(f"/documents/{doc_id}").json()
    assert (detail["title"], detail["metadata"], len(detail["chunks"])) == ("Memo v2", {"team": "red"}, 1)
    assert client.post("/reindex").status_code == 202
    ran = client.post("/reindex", params={"wait": "true"})  # a reconciliation keeps pushed documents
    assert ran.status_code == 200 and ran.json()["deleted"] == 0 and ran.json()["unchanged"] == 3
    assert client.get(f"/documents/{doc_id}").status_code == 200
    assert client.delete(f"/documents/{doc_id}").json() == {"deleted": doc_id}
    _error(client.get(f"/documents/{doc_id}"), 404, "not_found")
    folder_doc = listed["documents"][0]["id"]
    assert "delete the file" in _error(client.delete(f"/documents/{folder_doc}"), 409, "conflict")


def test_admin_endpoints(client: TestClient) -> None:
    assert client.get("/health").json() == {"status": "ok"}
    ready = client.get("/ready").json()
    assert ready == {"ready": True, "model": "fake-bag-of-words", "documents": 3, "indexing": False, "files_left": 0}
    stats = client.get("/stats").json()
    assert (stats["documents"], stats["failed"], stats["queue_depth"]) == (3, 0, 0)
    assert stats["model"] == "fake-bag-of-words" and stats["last_run"]["kind"] == "reconcile"
    client.get("/search", params={"q": "wings"})
    client.get("/search", params={"q": " "})  # refused: timed with its status
    client.get("/nowhere")
    text = client.get("/metrics").text
    assert 'lodex_request_seconds_bucket{le="0.05",method="GET",route="/search",status="200"}' in text
    assert 'lodex_request_seconds_count{method="GET",route="/search",status="400"} 1.0' in text
    assert 'lodex_request_seconds_count{method="GET",route="unmatched",status="404"} 1.0' in text
    assert "lodex_documents 3.0" in text and "lodex_queue_depth 0.0" in text and "lodex_encode_tokens_per_second" in text
    assert client.get("/openapi.json").json()["info"]["title"] == "lodex"
    assert "swagger-ui" in client.get("/docs").text and client.get("/static/swagger/swagger-ui-bundle.js").status_code == 200
    assert '<form id="search"' in client.get("/").text


@pytest.mark.parametrize(
    "method, url, kwargs, status, code",
    [
        ("get", "/search", {"params": {"q": ""}}, 400, "bad_request"),
        ("get", "/search", {"params": {"q": "   "}}, 400, "bad_request"),
        ("get", "/search", {"params": {"q": "x" * 201}}, 400, "bad_request"),
        ("get", "/search", {"params": {"q": "wings", "k": 21}}, 400, "bad_request"),
        ("get", "/search", {"params": {"q": "wings", "k": 0}}, 400, "bad_request"),
        ("get", "/search", {"params": {"q": "wings", "k": "ten"}}, 422, "invalid_request"),
        ("get", "/search", {}, 422, "invalid_request"),
        ("post", "/search", {"content": b"{not json"}, 422, "invalid_request"),
        ("post", "/search", {"json": {"k": 3}}, 422, "invalid_request"),
        ("post", "/documents", {"json": {"name": "big", "text": "x" * 5000}}, 413, "too_large"),
        ("post", "/documents", {"json": {"name": "huge", "text": "x" * 20000}}, 413, "too_large"),
        ("post", "/documents", {"json": {"name": "", "text": "x"}}, 422, "invalid_request"),
        ("get", "/documents", {"params": {"limit": 0}}, 422, "invalid_request"),
        ("get", "/documents/nope", {}, 404, "not_found"),
        ("get", "/documents/..%2F..%2Fetc", {}, 404, "not_found"),
        ("delete", "/documents/nope", {}, 404, "not_found"),
        ("get", "/no/such/route", {}, 404, "not_found"),
        ("put", "/search", {}, 405, "method_not_allowed"),
    ],
)
def test_errors_have_one_shape(client: TestClient, method: str, url: str, kwargs: dict, status: int, code: str) -> None:
    _error(getattr(client, method)(url, **kwargs), status, code)


def test_every_kind_of_error_has_its_status_at_the_edge() -> None:
    """The core's errors name a kind, never an HTTP status: the edge maps each kind the package raises (a new one
    listed in api/http/errors.py, or it would answer 500)."""
    import importlib

    for module in ("lodex.api.application", "lodex.api.request", "lodex.encoders.errors", "lodex.indexer.errors", "lodex.indexer.ray_engine"):
        importlib.import_module(module)  # the modules that declare error kinds
    from lodex.api.http.errors import STATUS_OF_KIND, status_of
    from lodex.store.errors import BusyError, LodexError

    def lodex_classes(cls: type[LodexError]) -> list[type[LodexError]]:
        return [cls, *(c for sub in cls.__subclasses__() for c in lodex_classes(sub))] if cls.__module__.startswith("lodex.") else []

    classes = lodex_classes(LodexError)
    assert {c.code for c in classes} - set(STATUS_OF_KIND) <= {"lodex_error", "remote_error", "server_refused"}
    assert {"config_error", "read_error", "model_error", "stopping", "cluster_error", "conflict"} <= {c.code for c in classes}
    assert not [c for c in classes if "status" in vars(c)]
    assert status_of(BusyError("full")) == 429 and status_of(LodexError("bug")) == 500


def test_chunked_body_over_the_limit(client: TestClient) -> None:
    def chunks():
        for _ in range(40):
            yield b"x" * 1024

    response = client.post("/search", content=chunks(), headers={"content-type": "application/json"})
    _error(response, 413, "too_large")


def test_api_key_required_everywhere_but_health(served: Application) -> None:
    with app_client(served, api_key="s3cret") as client:
        assert client.get("/health").status_code == 200
        for method, url in (
            ("get", "/search?q=wings"),
            ("post", "/search"),
            ("get", "/documents"),
            ("get", "/stats"),
            ("get", "/metrics"),
            ("get", "/ready"),
            ("post", "/reindex"),
            ("delete", "/documents/x"),
        ):
            response = getattr(client, method)(url)
            assert "API key" in _error(response, 401, "unauthorized")
            assert response.headers["www-authenticate"] == "Bearer"
        _error(client.get("/stats", headers={"Authorization": "Bearer wrong"}), 401, "unauthorized")
        ok = client.get("/search", params={"q": "wings"}, headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200 and ok.json()["results"]


def test_cors_is_off_unless_configured(client: TestClient) -> None:
    response = client.get("/health", headers={"Origin": "http://example.org"})
    assert "access-control-allow-origin" not in response.headers


def test_failed_files_are_listed(tmp_path: Path) -> None:
    service = _service(tmp_path)
    (service.root / "blob.txt").write_bytes(b"\x00\x01 binary" * 40)
    service.served.writer.reconcile().result(timeout=60)
    try:
        with TestClient(create_app(service), base_url="http://127.0.0.1:8765") as client:
            body = client.get("/documents", params={"status": "failed"}).json()
            assert [(f["path"], "binary" in f["reason"]) for f in body["failed"]] == [("blob.txt", True)]
            assert client.get("/stats").json()["failed"] == 1
    finally:
        service.close()


def test_queries_answer_while_the_folder_is_indexed(tmp_path: Path) -> None:
    service = _service(tmp_path, watch=True)
    for i in range(150):
        (service.root / f"bulk-{i:03d}.txt").write_text(f"bulk file {i} " + " ".join(f"w{i}x{j}" for j in range(200)))
    try:
        with TestClient(create_app(service), base_url="http://127.0.0.1:8765") as client:
            answered = 0
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                response = client.get("/search", params={"q": "swept wings", "k": 3})
                assert response.status_code == 200
                answered += 1
                assert response.json()["results"][0]["path"] == "wings.md"
                if client.get("/stats").json()["documents"] == 153:
                    break
            assert answered >= 3
            assert json.loads(client.get("/stats").text)["documents"] == 153
    finally:
        service.close()


def test_ready_says_when_changes_are_still_being_applied(tmp_path: Path) -> None:
    service = _service(tmp_path)
    release = threading.Event()
    try:
        with TestClient(create_app(service), base_url="http://127.0.0.1:8765") as client:
            blocked = service.served.writer.submit(lambda ix: release.wait(30))  # the writer is busy with a change
            queued = service.served.writer.reconcile()  # and another waits behind it
            ready = client.get("/ready").json()
            assert ready["ready"] is True and ready["indexing"] is True
            release.set()
            blocked.result(timeout=30), queued.result(timeout=60)
            assert client.get("/ready").json()["indexing"] is False
    finally:
        release.set()
        service.close()


def test_ready_says_indexing_while_a_saved_file_is_still_settling(tmp_path: Path) -> None:
    service = _service(tmp_path, watch=True, quiet_s=60)  # the watcher holds changes back until quiet for 60 s
    try:
        with TestClient(create_app(service), base_url="http://127.0.0.1:8765") as client:
            service.served.watch.startup.result(timeout=60)
            assert client.get("/ready").json()["indexing"] is False
            seen, add = Wake(), service.served.watch.collector.add
            service.served.watch.collector.add = lambda rel: (add(rel), seen.notify())  # type: ignore[method-assign]
            (tmp_path / "docs" / "new.txt").write_text("Freshly saved notes on flutter. " * 8)
            wait_until(lambda: len(service.served.watch.collector), seen, what="the watcher to see the new file")
            assert not service.served.writer.busy  # seen, not handed to the writer yet
            assert client.get("/ready").json()["indexing"] is True
    finally:
        service.close()


def test_ready_counts_the_files_the_run_has_left(tmp_path: Path) -> None:
    gate, reached, seen = threading.Event(), threading.Event(), []

    def on_file(record) -> None:
        if record.path.startswith("batch/"):
            seen.append(record.path)
            if len(seen) == 2:  # the run is part-way through the batch
                reached.set()
                gate.wait(30)

    service = _service(tmp_path, on_file=on_file)
    try:
        (tmp_path / "docs" / "batch").mkdir()
        for i in range(5):
            (tmp_path / "docs" / "batch" / f"b{i}.txt").write_text(f"batch{i} " + "filler words " * 3000)
        with TestClient(create_app(service), base_url="http://127.0.0.1:8765") as client:
            run = service.served.writer.reconcile()
            assert reached.wait(60)
            ready = client.get("/ready").json()
            assert ready["indexing"] is True and 1 <= ready["files_left"] <= 4, ready
            gate.set()
            run.result(timeout=60)
            assert client.get("/ready").json()["files_left"] == 0
    finally:
        gate.set()
        service.close()


def test_a_window_of_a_documents_text(client: TestClient) -> None:
    docs = {d["path"]: d["id"] for d in client.get("/documents").json()["documents"]}
    own = client.get(f"/documents/{docs['heat.txt']}/text", params={"start": 5, "end": 30}).json()
    assert own == {
        "id": docs["heat.txt"],
        "path": "heat.txt",
        "start": 5,
        "end": 30,
        "text": ("Heat transfer through a hypersonic boundary layer. " * 8)[5:30],
        "page": None,
        "section": None,
    }
    detail = client.get(f"/documents/{docs['wings.md']}").json()
    chunk = detail["chunks"][-1]
    window = client.get(f"/documents/{docs['wings.md']}/text", params={"start": chunk["char_start"], "end": chunk["char_end"]}).json()
    assert window["text"] == chunk["text"] and window["start"] == chunk["char_start"]  # rebuilt from the stored chunks
    tail = client.get(f"/documents/{docs['heat.txt']}/text", params={"start": 10_000, "end": 90_000}).json()
    assert tail["text"] == "" and tail["start"] == tail["end"]
    _error(client.get("/documents/0123456789abcdef/text"), 404, "not_found")
    _error(client.get(f"/documents/{docs['heat.txt']}/text", params={"start": -1}), 422, "invalid_request")


def test_a_service_leaves_what_loading_made_out_of_the_collectors_full_passes(tmp_path: Path) -> None:
    """The objects a serving process made while loading (modules, models) are frozen out of the cyclic collector's
    full passes (each took ~0.3 s, every thread stopped, at 1M chunks), and back in once the service closes."""
    import gc

    from lodex.search.results import SearchFilters

    gc.unfreeze()
    service = _service(tmp_path)
    try:
        assert gc.get_freeze_count() > 1000
        assert service.served.search("swept wings", 1, SearchFilters(), None).result(timeout=60).results[0].path == "wings.md"
    finally:
        service.close()
    assert gc.get_freeze_count() == 0
