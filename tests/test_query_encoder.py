"""Queries without PyTorch: the recipe the full encoder leaves gives the same query vectors through ONNX Runtime and
the tokenizers library alone, and a cold `lodex search` uses it (no torch import)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lodex.encoders.query_encoder import load_query_encoder, recipe_path
from lodex.encoders.settings import EncoderSettings
from lodex.encoders.transformers_encoder import TransformersEncoder
from tests.test_serve import REPO
from tests.tiny_models import tiny_model, tokenizer_options

QUERIES = ["swept wings", "How is drag measured in a transonic wind tunnel? " * 4, "a", "x" * 600, "Ünïcödé — 日本語のクエリ"]


@pytest.mark.parametrize(("kind", "fast_queries"), [("bert", True), ("bert", False), ("qwen3-left-eos", True)])
def test_the_recipe_encodes_queries_exactly_as_the_full_encoder(tmp_path: Path, kind: str, fast_queries: bool) -> None:
    model = tiny_model(kind.split("-")[0], tmp_path / "model")
    if kind == "qwen3-left-eos":
        tokenizer_options(model, padding_side="left", special_tokens=False)
    cfg = EncoderSettings(model=str(model), fast_queries=fast_queries, cache_dir=str(tmp_path / "cache"), precision="exact")
    assert load_query_encoder(cfg) is None  # nothing cached yet: the full encoder is needed
    full = TransformersEncoder(cfg)
    expected = full.embed(QUERIES, kind="query")  # loads (and checks) the ONNX query model, which leaves the recipe
    light = load_query_encoder(cfg)
    assert light is not None and light.origin() == full.origin() and light.max_length == full.max_length
    assert np.abs(light.embed(QUERIES, kind="query") - expected).max() < 1e-6
    assert load_query_encoder(cfg.model_copy(update={"query_prefix": "query: "})) is None  # other settings, other recipe
    weights = bytearray((model / "model.safetensors").read_bytes())
    weights[300_000:300_008] = bytes(8)  # other weights (within the first MiB, which the model's fingerprint reads)
    (model / "model.safetensors").write_bytes(bytes(weights))
    assert load_query_encoder(cfg) is None  # the recipe is not theirs


def test_a_broken_recipe_is_ignored(tmp_path: Path) -> None:
    model = tiny_model("bert", tmp_path / "model")
    cfg = EncoderSettings(model=str(model), cache_dir=str(tmp_path / "cache"), precision="exact")
    TransformersEncoder(cfg).embed(["warm"], kind="query")
    recipe = next((tmp_path / "cache" / "queries").glob("*.json"))
    recipe.write_text("{broken")
    assert load_query_encoder(cfg) is None
    TransformersEncoder(cfg).embed(["warm"], kind="query")  # written again
    Path(json.loads(recipe.read_text())["onnx"]).unlink()
    assert load_query_encoder(cfg) is None


@pytest.mark.slow
def test_a_cold_search_loads_no_pytorch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The index and a first search run here (the search loads the full encoder, exports the query model and leaves its
    recipe, as any earlier lodex process would); a second `lodex search`, a process of its own, finds the same results
    without importing torch."""
    from typer.testing import CliRunner

    from lodex.api.cli import app

    model = tiny_model("bert", tmp_path / "model")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "wings.txt").write_text("Swept wings delay the drag rise at transonic Mach numbers.")
    env = {
        "LODEX_ENCODER__MODEL": str(model),
        "LODEX_ENCODER__CACHE_DIR": str(tmp_path / "cache"),
        "LODEX_DATA_DIR": str(tmp_path / "data"),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(REPO)  # where the second search runs too
    cfg = EncoderSettings(model=str(model), cache_dir=str(tmp_path / "cache"))
    runner = CliRunner()
    assert runner.invoke(app, ["index", str(docs)]).exit_code == 0
    assert not recipe_path(cfg, "x").parent.exists()  # indexing left no recipe: the first search makes it
    first = runner.invoke(app, ["search", "drag rise", "--local", "--json"])
    assert first.exit_code == 0, first.output
    assert recipe_path(cfg, "x").parent.is_dir()
    second = subprocess.run(
        [sys.executable, "-c", _PROBE, "search", "drag rise", "--local", "--json"],
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert second.returncode == 0, second.stderr
    assert "torch loaded: False" in second.stderr
    assert json.loads(first.stdout)["results"] == json.loads(second.stdout)["results"]


_PROBE = """
import sys
from lodex.api.cli import main
sys.argv = ["lodex", *sys.argv[1:]]
try:
    main()
finally:
    print("torch loaded:", "torch" in sys.modules, file=sys.stderr)
"""
