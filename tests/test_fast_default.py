"""encoder.precision = "auto" (the default): a new index is encoded in fast mode where its int8 path is faithful, an
existing index keeps the precision it was built with, and a refused fast path falls back to exact with the reason."""

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from lodex.api.cli import app
from lodex.encoders.settings import EncoderSettings
from lodex.store.errors import LodexError
from tests.tiny_models import tiny_model

pytestmark = pytest.mark.slow

TEXTS = {
    "wings.txt": "Swept wings at transonic speed: lift, drag and buffeting of the wing in the wind tunnel.",
    "blood.txt": "Blood pressure in children: measurements at rest and after exercise, by age group.",
}


def _folder(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    for name, text in TEXTS.items():
        (root / name).write_text(text)
    return root


def _origin(tmp_path: Path) -> dict:
    return json.loads((tmp_path / ".lodex" / "origin.json").read_text())


def test_the_default_is_auto_and_a_new_index_is_fast(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fast_cache: Path) -> None:
    assert EncoderSettings().precision == "auto"
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LODEX_ENCODER__PRECISION")  # the default, as users get it
    monkeypatch.setenv("LODEX_ENCODER__CACHE_DIR", str(fast_cache))
    root, runner = _folder(tmp_path), CliRunner()
    result = runner.invoke(app, ["index", str(root), "--json"])
    assert result.exit_code == 0, result.output
    assert "int8 ONNX Runtime (documents and queries)" in result.output
    origin = _origin(tmp_path)
    assert origin["precision"] == "fast" and origin["quantization"]
    found = runner.invoke(app, ["search", "swept wing buffeting", "--json"])
    assert found.exit_code == 0, found.output
    assert json.loads(found.stdout)["results"][0]["path"].endswith("wings.txt")
    (root / "late.txt").write_text("Heat transfer to a blunt body in hypersonic flow.")
    assert json.loads(runner.invoke(app, ["index", str(root), "--json"]).stdout)["added"] == 1  # updates stay fast
    assert _origin(tmp_path)["precision"] == "fast"


def test_an_exact_index_stays_exact_under_auto(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fast_cache: Path, real_encoder) -> None:
    """An index built before the default changed (exact) opens and updates exactly: same origin, fp32 vectors."""
    from lodex.api.factory import open_reader
    from lodex.api.settings import load_settings
    from lodex.store.lance_store import vectors_of

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LODEX_ENCODER__CACHE_DIR", str(fast_cache))
    root, runner = _folder(tmp_path), CliRunner()
    assert runner.invoke(app, ["index", str(root)]).exit_code == 0  # conftest pins exact: the old default
    assert _origin(tmp_path)["precision"] == "exact"
    monkeypatch.delenv("LODEX_ENCODER__PRECISION")
    (root / "late.txt").write_text("Heat transfer to a blunt body in hypersonic flow.")
    result = runner.invoke(app, ["index", str(root), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["added"] == 1 and "fp32 PyTorch for documents" in result.output
    assert _origin(tmp_path)["precision"] == "exact" and "quantization" not in _origin(tmp_path)
    store = open_reader(load_settings(None), real_encoder.dim)
    rows = store.chunks.search().select(["text", "vector"]).limit(None).to_arrow()
    texts, vectors = rows["text"].to_pylist(), vectors_of(rows)
    late = texts.index("Heat transfer to a blunt body in hypersonic flow.")
    assert np.allclose(vectors[late], real_encoder.embed([texts[late]])[0], atol=1e-5)  # encoded exactly
    assert runner.invoke(app, ["search", "hypersonic heat transfer", "--json"]).exit_code == 0


def test_a_refused_fast_path_falls_back_to_exact_with_the_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model whose int8 export does not pass the fidelity gate: "auto" encodes exactly and says why; "fast" refuses."""
    import lodex.encoders.fast_mode as fast_mode
    import lodex.encoders.transformers_encoder as module

    model = tiny_model("bert", tmp_path / "model")
    monkeypatch.setattr(fast_mode, "FAST_GATE", 1.01)  # no int8 export can pass: as on a CPU whose int8 kernels saturate
    cfg = EncoderSettings(model=str(model), cache_dir=str(tmp_path / "cache"))
    encoder = module.TransformersEncoder(cfg)
    assert encoder.precision == "exact" and encoder.origin()["precision"] == "exact" and "quantization" not in encoder.origin()
    assert "fast mode refused: the int8 ONNX export does not reproduce the model" in encoder.runtime()
    assert encoder.parallel_calls == 1 and encoder.batch_tokens == cfg.batch_tokens
    vectors = encoder.embed(["a few words", "and a few more words here"])
    assert vectors.shape == (2, encoder.dim) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    with pytest.raises(LodexError, match="does not reproduce"):
        module.TransformersEncoder(cfg.model_copy(update={"precision": "fast"}))


def test_auto_takes_exact_for_a_layer_streamed_model(tmp_path: Path) -> None:
    from lodex.encoders.transformers_encoder import TransformersEncoder

    model = tiny_model("bert", tmp_path / "model")
    encoder = TransformersEncoder(
        EncoderSettings(model=str(model), cache_dir=str(tmp_path / "cache"), stream_layers=True), spill_dir=tmp_path / "data"
    )
    assert encoder.precision == "exact" and "layer-streamed" in encoder.runtime()
