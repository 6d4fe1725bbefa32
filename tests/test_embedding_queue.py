"""Embedding batches (POST /v1/embeddings) share the query encoder's thread with searches without holding it: a batch is
embedded a slice at a time and a waiting search goes between two slices; the texts waiting are bounded (429 with
Retry-After past api.max_queued_embed_inputs); a job whose caller went away stops at its next slice."""

import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from lodex.api.http.app import create_app
from lodex.search.embed_queue import EmbedJob, EmbedQueue
from lodex.search.results import SearchFilters
from lodex.store.errors import BusyError
from tests.fakes import FakeEncoder
from tests.test_api import _error, _service


class GatedEncoder(FakeEncoder):
    """The fake encoder, logging each call to `embed` as (kind, texts); once armed, its first call for documents (an
    embedding job's, never a search's) waits for `go`."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, int]] = []
        self.armed = False
        self.holding, self.go = threading.Event(), threading.Event()

    def embed(self, texts: list[str], kind: str = "document", lengths: list[int] | None = None) -> np.ndarray:
        if self.armed and kind == "document" and not self.go.is_set():
            self.holding.set()
            assert self.go.wait(60), "the test never let the encoder go on"
        if self.armed:
            self.calls.append((kind, len(texts)))
        return super().embed(texts, kind, lengths)


@pytest.fixture
def gated(tmp_path: Path):
    encoder = GatedEncoder()
    service = _service(tmp_path, encoder=encoder)  # the folder indexed (document calls) before the gate is armed
    encoder.armed = True
    yield service, encoder
    encoder.go.set()
    service.close()


def test_a_search_is_encoded_between_the_slices_of_a_large_embedding_batch(gated: Any) -> None:
    service, encoder = gated
    texts = [f"passage {i} on the drag of swept wings" for i in range(256)]
    embedding = service.served.embed(texts, "document")
    assert encoder.holding.wait(30)  # the encoder thread is inside the batch
    search = service.served.search("swept wings", 5, SearchFilters())
    encoder.go.set()
    assert search.result(timeout=60).results
    vectors, tokens = embedding.result(timeout=60)
    kinds = [kind for kind, _ in encoder.calls]
    # the search's query went through the encoder before the batch's last texts did (before: one call of 256, then it)
    assert "query" in kinds and kinds.index("query") < len(kinds) - 1 and kinds[-1] == "document", encoder.calls
    assert max(n for kind, n in encoder.calls if kind == "document") == service.settings.api.embed_slice_inputs
    assert np.array_equal(vectors, FakeEncoder().embed(texts, kind="document"))  # the slices, put back in order
    assert tokens == sum(encoder.input_tokens(texts, "document"))
    assert service.served.batcher.embeds.queued == 0


def test_texts_past_the_queue_bound_answer_429_and_the_bound_frees_as_jobs_end(gated: Any) -> None:
    service, encoder = gated
    service.served.batcher.embeds.max_inputs = 300
    held = service.served.embed(["kites"] * 200, "document")
    assert encoder.holding.wait(30)
    second = service.served.embed(["gliders"] * 100, "document")  # 300 waiting: at the bound, not past it
    with pytest.raises(BusyError):
        service.served.embed(["balloons"], "query")
    with TestClient(create_app(service), base_url="http://127.0.0.1:8765") as client:
        refused = client.post("/v1/embeddings", json={"model": "lodex", "input": ["balloons", "rockets"]})
        message = _error(refused, 429, "busy")
        assert "api.max_queued_embed_inputs" in message and int(refused.headers["retry-after"]) >= 1
        assert service.served.batcher.embeds.queued == 300  # the refused texts were never counted in
        encoder.go.set()
        assert len(held.result(timeout=60)[0]) == 200 and len(second.result(timeout=60)[0]) == 100
        assert service.served.batcher.embeds.queued == 0
        again = client.post("/v1/embeddings", json={"model": "lodex", "input": ["balloons", "rockets"]})
        assert again.status_code == 200 and len(again.json()["data"]) == 2


def test_a_request_alone_is_taken_whatever_the_bound() -> None:
    queue = EmbedQueue(lambda texts, kind: (np.zeros((len(texts), 2), np.float32), len(texts)), max_inputs=4, slice_inputs=2)
    queue.admit(EmbedJob(["a"] * 10))  # alone: it would never be taken otherwise
    with pytest.raises(BusyError):
        queue.admit(EmbedJob(["b"]))


def test_jobs_take_turns_and_a_cancelled_one_stops_at_its_next_slice() -> None:
    seen: list[list[str]] = []

    def embed(texts: list[str], kind: str) -> tuple[np.ndarray, int]:
        seen.append(texts)
        return np.full((len(texts), 2), len(seen), np.float32), len(texts)

    queue = EmbedQueue(embed, max_inputs=100, slice_inputs=2)
    big, small, dropped = EmbedJob([f"big {i}" for i in range(6)]), EmbedJob(["small"]), EmbedJob([f"x {i}" for i in range(6)])
    futures: list[Future[Any]] = [Future(), Future(), Future()]
    for job, future in zip((big, small, dropped), futures):
        queue.admit(job)
        queue.start(job, future)
    queue.run_slice()  # big's first slice
    queue.run_slice()  # then small, whole: it does not wait behind big's other slices
    assert futures[1].done() and seen[1] == ["small"] and not futures[0].done()
    queue.run_slice()  # dropped's first slice
    assert futures[2].cancel()  # its caller went away: pending until its last slice, so it can be cancelled
    while queue.pending:
        queue.run_slice()
    assert [s for s in seen if s[0].startswith("x")] == [["x 0", "x 1"]]  # none of its slices after the cancel
    vectors, tokens = futures[0].result(timeout=0)
    assert vectors.shape == (6, 2) and tokens == 6 and queue.queued == 0
