"""POST /v1/embeddings attacked as a hostile client would: too many inputs, one huge input, token ids, nulls, nesting,
wrong types, malformed JSON, wrong model names; each refused alone in the one JSON error shape with a plain reason,
and searches answered while a large batch is embedded."""

import base64
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from lodex.api.application import Application
from lodex.api.http.app import create_app
from lodex.api.http.embeddings import EmbeddingsOut
from tests.fakes import FakeEncoder
from tests.test_api import _error, _service, app_client
from tests.test_embedding_queue import GatedEncoder

BASE = "http://127.0.0.1:8765"
PYDANTIC_WORDS = ("function-after", "valid_text", "Value error", "union", "str]")  # how pydantic's own messages read


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Application]:
    """One indexed service for the module (an embedding changes nothing in it); its body limit 16 KiB."""
    svc = _service(tmp_path_factory.mktemp("embed-hostile"))
    try:
        yield svc
    finally:
        svc.close()


@pytest.fixture(scope="module")
def client(service: Application) -> Iterator[TestClient]:
    """A client of an app with room for the attacks below to reach the endpoint itself (api.max_body_kb 12 MiB)."""
    with app_client(service, max_body_kb=12 * 1024) as c:
        yield c


def test_a_hundred_thousand_inputs_answer_413_and_searches_go_on(client: TestClient) -> None:
    message = _error(client.post("/v1/embeddings", json={"model": "lodex", "input": ["x"] * 100_000}), 413, "too_large")
    assert "100000 inputs" in message and "api.max_embed_inputs" in message
    assert client.get("/search", params={"q": "swept wings"}).status_code == 200


def test_one_ten_megabyte_input_answers_413(service: Application, client: TestClient) -> None:
    huge = "wings " * (10 * 2**20 // 6)
    with app_client(service) as small:  # a body limit of 16 KiB: refused before it is read
        assert "api.max_body_kb" in _error(small.post("/v1/embeddings", json={"model": "lodex", "input": huge}), 413, "too_large")
    large = client  # a body limit above it: the input's own limit refuses it
    message = _error(large.post("/v1/embeddings", json={"model": "lodex", "input": ["short", huge]}), 413, "too_large")
    assert "api.max_embed_chars" in message
    assert large.post("/v1/embeddings", json={"model": "lodex", "input": "short"}).status_code == 200


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ([101, 2009, 102], "token ids are not accepted"),
        ([[101, 2009], [102]], "token ids are not accepted"),
        (7, "token ids are not accepted"),
        (None, "not null"),
        ({"text": "wings"}, "not an object"),
        (["wings", None], "item 1 is null"),
        (["wings", ["nested"]], "item 1 is a list"),
        ([["deeply", ["nested"]]], "item 0 is a list"),
        (["wings", 3.5], "item 1 is a number"),
        ([True], "item 0 is true or false"),
        (True, "not true or false"),
    ],
)
def test_inputs_that_are_not_text_get_a_plain_reason(client: TestClient, value: Any, reason: str) -> None:
    message = _error(client.post("/v1/embeddings", json={"model": "lodex", "input": value}), 422, "invalid_request")
    assert message.startswith("input: ") and reason in message
    assert not any(word in message for word in PYDANTIC_WORDS), message


def test_a_lone_surrogate_and_malformed_json_get_a_plain_reason(client: TestClient) -> None:
    surrogate = client.post("/v1/embeddings", content=b'{"model": "lodex", "input": ["ok", "\\ud800"]}', headers={"content-type": "application/json"})
    message = _error(surrogate, 422, "invalid_request")
    assert "item 1 holds a lone surrogate" in message and not any(word in message for word in PYDANTIC_WORDS), message
    for body in (b'{"model": "lodex", "input": ', b"{", b'{"model": "lodex", "input": "x"} trailing'):
        message = _error(client.post("/v1/embeddings", content=body, headers={"content-type": "application/json"}), 422, "invalid_request")
        assert message.startswith("the request body is not valid JSON") and "send one JSON object" in message


def test_base64_is_little_endian_float32_and_wrong_models_are_named(client: TestClient) -> None:
    texts = ["swept wings", "", "heat transfer " * 200]
    floats = client.post("/v1/embeddings", json={"model": "lodex", "input": texts})
    packed = client.post("/v1/embeddings", json={"model": "lodex", "input": texts, "encoding_format": "base64"})
    assert floats.status_code == packed.status_code == 200
    as_floats = np.array([d.embedding for d in EmbeddingsOut.model_validate_json(floats.content).data], np.float32)  # the documented shape
    raw = [base64.b64decode(d["embedding"]) for d in packed.json()["data"]]
    assert all(len(r) == 4 * FakeEncoder().dim for r in raw)
    assert np.array_equal(np.array([np.frombuffer(r, "<f4") for r in raw]), as_floats)
    assert np.array_equal(as_floats, FakeEncoder().embed(texts, kind="query"))
    model_id = FakeEncoder.model_id
    for wrong in ("", "lodex:", "LODEX", ":query", "lodex:passage", "lodex:document:query", "text-embedding-3-small", "m" * 100_000):
        message = _error(client.post("/v1/embeddings", json={"model": wrong, "input": "x"}), 404, "not_found")
        assert repr(model_id) in message and len(message) < 500
    for wrong_type in (None, 5, ["lodex"]):
        assert _error(client.post("/v1/embeddings", json={"model": wrong_type, "input": "x"}), 422, "invalid_request").startswith("model: ")
    assert _error(client.post("/v1/embeddings", json={"model": "lodex", "input": "x", "dimensions": True}), 422, "invalid_request").startswith(
        "dimensions: "
    )


def test_a_search_over_http_is_answered_while_a_large_batch_is_embedded(tmp_path: Path) -> None:
    encoder = GatedEncoder()
    service = _service(tmp_path, encoder=encoder)
    service.settings.api.max_body_kb = 1024
    encoder.armed = True
    texts = [f"passage {i} about the drag of swept wings" for i in range(2048)]
    answers: dict[str, Any] = {}
    try:
        with TestClient(create_app(service), base_url=BASE) as client:
            batch = threading.Thread(
                target=lambda: answers.update(embedded=client.post("/v1/embeddings", json={"model": "lodex:document", "input": texts}))
            )
            batch.start()
            assert encoder.holding.wait(30)
            search = threading.Thread(target=lambda: answers.update(searched=client.get("/search", params={"q": "swept wings"})))
            search.start()
            while not service.served.batcher.waiting:  # the search waits for the encoder thread (join's timeout bounds the test)
                threading.Event().wait(0.01)
            encoder.go.set()
            search.join(60)
            batch.join(60)
        assert answers["searched"].status_code == 200 and answers["embedded"].status_code == 200
        kinds = [kind for kind, _ in encoder.calls]
        assert kinds.index("query") < len(kinds) - 1 and kinds.count("document") == 2048 // service.settings.api.embed_slice_inputs
        got = np.array([d["embedding"] for d in answers["embedded"].json()["data"]], np.float32)
        assert np.array_equal(got, FakeEncoder().embed(texts, kind="document"))
    finally:
        encoder.go.set()
        service.close()
