"""Layer-streamed encoding: the same vectors as the model in memory (BERT, ModernBERT, LFM2, Qwen3 stacks), spilled
activations, compressed layer caches checked and rebuilt, and an index built and searched with a streamed model."""

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from lodex.encoders.errors import ModelError
from lodex.encoders.layer_stream import SPILL_PREFIX
from lodex.encoders.settings import EncoderSettings
from lodex.encoders.transformers_encoder import TransformersEncoder
from lodex.store.errors import ConfigError
from tests.tiny_models import KINDS, tiny_model
from tests.waiting import Wake, wait_until

TEXTS = [
    "a",
    "Swept wings at transonic speed: lift, drag and buffeting measured in the tunnel.",
    "Boundary layers. " * 40,
    "heat transfer",
    "The flow over a flat plate " * 8,
    "shock",
]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny random model of each kind, 3 layers (LFM2: conv, attention, conv)."""
    root = tmp_path_factory.mktemp("models")
    return {kind: tiny_model(kind, root / kind, layers=3, seed=1) for kind in KINDS}


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def _encoder(model: Path, tmp_path: Path, **settings) -> TransformersEncoder:  # noqa: ANN003 - EncoderSettings fields
    settings.setdefault("precision", "exact")
    cfg = EncoderSettings(model=str(model), cache_dir=str(tmp_path / "cache"), batch_tokens=256, **settings)
    return TransformersEncoder(cfg, spill_dir=tmp_path / "data")


@pytest.mark.parametrize("kind", KINDS)
def test_streamed_vectors_equal_in_memory_ones(models: dict[str, Path], kind: str, tmp_path: Path) -> None:
    reference = _encoder(models[kind], tmp_path).embed(TEXTS)
    streamed = _encoder(models[kind], tmp_path, stream_layers=True)
    assert streamed.group_tokens > 0 and streamed.origin() == _encoder(models[kind], tmp_path).origin()
    assert len(streamed.plan_batches(streamed.token_lengths(TEXTS))) > 1  # several batches of mixed lengths, each layer once
    out = streamed.embed(TEXTS)
    assert _cosines(out, reference).min() >= 0.9999
    assert _cosines(streamed.embed(TEXTS[:1], kind="query"), reference[:1]).min() >= 0.9999  # queries stream too
    alone = streamed.embed([TEXTS[1], TEXTS[2]])  # nothing leaks between sequences of a batch, nor from padding (LFM2's conv)
    assert _cosines(alone, out[1:3]).min() >= 0.9999


@pytest.mark.parametrize("kind", KINDS)
def test_int8_layers_keep_the_fidelity_gate_and_are_recorded_in_the_origin(models: dict[str, Path], kind: str, tmp_path: Path) -> None:
    reference = _encoder(models[kind], tmp_path).embed(TEXTS)
    int8 = _encoder(models[kind], tmp_path, stream_layers=True, layer_weights="int8")
    assert _cosines(int8.embed(TEXTS), reference).mean() >= 0.99
    assert int8.origin()["layer_weights"] == "int8"
    manifest = json.loads(next((tmp_path / "cache" / "layers").glob("*-int8/manifest.json")).read_text())
    assert manifest["agreement"] >= 0.99 and len(manifest["layers"]) == 3


def test_int4_layers_are_measured_and_gated(models: dict[str, Path], tmp_path: Path) -> None:
    reference = _encoder(models["qwen3"], tmp_path).embed(TEXTS)
    try:
        int4 = _encoder(models["qwen3"], tmp_path, stream_layers=True, layer_weights="int4")
    except ModelError as exc:  # below the gate: refused, pointing at int8
        assert "int4 layers do not reproduce the model" in exc.one_line() and 'layer_weights = "int8"' in exc.one_line()
        return
    assert _cosines(int4.embed(TEXTS), reference).mean() >= 0.99


def test_activations_beyond_the_budget_spill_to_disk_and_are_removed(
    models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lodex.encoders import layer_stream

    reference = _encoder(models["modernbert"], tmp_path).embed(TEXTS)
    leftover = tmp_path / "data" / f"{SPILL_PREFIX}999999999-1.bin"  # from a killed run
    leftover.parent.mkdir(parents=True)
    leftover.write_bytes(b"x" * 100)
    streamed = _encoder(models["modernbert"], tmp_path, stream_layers=True, memory_budget_mb=1)
    assert not leftover.exists()
    spilled = []
    put = layer_stream.Activations.put
    monkeypatch.setattr(layer_stream.Activations, "put", lambda self, i, h: (spilled.append(self.path), put(self, i, h)))
    assert _cosines(streamed.embed(TEXTS), reference).min() >= 0.9999
    assert spilled and all(p is not None and p.parent == tmp_path / "data" for p in spilled)
    assert not list((tmp_path / "data").glob(f"{SPILL_PREFIX}*"))


def test_streaming_is_chosen_when_the_weights_exceed_the_budget(models: dict[str, Path], tmp_path: Path, caplog) -> None:
    from lodex.encoders.layer_stream import StreamedModel

    with caplog.at_level(logging.INFO, logger="lodex.encoders.layer_stream"):
        encoder = _encoder(models["bert"], tmp_path, memory_budget_mb=1)
    assert isinstance(encoder.model, StreamedModel) and "exceed the memory budget (1 MiB)" in caplog.text
    assert not isinstance(_encoder(models["bert"], tmp_path, memory_budget_mb=1000).model, StreamedModel)


def _break(cache: Path, how: str) -> str:
    if how == "layer file deleted":
        (cache / "layer-0001.safetensors").unlink()
        return "layer 1: file missing"
    if how == "shape changed":
        from safetensors.torch import load_file, save_file

        tensors = load_file(str(cache / "layer-0002.safetensors"))
        name = min(n for n in tensors if n.endswith(".scale"))
        tensors[name] = tensors[name][:-1].clone()
        save_file(tensors, str(cache / "layer-0002.safetensors"))
        return f"layer 2: {name} has shape"
    if how == "killed before its manifest":
        (cache / "manifest.json").unlink()
        (cache.parent / f"{cache.name}.tmp-999999999").mkdir()  # the killed build's own folder
        return "incomplete (no manifest)"
    manifest = json.loads((cache / "manifest.json").read_text())
    (cache / "manifest.json").write_text(json.dumps(manifest | {"fingerprint": "0123456789abcdef"}))
    return "built from other weights"


@pytest.fixture(scope="module")
def int8_cache(models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    """bert's int8 layer cache (a model cache folder), built once, and the vectors of TEXTS through it: each broken-cache
    case below breaks a copy of its own."""
    base = tmp_path_factory.mktemp("int8-bert")
    first = _encoder(models["bert"], base, stream_layers=True, layer_weights="int8").embed(TEXTS)
    return base / "cache", first


@pytest.mark.parametrize("how", ["layer file deleted", "shape changed", "fingerprint changed", "killed before its manifest"])
def test_a_broken_layer_cache_is_detected_and_rebuilt(
    models: dict[str, Path], int8_cache: tuple[Path, np.ndarray], tmp_path: Path, how: str, caplog
) -> None:
    built, first = int8_cache
    shutil.copytree(built, tmp_path / "cache")
    cache = next((tmp_path / "cache" / "layers").glob("*-int8"))
    message = _break(cache, how)
    with caplog.at_level(logging.WARNING, logger="lodex.encoders.layer_cache"):
        again = _encoder(models["bert"], tmp_path, stream_layers=True, layer_weights="int8").embed(TEXTS)
    assert message in caplog.text and "rebuilding it" in caplog.text
    np.testing.assert_allclose(again, first, atol=1e-6)
    assert not list(cache.parent.glob("*.tmp-*"))


def test_fast_precision_with_streaming_is_refused_with_the_fix(models: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        _encoder(models["bert"], tmp_path, stream_layers=True, precision="fast")
    assert 'encoder.layer_weights = "int8"' in caught.value.one_line() and "\n" not in caught.value.one_line()


def test_index_and_search_with_a_streamed_model(models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lodex.api.cli import app

    monkeypatch.chdir(tmp_path)
    root = tmp_path / "docs"
    root.mkdir()
    (root / "wings.md").write_text("Swept wings at transonic speed: lift, drag and buffeting. " * 20)
    (root / "heat.txt").write_text("Heat transfer in a laminar boundary layer over a flat plate. " * 20)
    for key, value in {"MODEL": str(models["bert"]), "STREAM_LAYERS": "true", "CACHE_DIR": str(tmp_path / "cache")}.items():
        monkeypatch.setenv(f"LODEX_ENCODER__{key}", value)
    runner = CliRunner()
    result = runner.invoke(app, ["index", str(root), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["added"] == 2
    body = json.loads(runner.invoke(app, ["search", "Heat transfer in a laminar boundary layer", "-k", "2", "--json", "--mode", "dense"]).stdout)
    assert body["results"][0]["path"] == "heat.txt"
    assert not list((tmp_path / ".lodex").glob(f"{SPILL_PREFIX}*"))


@pytest.mark.slow
def test_a_kill_mid_group_leaves_nothing_that_breaks_the_restart(models: dict[str, Path], tmp_path: Path) -> None:
    """`lodex index` killed (-9) while a streamed group is in its layers: the restart removes the spill file and
    converges to the folder, each chunk's vector its text's in-memory encoding."""
    import os
    import subprocess
    import sys

    from lodex.store.lance_store import LanceStore
    from tests.invariants import check_index

    root, data = tmp_path / "docs", tmp_path / "data"
    root.mkdir()
    for i in range(16):
        (root / f"doc-{i:03d}.txt").write_text(" ".join(f"word{i}x{j} flow" for j in range(100)))
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
        "LODEX_DATA_DIR": str(data),
        "LODEX_ENCODER__MODEL": str(models["modernbert"]),
        "LODEX_ENCODER__STREAM_LAYERS": "true",
        "LODEX_ENCODER__MEMORY_BUDGET_MB": "1",
        "LODEX_ENCODER__CACHE_DIR": str(tmp_path / "cache"),
        "LODEX_CHUNKING__LATE": "false",
    }  # each chunk its own encoding: checked below
    command = [sys.executable, "-m", "lodex.api.cli", "index", str(root), "--json"]
    with Wake(data) as spilled:  # watching before it starts: the file's creation wakes the wait at once
        proc = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:  # caught in its layers: as soon as it spills (the window is short)
            wait_until(lambda: list(data.glob(f"{SPILL_PREFIX}*")) or proc.poll() is not None, spilled, 120, "the run to spill activations")
        finally:
            proc.kill()
    assert proc.wait() == -9 and list(data.glob(f"{SPILL_PREFIX}*")), "the run was not caught in its layers"
    restart = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert restart.returncode == 0, restart.stderr[-2000:]
    assert json.loads(restart.stdout)["added"] == 16 and not list(data.glob(f"{SPILL_PREFIX}*"))
    encoder = _encoder(models["modernbert"], tmp_path)
    check_index(LanceStore(data, encoder.dim), root, persisted=True, encoder=encoder)


@pytest.mark.parametrize("kind", ["bert", "qwen3"])
def test_late_chunking_windows_stream_too(models: dict[str, Path], kind: str, tmp_path: Path) -> None:
    """Late chunking's windows go through a streamed model all at once (each layer read once) and pool as in memory."""
    from lodex.indexer.chunking.chunker import Chunker
    from lodex.indexer.chunking.late_chunking import plan_windows

    text = "\n\n".join(TEXTS * 3)
    memory, streamed = _encoder(models[kind], tmp_path), _encoder(models[kind], tmp_path, stream_layers=True)
    chunks = Chunker(memory.token_spans, 24, 4).chunk(text)
    windows = plan_windows(text, chunks, memory.token_spans, 96 - memory.special_tokens, 8)
    assert len(streamed.plan_batches([w.tokens + 2 for w in windows])) > 1
    for ours, reference in zip(streamed.embed_windows(windows), memory.embed_windows(windows)):
        assert _cosines(ours, reference).min() >= 0.9999


def test_model_check_of_a_streamed_model(models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lodex.api.cli import app

    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.toml").write_text("[encoder]\nstream_layers = true\nmemory_budget_mb = 300\n")
    result = CliRunner().invoke(app, ["model", "check", str(models["qwen3"]), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["streamed"] and report["memory_mb"]["streamed"] == 300 and 0 < report["memory_mb"]["largest_layer"] < 1
    assert report["parameters"] > 1e6 and report["tokens_per_s"]["exact"] > 0
    assert not report["fast_mode"]["available"] and "layer-streamed" in report["fast_mode"]["reason"]
    text = CliRunner().invoke(app, ["model", "check", str(models["qwen3"])]).stdout
    assert "layer-streamed within 300 MB (encoder.memory_budget_mb; largest layer" in text
