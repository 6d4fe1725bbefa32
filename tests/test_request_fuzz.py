"""Request fuzz: hostile and malformed requests against the HTTP API. Every error answers in the one JSON shape
{"error": {"code", "message"}}, never a 500 nor plain text, and a bad request never affects a good one (in-process,
over ASGI; tests/test_raw_http.py sends malformed HTTP to a real server)."""

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi.testclient import TestClient

from lodex.api.application import Application
from lodex.api.settings import Settings
from lodex.search.results import SearchFilters
from tests.test_api import _service, app_client

BASE = "http://127.0.0.1:8765"
SURROGATE = "\\ud800"  # a JSON escape of a lone surrogate, as it travels in a request body
GOOD_QUERIES = [
    "swept wings lift",
    "hypersonic heat transfer",
    "rocket fins drag",
    "drag",
    "boundary layer",
    "transonic speed",
    "stabilizing fins",
    "wings",
]


# ---- helpers ---------------------------------------------------------------------------------------------------
def _shape(body: object) -> dict:
    """The error body, checked to be exactly {"error": {"code": str, "message": str}}."""
    assert isinstance(body, dict) and set(body) == {"error"}, body
    err = body["error"]
    assert isinstance(err, dict) and set(err) == {"code", "message"}, body
    assert isinstance(err["code"], str) and isinstance(err["message"], str) and err["code"] and err["message"], body
    return err


def _error(response, status: int | tuple[int, ...], code: str | None = None) -> dict:
    statuses = (status,) if isinstance(status, int) else status
    assert response.status_code in statuses, (response.status_code, response.text[:500])
    assert response.headers.get("content-type", "").startswith("application/json"), response.headers
    err = _shape(response.json())
    if code is not None:
        assert err["code"] == code, err
    return err


def _raw(client: TestClient, method: str, url: str, body: bytes, **kwargs):
    return client.request(method, url, content=body, headers={"content-type": "application/json"}, **kwargs)


def _nested(levels: int, leaf: object = "leaf") -> object:
    value = leaf
    for _ in range(levels):
        value = {"a": value}
    return value


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Application]:
    """One indexed service (3 files) for the module; the tests that keep what they push push to `pushing`'s own."""
    svc = _service(tmp_path_factory.mktemp("fuzz-shared"))
    try:
        yield svc
    finally:
        svc.close()


@pytest.fixture(scope="module")
def shared(service: Application) -> Iterator[TestClient]:
    """One client for the tests that change nothing (each of them checks it still answers good requests)."""
    with app_client(service) as c:
        yield c


@pytest.fixture(scope="module")
def roomy_client(service: Application) -> Iterator[TestClient]:
    """A client of an app whose body limit (api.max_body_kb, read at app creation) lets 1 MiB bodies through to
    the JSON parser and the models, so the checks past it are reached."""
    with app_client(service, max_body_kb=1024) as c:
        yield c


@pytest.fixture(scope="module")
def pushing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """A client of a service of its own, for the tests whose pushes are indexed (they count from what is there)."""
    svc = _service(tmp_path_factory.mktemp("fuzz-pushing"))
    try:
        with app_client(svc) as c:
            yield c
    finally:
        svc.close()


# ---- 1. in-process: text that is not Unicode, deep and large JSON, extreme dates, junk ids -----------------------
@pytest.mark.parametrize(
    "body",
    [
        '{"q": "flow \\ud800 x"}',
        '{"q": "flow", "path": "notes/\\ud800*"}',
        '{"q": "flow", "ext": ["md", "\\ud800"]}',
        '{"q": "flow \\udfff"}',  # a lone low surrogate
        '{"q": "flow \\udc00\\ud800"}',  # a low one before a high one: not a pair
    ],
    ids=["q", "path", "ext", "low-q", "reversed-pair"],
)
def test_lone_surrogate_in_search_is_refused(shared: TestClient, body: str) -> None:
    err = _error(_raw(shared, "POST", "/search", body.encode()), 422, "invalid_request")
    assert "surrogate" in err["message"], err
    assert shared.get("/search", params={"q": "swept wings"}).json()["results"]  # the next search is unaffected


