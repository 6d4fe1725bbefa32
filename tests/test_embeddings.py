"""POST /v1/embeddings and GET /v1/models: the `openai` client against a real `lodex serve` gets the index's own query
and document vectors, batched, with token usage; limits and errors in the one JSON shape."""

import base64
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from lodex.api.factory import build_encoder
from lodex.api.http.app import create_app
from lodex.api.settings import Settings
from tests.fakes import FakeEncoder
from tests.test_api import _error, _service
from tests.test_serve import Server

TEXTS = 64  # eight of the server's slices (api.embed_slice_inputs), of several lengths
PREFIXES = {"LODEX_ENCODER__QUERY_PREFIX": "query: ", "LODEX_ENCODER__DOCUMENT_PREFIX": "passage: "}


@pytest.fixture
def client(tmp_path: Path):
    service = _service(tmp_path)
    service.settings.api.max_embed_inputs = 300
    service.settings.api.max_embed_chars = 5000
    with TestClient(create_app(service), base_url="http://127.0.0.1:8765") as c:
        yield c
    service.close()


def test_embeddings_shapes_kinds_and_limits(client: TestClient) -> None:
    fake = FakeEncoder()
    texts = ["swept wings", "heat transfer", "fins of rockets"]
    body = client.post("/v1/embeddings", json={"model": fake.model_id, "input": texts}).json()
    assert body["object"] == "list" and body["model"] == fake.model_id and [d["index"] for d in body["data"]] == [0, 1, 2]
    assert np.array_equal(np.array([d["embedding"] for d in body["data"]], np.float32), fake.embed(texts, kind="query"))
    assert body["usage"] == {"prompt_tokens": sum(fake.input_tokens(texts, "query")), "total_tokens": sum(fake.input_tokens(texts, "query"))}
    one = client.post("/v1/embeddings", json={"model": "lodex:document", "input": "swept wings", "encoding_format": "base64"}).json()
    decoded = np.frombuffer(base64.b64decode(one["data"][0]["embedding"]), "<f4")
    assert np.array_equal(decoded, fake.embed(["swept wings"], kind="document")[0])
    models = client.get("/v1/models").json()
    assert models["object"] == "list" and [m["id"] for m in models["data"]] == [fake.model_id]
    assert "is not served here" in _error(client.post("/v1/embeddings", json={"model": "text-embedding-3-small", "input": "x"}), 404, "not_found")
    _error(client.post("/v1/embeddings", json={"model": "lodex", "input": ["x"] * 301}), 413, "too_large")
    _error(client.post("/v1/embeddings", json={"model": "lodex", "input": "x" * 5001}), 413, "too_large")
    _error(client.post("/v1/embeddings", json={"model": "lodex", "input": []}), 422, "invalid_request")
    _error(client.post("/v1/embeddings", json={"model": "lodex", "input": [1, 2, 3]}), 422, "invalid_request")
    _error(client.post("/v1/embeddings", json={"model": "lodex", "input": "x", "dimensions": 3}), 422, "invalid_request")
    _error(client.post("/v1/embeddings", json={"model": "lodex:query", "input": "x", "input_type": "document"}), 422, "invalid_request")
    _error(
        client.post(
            "/v1/embeddings", content=b'{"model": "lodex", "input": "' + b"x" * 3_000_000 + b'"}', headers={"content-type": "application/json"}
        ),
        413,
        "too_large",
    )
    # searches go on through the same encoder thread
    assert client.get("/search", params={"q": "swept wings"}).status_code == 200


@pytest.mark.slow
def test_the_openai_client_gets_lodexs_own_vectors(tmp_path: Path) -> None:
    import openai

    root = tmp_path / "docs"
    root.mkdir()
    (root / "wings.md").write_text("# Wings\n\nSwept wings delay the drag rise at transonic Mach numbers.\n")
    env = {**PREFIXES, "LODEX_API__API_KEY": "sesame", "LODEX_API__MAX_BODY_KB": "64", "LODEX_API__MAX_EMBED_INPUTS": "300"}
    server = Server(root, tmp_path / "data", "--no-watch", env=env)
    settings = Settings(base_dir=tmp_path)
    settings.encoder.query_prefix, settings.encoder.document_prefix = "query: ", "passage: "
    texts = [f"text {i}: {'swept wings and drag ' * (i % 5)}about topic {i}" for i in range(TEXTS)]
    try:
        server.wait_ready(path="/health")
        encoder = build_encoder(settings)  # the same model and prompts, in this process (once the server has its exports in the run's cache)
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="sesame", max_retries=0)
        model = client.models.list().data[0].id
        assert model == encoder.model_id
        expected = {kind: encoder.embed(texts, kind=kind) for kind in ("query", "document")}
        for kind, encoding, request in (
            ("query", "float", {"model": model}),
            ("document", "base64", {"model": model + ":document"}),
            ("document", "float", {"model": model, "extra_body": {"input_type": "document"}}),
        ):
            answer = client.embeddings.create(input=texts, encoding_format=encoding, **request)  # type: ignore[call-overload]
            got = np.array(
                [
                    np.frombuffer(base64.b64decode(d.embedding), "<f4") if encoding == "base64" else d.embedding  # type: ignore[arg-type]
                    for d in answer.data
                ],
                np.float32,
            )
            assert got.shape == (TEXTS, encoder.dim)
            assert np.abs(got - expected[kind]).max() <= 1e-6
            assert answer.usage.prompt_tokens == answer.usage.total_tokens == sum(encoder.input_tokens(texts, kind))
        query = client.embeddings.create(input="swept wings", model=model)  # the client asks for base64 and decodes it
        assert np.abs(np.array(query.data[0].embedding, np.float32) - encoder.embed(["swept wings"], kind="query")[0]).max() <= 1e-6
        with pytest.raises(openai.APIStatusError) as too_many:
            client.embeddings.create(input=["x"] * 301, model=model)
        assert too_many.value.status_code == 413
        with pytest.raises(openai.APIStatusError) as too_large:
            client.embeddings.create(input=["y" * 30_000] * 3, model=model)
        assert too_large.value.status_code == 413
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0).embeddings.create(input="x", model=model)
    finally:
        server.stop()
