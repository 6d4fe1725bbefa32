"""Fast mode (int8 ONNX Runtime): the fidelity gate on real text, the model cache, and no mixing of modes."""

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from lodex.api.cli import app
from lodex.indexer.chunking.chunker import Chunker
from tests.conftest import EVALDATA

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def fast_encoder(fast_cache: Path):
    from lodex.encoders.settings import EncoderSettings
    from lodex.encoders.transformers_encoder import TransformersEncoder

    return TransformersEncoder(EncoderSettings(precision="fast", cache_dir=str(fast_cache)))


def _real_chunks(encoder, per_collection: int) -> list[str]:
    """Chunks as the pipeline cuts them, from abstracts of each evaluation collection, 25 to a document."""
    chunker = Chunker(encoder.token_spans, 128 - encoder.special_tokens, 32)
    texts: list[str] = []
    for name in ("cranfield", "cisi", "med"):
        with (EVALDATA / name / "corpus.jsonl").open() as fh:
            docs = [json.loads(line)["text"] for line in fh][:per_collection]
        long_docs = ["\n\n".join(docs[i : i + 25]) for i in range(0, len(docs), 25)]
        texts += [long_doc[c.char_start : c.char_end] for long_doc in long_docs for c in chunker.chunk(long_doc)]
    return texts


def test_fidelity_gate_fast_vectors_match_exact_ones_on_real_text(real_encoder, fast_encoder) -> None:
    texts = _real_chunks(real_encoder, per_collection=50)
    assert len(texts) > 300
    exact, fast = real_encoder.embed(texts, kind="document"), fast_encoder.embed(texts, kind="document")
    cosines = (exact * fast).sum(axis=1) / np.linalg.norm(fast, axis=1) / np.linalg.norm(exact, axis=1)
    assert cosines.mean() >= 0.99 and cosines.min() >= 0.97, (cosines.mean(), cosines.min())
    queries = ["heat transfer in hypersonic flow", "information retrieval evaluation", "blood pressure in children"]
    q_cos = (real_encoder.embed(queries, kind="query") * fast_encoder.embed(queries, kind="query")).sum(axis=1)
    assert q_cos.min() >= 0.97
    before = fast_encoder.embed(texts[:20], kind="document")
    fast_encoder.release_memory()  # the runtime's arena handed back: the same batch gives the same vectors
    assert np.allclose(fast_encoder.embed(texts[:20], kind="document"), before, atol=1e-6)
    assert fast_encoder.origin()["precision"] == "fast" and real_encoder.origin()["precision"] == "exact"


def test_a_fast_vector_does_not_depend_on_the_texts_encoded_beside_it(fast_encoder, fast_cache: Path) -> None:
    """int8 activations are quantized per run: each input runs alone, so a chunk (or query) gets the same vector
    whatever else its batch holds (in a batch, the cosine to the same text alone was 0.9988 on average, 0.997 at worst)."""
    from lodex.encoders.recipe_encoder import load_fast_encoder
    from lodex.encoders.settings import EncoderSettings

    texts = _real_chunks(fast_encoder, per_collection=25)[:61] + [
        "向量检索把文档切成段落，再为每一段计算向量。",
        "日本語の文書を検索するには、まず形態素に分けます。",
        "Die Suche findet Absätze in langen Dokumenten über ihre Bedeutung.",
    ]
    together = fast_encoder.embed(texts, kind="document")
    alone = np.stack([fast_encoder.embed([t], kind="document")[0] for t in texts[:12]])
    shuffled = fast_encoder.embed(texts[::-1] + ["a short one", texts[0] * 2], kind="document")[: len(texts)][::-1]
    assert np.abs(together[:12] - alone).max() < 1e-5 and np.abs(together - shuffled).max() < 1e-5
    queries = ["heat transfer in hypersonic flow", "what is the effect of a very long and wordy question on ranking?"]
    assert np.abs(fast_encoder.embed(queries, kind="query")[0] - fast_encoder.embed(queries[:1], kind="query")[0]).max() < 1e-5
    rebuilt = load_fast_encoder(EncoderSettings(precision="fast", cache_dir=str(fast_cache)), None)
    assert rebuilt is not None  # rebuilt from the recipe (no PyTorch): the same vectors, batched as it batches
    assert np.abs(rebuilt.embed(texts, kind="document") - together).max() < 1e-5


def test_fast_model_is_exported_once_and_reused(fast_encoder, fast_cache: Path) -> None:
    from lodex.encoders.settings import EncoderSettings
    from lodex.encoders.transformers_encoder import TransformersEncoder

    chosen = fast_encoder._fast.path  # the export of the path measured fastest (7-bit weights can win on AVX2 without VNNI)
    assert chosen.parent == fast_cache and chosen.exists()
    stamp = chosen.stat().st_mtime_ns
    again = TransformersEncoder(EncoderSettings(precision="fast", cache_dir=str(fast_cache)))
    assert again._fast.path == chosen and chosen.stat().st_mtime_ns == stamp
    # the path was chosen by measurement once (fast_encoder), then remembered for this CPU: no second measurement
    assert fast_encoder.fast_trials or "measured before" in fast_encoder.runtime()
    assert again.fast_trials == [] and "(measured before on this CPU)" in again.runtime() and again.fast_path == fast_encoder.fast_path
    assert len(list(fast_cache.glob("*-fast-path.json"))) == 1
    assert not list(fast_cache.glob(".export-*"))  # no export leftovers