def test_surrogate_pair_in_search_is_text(shared: TestClient) -> None:
    """A proper pair (an emoji escaped in JSON) is valid text: searched, not refused."""
    response = _raw(shared, "POST", "/search", b'{"q": "wings \\ud83d\\ude80"}')
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    "body",
    [
        '{"name": "memo\\ud800", "text": "Zeppelins over the sea."}',
        '{"name": "memo", "text": "Zeppelins \\ud800 over the sea."}',
        '{"name": "memo", "text": "Zeppelins over the sea.", "title": "T\\udbff"}',
        '{"name": "memo", "text": "Zeppelins over the sea.", "metadata": {"k\\ud800": "v"}}',
        '{"name": "memo", "text": "Zeppelins over the sea.", "metadata": {"k": "v\\ud800"}}',
        '{"name": "memo", "text": "Zeppelins over the sea.", "metadata": {"k": ["ok", {"deep": "\\udc00"}]}}',
    ],
    ids=["name", "text", "title", "metadata-key", "metadata-value", "metadata-nested-value"],
)
def test_lone_surrogate_in_pushed_document_is_refused(shared: TestClient, body: str) -> None:
    _error(_raw(shared, "POST", "/documents?wait=true", body.encode()), 422, "invalid_request")
    assert shared.get("/documents").json()["total"] == 3  # nothing was queued nor indexed


@pytest.mark.parametrize(
    "name, reason",
    [
        ("@api/../../etc/passwd", "'..' segment"),
        ("../outside", "'..' segment"),
        ("notes/../../x", "'..' segment"),
        ("notes/..", "'..' segment"),
        ("..", "'..' segment"),
        ("./memo", "'..' segment"),
        ("a/./b", "'..' segment"),
        ("..\\..\\windows\\win.ini", "'..' segment"),
        ("notes\\..\\x", "'..' segment"),
        ("/etc/passwd", "absolute"),
        ("\\\\server\\share", "absolute"),
        ("C:\\Windows", "absolute"),
        ("~/notes", "absolute"),
        ("memo\x00.txt", "control"),
        ("memo\nsecond line", "control"),
        ("memo\x1b[2J", "control"),
        ("memo\u202etxt.exe", "control"),
        ("   ", "empty"),
    ],
    ids=[
        "api-escape",
        "parent",
        "nested-parent",
        "trailing-parent",
        "dotdot",
        "dot",
        "inner-dot",
        "backslash-parent",
        "backslash-nested",
        "absolute",
        "unc",
        "drive",
        "home",
        "nul",
        "newline",
        "escape",
        "bidi",
        "blank",
    ],
)
def test_a_pushed_name_that_reads_as_a_path_elsewhere_is_refused(shared: TestClient, name: str, reason: str) -> None:
    """Names are refused, not rewritten (two names never become one document), in the one error shape."""
    err = _error(shared.post("/documents?wait=true", json={"name": name, "text": "Zeppelins over the sea."}), 422, "invalid_request")
    assert err["message"].startswith("name: ") and reason in err["message"], err
    assert shared.get("/documents").json()["total"] == 3  # nothing was queued nor indexed


def test_pushed_names_with_dots_and_slashes_that_stay_inside_are_kept(pushing: TestClient) -> None:
    before = pushing.get("/documents").json()["total"]
    for name in ("notes/v1.2/memo", "a..b", "...", "https://example.org/a/b", "  padded  "):
        pushed = pushing.post("/documents?wait=true", json={"name": name, "text": "Zeppelins over the sea."})
        assert pushed.status_code == 201 and pushed.json()["path"] == "@api/" + name.strip(), pushed.text
    assert pushing.get("/documents").json()["total"] == before + 5


@pytest.mark.parametrize("levels, status", [(400, 422), (17, 422), (16, 201)])
def test_metadata_depth_limit(pushing: TestClient, levels: int, status: int) -> None:
    response = pushing.post("/documents?wait=true", json={"name": f"deep-{levels}", "text": "Zeppelins over the sea.", "metadata": _nested(levels)})
    if status == 422:
        assert "16 levels" in _error(response, 422, "invalid_request")["message"]
    else:
        assert response.status_code == 201, response.text
        assert pushing.get(f"/documents/{response.json()['id']}").json()["metadata"] == _nested(levels)


def test_metadata_over_64_kib_is_refused(roomy_client: TestClient) -> None:
    big = {"blob": "x" * (70 * 1024)}  # over 64 KiB as JSON, under the raised body limit
    err = _error(roomy_client.post("/documents", json={"name": "big-meta", "text": "Small text.", "metadata": big}), 422, "invalid_request")
    assert "64 KiB" in err["message"], err
    many = {f"k{i}": "v" * 60 for i in range(1200)}  # large by its many keys
    _error(roomy_client.post("/documents", json={"name": "many-meta", "text": "Small text.", "metadata": many}), 422, "invalid_request")


def test_metadata_over_the_body_limit_is_413(shared: TestClient) -> None:
    big = {"blob": "x" * (20 * 1024)}  # over api.max_body_kb = 16 of _service: the body limit answers first
    _error(shared.post("/documents", json={"name": "big-meta", "text": "Small text.", "metadata": big}), 413, "too_large")


