"""The encoder contract (batching, budgets, normalization) and the real model's parity with sentence-transformers."""

import json
import sys
import threading

import numpy as np
import pytest

from tests.conftest import EVALDATA
from tests.fakes import FakeEncoder


def _real_texts(n: int) -> list[str]:
    texts = []
    with (EVALDATA / "cranfield" / "corpus.jsonl").open() as fh:
        for line in fh:
            doc = json.loads(line)
            if doc["text"].strip():
                texts.append(doc["text"])
            if len(texts) == n:
                break
    return texts


def test_vectors_are_normalized_float32_in_input_order() -> None:
    encoder = FakeEncoder()
    texts = ["short", "a much longer text with many more words in it", "mid length text"]
    out = encoder.embed(texts)
    assert out.dtype == np.float32 and out.shape == (3, encoder.dim)
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-6)
    for i, text in enumerate(texts):
        assert np.allclose(out[i], encoder.embed([text])[0], atol=1e-6)


def test_batches_respect_the_token_budget() -> None:
    encoder = FakeEncoder(batch_tokens=200)
    texts = [" ".join(["w"] * n) for n in (3, 60, 10, 30, 5, 60, 45, 1)]
    encoder.embed(texts)
    assert all(padded <= 200 for padded in encoder.batches)
    assert encoder.texts_encoded == len(texts)


def test_a_few_queries_are_encoded_in_groups_of_similar_length() -> None:
    encoder = FakeEncoder()
    texts = [" ".join(["w"] * n) for n in (40, 3, 41, 4, 2, 44)]
    out = encoder.embed(texts, kind="query")
    assert len(encoder.batches) == 2 and sum(encoder.batches) == 3 * 6 + 3 * 46  # not 6 queries padded to 46 tokens
    for i, text in enumerate(texts):
        assert np.allclose(out[i], encoder.embed([text], kind="query")[0], atol=1e-6)


def test_empty_input() -> None:
    assert FakeEncoder().embed([]).shape == (0, 256)


@pytest.mark.slow
def test_sentence_transformers_parity(real_encoder) -> None:
    from sentence_transformers import SentenceTransformer

    from lodex.encoders.transformers_encoder import bundled_model_dir

    texts = _real_texts(48) + ["", "a", "Heat transfer. " * 200]  # empty, tiny, and truncated inputs too
    ours = real_encoder.embed(texts)
    reference = SentenceTransformer(str(bundled_model_dir()), device="cpu").encode(texts, normalize_embeddings=True, batch_size=16)
    cosines = (ours * reference).sum(axis=1)
    assert cosines.min() >= 0.9999, cosines.min()


@pytest.mark.slow
def test_same_input_same_bytes(real_encoder) -> None:
    texts = _real_texts(20)
    assert real_encoder.embed(texts).tobytes() == real_encoder.embed(texts).tobytes()


@pytest.mark.slow
def test_real_encoder_declares_its_shape(real_encoder) -> None:
    assert real_encoder.dim == 384
    assert real_encoder.max_length == 256
    assert real_encoder.pooling == "mean"
    assert real_encoder.origin()["model_id"] == "sentence-transformers/all-MiniLM-L6-v2"


@pytest.mark.slow  # loads the real model (and transformers): not in the quick loop
def test_chunking_and_encoding_at_once_do_not_share_tokenizer_settings(real_encoder) -> None:
    """The reader thread chunks (no padding, no truncation) while the writer or a query encodes (padded,
    truncated to max_length): each must get its own settings, or a long block's token spans get cut."""
    long_text = " ".join(f"word{i} in a sentence" for i in range(600))  # far beyond max_length tokens
    expected = real_encoder.token_spans([long_text])[0]
    assert len(expected) > 4 * real_encoder.max_length
    stop = threading.Event()

    def encode() -> None:  # the tokenizing half of an encoder batch, as the writer or a query thread does it
        while not stop.is_set():
            with real_encoder._tokenizers.borrow() as tokenizer:
                tokenizer(
                    ["a short query", "and another, longer one " * 100],
                    padding=True,
                    truncation=True,
                    max_length=real_encoder.max_length,
                    return_tensors="np",
                )

    worker = threading.Thread(target=encode)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: a shared tokenizer fails at once
    worker.start()
    try:
        for _ in range(300):
            assert np.array_equal(real_encoder.token_spans([long_text])[0], expected)
    finally:
        stop.set()
        worker.join()
        sys.setswitchinterval(interval)