def test_switching_precision_on_an_index_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fast_cache: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LODEX_ENCODER__CACHE_DIR", str(fast_cache))
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.txt").write_text("Swept wings at transonic speed: lift, drag and buffeting.")
    runner = CliRunner()
    assert runner.invoke(app, ["index", str(root)]).exit_code == 0
    monkeypatch.setenv("LODEX_ENCODER__PRECISION", "fast")
    for args in (["search", "wings"], ["index", str(root)]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert "precision: index has 'exact', configured 'fast'" in result.output and "--rebuild" in result.output
        assert "Traceback" not in result.output
    result = runner.invoke(app, ["index", str(root), "--rebuild", "--json"])  # the documented way to switch
    assert result.exit_code == 0 and json.loads(result.stdout)["added"] == 1
    assert json.loads((tmp_path / ".lodex" / "origin.json").read_text())["precision"] == "fast"
    assert runner.invoke(app, ["search", "wings", "--json"]).exit_code == 0


def test_smoothing_keeps_the_model_function_and_evens_out_input_ranges(real_encoder) -> None:
    """The smoothed copy computes the same hidden states (it only refactors each linear layer), and the inputs
    its int8 matrix products see have less uneven channel ranges than the original's."""
    import torch

    from lodex.encoders.smoothing import calibration_texts, smoothed_copy

    model, tokenizer = real_encoder.model, real_encoder.tokenizer
    smoothed = smoothed_copy(model, tokenizer, real_encoder.max_length)
    batch = tokenizer(calibration_texts()[:8], padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.inference_mode():
        before, after = model(**batch).last_hidden_state, smoothed(**batch).last_hidden_state
    assert torch.allclose(before, after, atol=1e-3), (before - after).abs().max()
    assert sum(type(m).__name__ == "Smoothed" for m in smoothed.modules()) == 6 * 6 + 1  # 6 per layer, and the pooler
    assert not any(type(m).__name__ == "Smoothed" for m in model.modules())  # the encoder's own model is untouched

    def spread(m: torch.nn.Module) -> float:
        """max/median of the channel ranges at the first feed-forward output layer's input."""
        seen: list[torch.Tensor] = []
        target = m.encoder.layer[0].output.dense
        target = getattr(target, "linear", target)  # the smoothed layer's matrix product sees x / s
        hook = target.register_forward_hook(lambda _m, i, _o: seen.append(i[0].abs().reshape(-1, i[0].shape[-1]).amax(0)))
        with torch.inference_mode():
            m(**batch)
        hook.remove()
        return float(seen[0].max() / seen[0].median())

    assert spread(smoothed) < spread(model)


def test_a_fast_index_of_another_quantization_scheme_is_refused(fast_encoder, real_encoder, tmp_path: Path) -> None:
    """Fast vectors of another scheme (the unsmoothed int8 of earlier versions) are not comparable: refused, with the fix."""
    from lodex.store.errors import OriginMismatchError
    from lodex.store.origin import check_origin, make_origin

    current = make_origin(fast_encoder.origin(), 254, 32)
    scheme = fast_encoder.fast_path.scheme  # int8-sq75, or its 7-bit weights where that path measured fastest (AVX2)
    assert current["quantization"] == scheme in ("int8-sq75", "int8-sq75-r7") and "quantization" not in real_encoder.origin()
    check_origin(current, current, tmp_path)
    earlier = {k: v for k, v in current.items() if k != "quantization"}
    with pytest.raises(OriginMismatchError, match=f"quantization: index has None, configured '{scheme}'") as caught:
        check_origin(earlier, current, tmp_path)
    assert "--rebuild" in caught.value.fix


def test_fast_queries_on_an_exact_index_use_the_int8_model_for_queries_only(real_encoder, fast_encoder, fast_cache: Path) -> None:
    """encoder.fast_queries: queries through the (cached) int8 model, documents exact, the index's origin unchanged."""
    from lodex.encoders.settings import EncoderSettings
    from lodex.encoders.transformers_encoder import TransformersEncoder

    encoder = TransformersEncoder(EncoderSettings(cache_dir=str(fast_cache), fast_queries=True, precision="exact"))
    # every 8th of ~200 real chunks, of all three collections and mixed lengths: an int8 document would be off by ~1e-2
    # on each, so equality to 1e-5 on these shows the documents stay exact (the fidelity test above encodes ~400)
    texts = _real_chunks(real_encoder, per_collection=25)[::8]
    assert np.allclose(encoder.embed(texts, kind="document"), real_encoder.embed(texts, kind="document"), atol=1e-5)
    queries = ["heat transfer in hypersonic flow", "information retrieval evaluation", "blood pressure in children"]
    ours, exact = encoder.embed(queries, kind="query"), real_encoder.embed(queries, kind="document")  # no prefixes: exact
    fast = fast_encoder.embed(queries, kind="query")
    if fast_encoder.fast_path.scheme == "int8-sq75":
        assert np.allclose(ours, fast, atol=1e-5)  # the fast model's vectors
    else:  # this CPU's fast documents run the 7-bit weights (measured fastest); queries keep the 8-bit model
        assert (ours * fast).sum(axis=1).min() >= 0.99
    assert not np.allclose(ours, exact, atol=1e-4) and (ours * exact).sum(axis=1).min() >= 0.97
    assert encoder.origin() == real_encoder.origin()  # an exact index: opened by either setting
    assert encoder._queries.path.name.endswith("-int8-sq75.onnx") and len(list(fast_cache.glob("*-int8-sq75.onnx"))) == 1