@pytest.mark.parametrize("path", ["/search", "/documents"])
@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000,
        b"[" * 100_000 + b"]" * 100_000,
        b'{"q": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
        b'{"name": "n", "text": "t", "metadata": ' + b'{"a": ' * 50_000 + b"1" + b"}" * 50_001,
    ],
    ids=["open-lists", "closed-lists", "deep-field", "deep-metadata"],
)
def test_deeply_nested_json_body_is_a_4xx(roomy_client: TestClient, path: str, body: bytes) -> None:
    err = _error(_raw(roomy_client, "POST", path, body), tuple(range(400, 500)))
    assert err["code"] != "internal_error"
    assert roomy_client.get("/search", params={"q": "swept wings"}).json()["results"]


def test_deeply_nested_json_under_the_default_body_limit(shared: TestClient) -> None:
    """10,000 levels fit in 16 KiB: the parser's recursion limit is hit, not the body limit."""
    for path in ("/search", "/documents"):
        _error(_raw(shared, "POST", path, b"[" * 10_000), tuple(range(400, 500)))
        _error(_raw(shared, "POST", path, b"[" * 8_000 + b"]" * 8_000), tuple(range(400, 500)))


@pytest.mark.parametrize(
    "moment, finds",
    [
        ("0001-01-01", True),
        ("9999-12-31", False),
        ("0001-01-01T00:00:00+14:00", True),
        ("9999-12-31T23:59:59-14:00", False),
        ("0001-01-01T00:00:00", True),
        ("9999-12-31T23:59:59.999999", False),
    ],
)
def test_extreme_modified_after(shared: TestClient, moment: str, finds: bool) -> None:
    got = shared.get("/search", params={"q": "flow drag", "modified_after": moment})
    assert got.status_code == 200, got.text
    assert bool(got.json()["results"]) is finds, got.json()
    posted = shared.post("/search", json={"q": "flow drag", "modified_after": moment})
    assert posted.status_code == 200, posted.text
    assert bool(posted.json()["results"]) is finds


@pytest.mark.parametrize(
    "doc_id",
    [
        "'; DROP",
        "' OR '1'='1",
        "a" * 5000,
        "..%2F..",
        "%2e%2e",
        "0123456789abcdef",
        "0123456789ABCDEF",
        "0123456789abcde'",
        "%00",
        "%F0%9F%9A%80",
        "%ED%A0%80",
        "%FF",
    ],
)
def test_junk_document_ids_are_404(shared: TestClient, doc_id: str) -> None:
    _error(shared.get(f"/documents/{doc_id}"), 404, "not_found")
    _error(shared.delete(f"/documents/{doc_id}"), 404, "not_found")