@pytest.mark.slow
def test_threads_one_after_another_share_one_tokenizer_copy(real_encoder, monkeypatch) -> None:
    """Each indexing run reads on a new thread: it borrows a tokenizer copy made before instead of making its own
    (a copy cost ~0.1 s of CPU, a third of a small watcher commit's work); two threads at once get two copies."""
    import copy

    real_encoder.token_spans(["warm"])
    copies: list[object] = []
    deepcopy = copy.deepcopy
    monkeypatch.setattr(copy, "deepcopy", lambda obj, *args: copies.append(obj) or deepcopy(obj, *args))
    for _ in range(5):
        worker = threading.Thread(target=real_encoder.token_spans, args=(["a file read on a new thread"],))
        worker.start()
        worker.join()
    assert not [c for c in copies if c is real_encoder.tokenizer]
    with real_encoder._tokenizers.borrow() as first, real_encoder._tokenizers.borrow() as second:
        assert first is not second and real_encoder.tokenizer not in (first, second)


@pytest.fixture(scope="module")
def query_cache(tmp_path_factory: pytest.TempPathFactory):
    """A model cache for the two tests below: the float32 ONNX copy the first exports serves the second (checked again
    when loaded, as any cached copy is)."""
    return tmp_path_factory.mktemp("query-cache")


@pytest.mark.slow
def test_exact_mode_queries_run_on_onnx_with_the_documents_vectors(real_encoder, query_cache, tmp_path) -> None:
    """Queries go through a float32 ONNX copy of the model (exported once); a query embedded as a query and as
    a document gives the same vector, and without a usable cache PyTorch answers instead."""
    from lodex.encoders.settings import EncoderSettings
    from lodex.encoders.transformers_encoder import TransformersEncoder

    queries = [
        "heat transfer in hypersonic flow",
        "what is the effect of sweep on the drag of wings at transonic speed",
        "a",
        "Boundary layer. " * 300,
    ]  # short, long, tiny and truncated
    encoder = TransformersEncoder(EncoderSettings(cache_dir=str(query_cache), fast_queries=False, precision="exact"))
    as_queries = encoder.embed(queries, kind="query")
    assert encoder._queries is not None and len(list(query_cache.glob("*-fp32.onnx"))) == 1
    import onnx

    ops = {node.op_type for node in onnx.load(str(encoder._queries.path)).graph.node}
    assert "IsNaN" not in ops and "Softmax" in ops  # eager attention: no NaN guard around every softmax (SDPA's export)
    assert encoder.model.config._attn_implementation == "sdpa"  # the export changed a copy: PyTorch's model keeps its own
    assert np.abs(as_queries - real_encoder.embed(queries, kind="document")).max() < 1e-5
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    fallback = TransformersEncoder(EncoderSettings(cache_dir=str(blocked), fast_queries=False, precision="exact"))
    assert np.abs(fallback.embed(queries, kind="query") - as_queries).max() < 1e-5
    assert fallback._queries is None and fallback._query_fallback


@pytest.mark.slow
def test_an_onnx_copy_that_does_not_reproduce_the_model_is_not_used(query_cache, monkeypatch, caplog) -> None:
    """The query model is checked against PyTorch when loaded (a traced length baked into a graph would give
    wrong vectors silently): one that disagrees (a cached copy garbled as it loads) is dropped, with a warning, and
    PyTorch answers."""
    import lodex.encoders.fast_mode as fast_mode
    import lodex.encoders.transformers_encoder as module
    from lodex.encoders.settings import EncoderSettings

    class Garbled:
        def __init__(self, model) -> None:
            self.model = model

        def __call__(self, batch):
            hidden = self.model(batch)
            return hidden + np.random.default_rng(0).standard_normal(hidden.shape).astype(np.float32)

    real_load = fast_mode.load_onnx_model

    def garbled_load(*args, **kwargs):
        model = real_load(*args, **kwargs)
        return Garbled(model) if not kwargs.get("int8") else model

    monkeypatch.setattr(fast_mode, "load_onnx_model", garbled_load)
    encoder = module.TransformersEncoder(EncoderSettings(cache_dir=str(query_cache), fast_queries=False, precision="exact"))
    queries = ["heat transfer in hypersonic flow", "drag of swept wings"]
    with caplog.at_level("WARNING"):
        vectors = encoder.embed(queries, kind="query")
    assert encoder._queries is None and encoder._query_fallback
    assert "does not reproduce the model" in caplog.text
    assert np.abs(vectors - encoder.embed(queries, kind="document")).max() < 1e-6