# ---- 2. a bad request never fails a good one in the same batch --------------------------------------------------
def test_good_and_bad_http_searches_at_once(shared: TestClient) -> None:
    local = threading.local()
    app = shared.app

    def one(i: int):
        if not hasattr(local, "client"):
            local.client = TestClient(app, base_url=BASE)
        if i % 2:
            body = f'{{"q": "drag {i} \\ud800 lift"}}'.encode()
            return "bad", _raw(local.client, "POST", "/search", body)
        return "good", local.client.get("/search", params={"q": GOOD_QUERIES[i // 2 % len(GOOD_QUERIES)], "k": 3})

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(one, range(40)))
    for kind, response in answers:
        if kind == "good":
            assert response.status_code == 200, response.text
            assert response.json()["results"]
        else:
            _error(response, 422, "invalid_request")


def test_bad_queries_in_the_batcher_fail_alone(service: Application) -> None:
    """Queries with a lone surrogate, past the HTTP checks, reach the batcher, BM25 and the tokenizer in the same
    batches as good ones: each bad one fails, every good one is answered."""
    for _ in range(3):  # several rounds: the batches form differently each time
        futures = []
        for i in range(40):
            if i % 2:
                futures.append(("bad", service.served.search(f"drag \ud800 {i}", 3, SearchFilters(), None)))
            else:
                futures.append(("good", service.served.search(GOOD_QUERIES[i // 2 % len(GOOD_QUERIES)], 3, SearchFilters(), None)))
        for i, (kind, future) in enumerate(futures):
            if kind == "good":
                failed = future.exception(timeout=30)
                assert failed is None, f"good query {i} failed with its batch: {failed!r}"
                assert future.result().results, i
            else:
                assert future.exception(timeout=30) is not None, i
    for mode in ("dense", "bm25", "hybrid"):  # each mode alone too
        good = [service.served.search(q, 3, SearchFilters(), mode) for q in GOOD_QUERIES]
        bad = [service.served.search(f"fins \ud800 {i}", 3, SearchFilters(), mode) for i in range(8)]
        assert [f.exception(timeout=30) for f in good] == [None] * len(good), mode
        assert all(f.result().results for f in good), mode
        assert all(f.exception(timeout=30) is not None for f in bad), mode
    assert service.served.search("swept wings", 3, SearchFilters(), None).result(timeout=30).results  # still serving


# ---- 3. the Host rule of a loopback server ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "host",
    [
        "rebind.attacker.example",
        "rebind.attacker.example:8765",
        "localhost.attacker.example",
        "127.0.0.1.nip.io",
        "evil.example:80:80",
        "0.0.0.0:8765",
    ],
)
def test_foreign_host_is_refused(shared: TestClient, host: str) -> None:
    err = _error(shared.get("/documents", headers={"host": host}), 403, "forbidden")
    assert "allowed_hosts" in err["message"]
    _error(shared.post("/documents?wait=true", json={"name": "rebound", "text": "Planted text."}, headers={"host": host}), 403, "forbidden")
    listed = shared.get("/documents").json()
    assert listed["total"] == 3 and all(d["path"] != "@api/rebound" for d in listed["documents"])


@pytest.mark.parametrize(
    "host",
    ["localhost:8765", "localhost", "127.0.0.1", "127.0.0.1:8765", "[::1]:8765", "[::1]", "LOCALHOST:8765", "app.localhost:8765", "127.0.0.2:8765"],
)
def test_loopback_hosts_are_answered(shared: TestClient, host: str) -> None:
    response = shared.get("/documents", headers={"host": host})
    assert response.status_code == 200, response.text
    assert response.json()["total"] == 3


def test_allowed_hosts_are_answered(service: Application) -> None:
    with app_client(service, allowed_hosts=["lodex.lan", "Search.Example"]) as client:
        for host in ("lodex.lan", "lodex.lan:8765", "LODEX.LAN:8765", "search.example:80", "localhost:8765"):
            response = client.get("/documents", headers={"host": host})
            assert response.status_code == 200, (host, response.text)
        _error(client.get("/documents", headers={"host": "rebind.attacker.example"}), 403, "forbidden")
        _error(client.get("/documents", headers={"host": "lodex.lan.attacker.example"}), 403, "forbidden")


# ---- 4. API-key auth --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def keyed_client(service: Application) -> Iterator[TestClient]:
    """A client of an app with an API key (api.api_key, read at app creation, as `lodex serve` reads it)."""
    with app_client(service, api_key="s3cret") as c:
        yield c


@pytest.mark.parametrize("authorization", ["Bearer s3cret", "bearer s3cret", "BEARER s3cret", "  Bearer s3cret  "])
def test_api_key_scheme_is_case_insensitive(keyed_client: TestClient, authorization: str) -> None:
    response = keyed_client.get("/stats", headers={"Authorization": authorization})
    assert response.status_code == 200, response.text
    found = keyed_client.get("/search", params={"q": "swept wings"}, headers={"Authorization": authorization})
    assert found.status_code == 200 and found.json()["results"]


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        "Bearer wrong",
        "Bearer s3cret2",
        "Bearer S3CRET",
        "Bearer s3cre",
        "Basic s3cret",
        "s3cret",
        "Token s3cret",
        "Bearer s3cret x",
    ],
)
def test_wrong_or_missing_api_key_is_401(keyed_client: TestClient, authorization: str | None) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    for method, url in (("get", "/stats"), ("get", "/documents"), ("post", "/search")):
        response = getattr(keyed_client, method)(url, headers=headers)
        _error(response, 401, "unauthorized")
        assert response.headers.get("www-authenticate") == "Bearer"


def test_blank_api_key_is_no_key(service: Application) -> None:
    assert Settings(api={"api_key": "  "}).api.api_key == ""
    assert Settings(api={"api_key": " \t\n"}).api.api_key == ""
    with app_client(service, api_key="   ") as client:
        assert client.get("/stats").status_code == 200
        assert client.get("/search", params={"q": "wings"}).json()["results"]
        assert client.get("/stats", headers={"Authorization": "Bearer    "}).status_code == 200


# ---- 5. HEAD and methods not allowed ----------------------------------------------------------------------------
@pytest.mark.parametrize("url", ["/health", "/documents", "/stats", "/ready", "/search?q=wings"])
def test_head_on_get_routes(shared: TestClient, url: str) -> None:
    response = shared.head(url)
    assert response.status_code == 200, response.headers
    assert response.content == b""


@pytest.mark.parametrize(
    "method, url",
    [
        ("put", "/search"),
        ("patch", "/search"),
        ("delete", "/search"),
        ("post", "/health"),
        ("put", "/health"),
        ("delete", "/health"),
        ("put", "/documents"),
        ("patch", "/documents"),
        ("delete", "/documents"),
        ("post", "/stats"),
        ("delete", "/stats"),
        ("get", "/reindex"),
        ("put", "/documents/0123456789abcdef"),
        ("options", "/health"),
    ],
)
def test_other_methods_are_405(shared: TestClient, method: str, url: str) -> None:
    _error(shared.request(method.upper(), url), 405, "method_not_allowed")
