"""Models beyond the bundled one: each architecture end to end, decoder pooling, prompts and EOS, `lodex model check`."""

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from lodex.api.cli import app
from lodex.encoders.errors import ModelError
from lodex.encoders.settings import EncoderSettings
from tests.tiny_models import KINDS, sentence_transformers_files, tiny_model, tokenizer_options

runner = CliRunner()
TEXTS = [
    "a",
    "lift and drag",
    "Swept wings at transonic speed: lift, drag and buffeting of thin wings in a wind tunnel.",
    "Heat transfer through a hypersonic boundary layer " * 4,
    "boundary layer",
]
QUERY_PROMPT = "Instruct: Given a question, retrieve passages that answer it\nQuery: "


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One tiny random model of each architecture, built once."""
    base = tmp_path_factory.mktemp("models")
    return {kind: tiny_model(kind, base / kind, seed=i) for i, kind in enumerate(KINDS)}


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx-cache")


@pytest.fixture(autouse=True)
def shared_cache(onnx_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ONNX exports of every test in one cache: a model (or a copy of its weights) is exported once."""
    monkeypatch.setenv("LODEX_ENCODER__CACHE_DIR", str(onnx_cache))


def _copy(source: Path, tmp_path: Path, name: str = "model") -> Path:
    return Path(shutil.copytree(source, tmp_path / name))


def _encoder(path: Path, **settings):  # noqa: ANN202
    from lodex.encoders.transformers_encoder import TransformersEncoder

    settings.setdefault("precision", "exact")
    return TransformersEncoder(EncoderSettings(model=str(path), cache_dir=os.environ["LODEX_ENCODER__CACHE_DIR"], **settings))


def _reference(path: Path, texts: list[str], eos: int | None = None) -> np.ndarray:
    """By hand: each text alone (no padding) through AutoModel, the last token's hidden state, L2-normalized."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(str(path)), AutoModel.from_pretrained(str(path)).eval()
    rows = []
    for text in texts:
        ids = tokenizer(text)["input_ids"] + ([eos] if eos is not None else [])
        with torch.inference_mode():
            hidden = model(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long)).last_hidden_state
        rows.append(hidden[0, -1].numpy())
    out = np.stack(rows)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


@pytest.mark.parametrize("kind", KINDS)
def test_each_architecture_indexes_and_searches_end_to_end(
    kind: str, models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LODEX_ENCODER__MODEL", str(models[kind]))
    root = tmp_path / "docs"
    root.mkdir()
    for i, text in enumerate(TEXTS[2:]):
        (root / f"doc{i}.txt").write_text(text)
    result = runner.invoke(app, ["index", str(root), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["added"] == 3
    origin = json.loads((tmp_path / ".lodex" / "origin.json").read_text())
    assert origin["model_id"] == kind and origin["pooling"] == ("last" if kind in ("lfm2", "qwen3") else "mean")
    result = runner.invoke(app, ["search", TEXTS[2], "--mode", "dense", "-k", "3", "--json"])  # a document's own text finds it first
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["results"][0]["path"] == "doc0.txt"


@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize("special_tokens", [True, False])
def test_decoder_vectors_are_the_last_real_tokens_hidden_state(
    padding_side: str, special_tokens: bool, models: dict[str, Path], tmp_path: Path
) -> None:
    """Qwen3 (last token by default for decoders): mixed lengths in one padded batch, either padding side, with the
    tokenizer adding [SEP] itself or lodex appending the EOS config.json declares, equal the by-hand reference."""
    path = tokenizer_options(_copy(models["qwen3"], tmp_path), padding_side, special_tokens)
    encoder = _encoder(path)
    assert encoder.pooling == "last" and encoder.tokenizer.padding_side == padding_side
    assert encoder.eos_id == (None if special_tokens else 102) and encoder.origin().get("eos_token") == encoder.eos_id
    batch = encoder._tokenize(TEXTS, "np")  # one batch of mixed lengths, padded on the model's side, EOS after the last real token
    real = batch["input_ids"][batch["attention_mask"] == 1]
    assert (batch["attention_mask"][:, 0 if padding_side == "right" else -1] == 1).all() and (batch["attention_mask"] == 0).any()
    assert (real == 102).sum() == len(TEXTS)
    ours = encoder.embed(TEXTS)
    assert np.abs(ours - _reference(path, TEXTS, encoder.eos_id)).max() < 1e-5
    assert (
        np.abs(encoder._query_batch(TEXTS) / np.linalg.norm(encoder._query_batch(TEXTS), axis=1, keepdims=True) - ours).max() < 0.1
    )  # the int8 query model pools the same token (a wrong token would be far off)


def test_append_eos_settings(models: dict[str, Path], tmp_path: Path) -> None:
    plain = tokenizer_options(_copy(models["qwen3"], tmp_path), special_tokens=False)
    assert _encoder(plain, append_eos="never").eos_id is None
    assert _encoder(plain, append_eos="never").special_tokens == 0
    assert _encoder(plain).special_tokens == 1  # chunks leave room for the appended EOS
    other = _copy(models["qwen3"], tmp_path, "other-eos")  # Qwen3-Embedding's case: its tokenizer ends inputs with a token
    config = other / "config.json"  # other than the one its tokenizer calls eos_token: kept as it is
    config.write_text(json.dumps(json.loads(config.read_text()) | {"eos_token_id": 999}))
    assert _encoder(other).eos_id is None and _encoder(other).special_tokens == 2
    bert = tokenizer_options(_copy(models["bert"], tmp_path, "bert"), special_tokens=False)
    assert _encoder(bert).eos_id is None  # an encoder: nothing appended unless asked
    with pytest.raises(ModelError, match="declares no end-of-sequence token"):
        _encoder(bert, append_eos="always")


def test_the_models_query_prompt_goes_to_queries_only(models: dict[str, Path], tmp_path: Path) -> None:
    path = sentence_transformers_files(_copy(models["qwen3"], tmp_path), "last", {"query": QUERY_PROMPT, "document": ""})
    encoder = _encoder(path, fast_queries=False)
    assert (encoder.query_prefix, encoder.document_prefix) == (QUERY_PROMPT, "")
    assert encoder.origin()["query_prefix"] == QUERY_PROMPT
    query, document = "lift of swept wings", TEXTS[2]
    assert np.abs(encoder.embed_query(query) - _reference(path, [QUERY_PROMPT + query])[0]).max() < 1e-5
    assert np.abs(encoder.embed([document])[0] - _reference(path, [document])[0]).max() < 1e-5
    ours = _encoder(path, query_prefix="query: ", document_prefix="passage: ")  # lodex's config wins
    assert (ours.query_prefix, ours.document_prefix) == ("query: ", "passage: ")


def test_pooling_precedence(models: dict[str, Path], tmp_path: Path) -> None:
    from lodex.encoders.model_info import read_model_dir

    path = _copy(models["qwen3"], tmp_path)
    assert read_model_dir(path).pooling("auto").source == "default for decoder architectures (last token)"
    assert read_model_dir(models["bert"]).pooling("auto").value == "mean"
    sentence_transformers_files(path, "mean")
    assert (read_model_dir(path).pooling("auto").value, read_model_dir(path).pooling("auto").source) == ("mean", "1_Pooling/config.json")
    assert read_model_dir(path).pooling("cls").source == "lodex config encoder.pooling"
    sentence_transformers_files(path, "max")
    with pytest.raises(ModelError, match="pooling lodex does not support"):
        read_model_dir(path).pooling("auto")


@pytest.mark.parametrize("kind", KINDS)
def test_each_architecture_passes_the_fast_mode_gate(kind: str, models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """LFM2 (short convolutions and attention), ModernBERT and Qwen3 export to int8 ONNX and pass the same gate as BERT;
    a start that measures its paths runs PyTorch over the calibration texts once for all of them (smoothing's ranges and
    the fidelity reference; again only where the encoder's inputs differ from the export pass's) and over the check
    texts once."""
    import lodex.encoders.fast_mode as fast_mode
    from lodex.encoders.smoothing import calibration_batches
    from lodex.encoders.transformers_encoder import TransformersEncoder

    exact, passes = _encoder(models[kind]), {"calibration": 0, "torch": 0}

    def counted(name: str, run):  # noqa: ANN001, ANN202
        def call(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            passes[name] += 1
            return run(*args, **kwargs)

        return call

    monkeypatch.setenv("LODEX_ENCODER__CACHE_DIR", str(tmp_path))  # a cache of its own: this start exports (earlier tests'
    # int8 query models of these weights lie in the module's cache)
    with monkeypatch.context() as patch:
        patch.setattr(fast_mode, "input_ranges", counted("calibration", fast_mode.input_ranges))
        patch.setattr(TransformersEncoder, "_torch_batch", counted("torch", TransformersEncoder._torch_batch))
        fast = _encoder(models[kind], precision="fast")
    assert fast.fast_source == "measured now" and fast.fast_trials
    # the calibration pass's outputs are the reference where it feeds the model what the encoder feeds it: not for the
    # decoders, whose tokenizer's token_type_ids (which they do not declare) the export's pass hands them too
    again = 0 if kind in ("bert", "modernbert") else len(calibration_batches())
    assert passes == {"calibration": 1, "torch": 1 + again}, passes
    assert fast._fast is not None and fast.fast_path is not None
    # the path measured fastest on this CPU: 7-bit weights can win where int8 may saturate (AVX2 without VNNI)
    assert fast.origin()["quantization"] == fast.fast_path.scheme in ("int8-sq75", "int8-sq75-r7")
    cosines = (exact.embed(TEXTS) * fast.embed(TEXTS)).sum(axis=1)
    assert cosines.min() >= 0.95, cosines


def test_a_model_whose_export_fails_is_refused_in_fast_mode(models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import lodex.encoders.fast_mode as fast_mode

    def failing(*args, **kwargs):
        raise RuntimeError("Exporting the operator 'aten::unsupported' to ONNX opset version 17 is not supported")

    monkeypatch.setattr(fast_mode, "load_onnx_model", failing)
    with pytest.raises(ModelError, match="fast mode is not available .* export failed .*aten::unsupported") as caught:
        _encoder(models["lfm2"], precision="fast", fast_path="int8")  # a named path: exported, not measured first
    assert 'precision = "exact"' in caught.value.fix


def _check(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["model", "check", *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("kind", ["lfm2", "qwen3"])
def test_model_check_of_a_tiny_decoder(kind: str, models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = sentence_transformers_files(_copy(models[kind], tmp_path), None, {"query": QUERY_PROMPT})
    code, out, _ = _check(str(path), "--json")
    assert code == 0, out
    report = json.loads(out)
    assert (report["kind"], report["dim"], report["window"]["value"], report["model_type"]) == ("decoder", 64, 512, kind)
    assert report["pooling"] == {"value": "last", "source": "default for decoder architectures (last token)"}
    assert report["query_prefix"] == {"value": QUERY_PROMPT, "source": "config_sentence_transformers.json prompts['query']"}
    assert report["eos"] == {"value": None, "source": "the tokenizer ends inputs with token 102 itself"}
    assert report["fast_mode"]["available"] and report["fast_mode"]["min_cosine"] > 0.9 and report["tokens_per_s"]["fast"] > 0
    assert report["parameters"] > 0 and report["memory_mb"]["exact"] > report["memory_mb"]["weights"] > 0
    assert report["late_chunking"] == {"setting": "auto", "enabled": False, "window_limit": 512, "window_tokens": None}  # a new index
    monkeypatch.setenv("LODEX_CHUNKING__LATE", "true")  # a decoder pools each chunk's last token: it can late-chunk
    code, out, _ = _check(str(path))
    assert "late chunking   on, windows of 256 tokens (chunking.late = true; the model reads up to 512 tokens at once)" in out
    assert code == 0 and "pooling         last  ← default for decoder architectures (last token)" in out
    assert "fast mode       yes (int8 vs exact cosine mean" in out and "tokens/s        exact" in out


def test_model_check_uses_the_configured_model_and_overrides(models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.toml").write_text(f'[encoder]\nmodel = "{models["bert"]}"\npooling = "cls"\nquery_prefix = "query: "\n')
    code, out, _ = _check("--json")
    report = json.loads(out)
    assert code == 0 and report["model"] == str(models["bert"]) and report["kind"] == "encoder"
    assert report["pooling"] == {"value": "cls", "source": "lodex config encoder.pooling"}
    assert report["query_prefix"] == {"value": "query: ", "source": "lodex config encoder.query_prefix"}


def _broken(models: dict[str, Path], tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Directories lodex cannot use, each with the reason `model check` must give."""
    cases: dict[str, tuple[Path, str]] = {}

    def case(name: str, reason: str) -> Path:
        path = _copy(models["qwen3"], tmp_path, name)
        cases[name] = (path, reason.format(path=path))
        return path

    (case("no-config", "no model found in {path} (config.json missing)") / "config.json").unlink()
    (case("bad-json", "{path}/config.json is not valid JSON") / "config.json").write_text("{not json")
    config = case("unknown", "unsupported architecture in {path}: model_type 'fancynet' is not one transformers") / "config.json"
    config.write_text(json.dumps(json.loads(config.read_text()) | {"model_type": "fancynet"}))
    (case("no-weights", "the model in {path} has no weights (no model.safetensors or pytorch_model.bin)") / "model.safetensors").unlink()
    weights = case("truncated", "the weights file {path}/model.safetensors is truncated") / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    (case("no-tokenizer", "the model in {path} has no fast tokenizer (tokenizer.json missing)") / "tokenizer.json").unlink()
    config = case("other-shapes", "the weights in {path} do not fit its config.json (tensors of other shapes)") / "config.json"
    config.write_text(json.dumps(json.loads(config.read_text()) | {"intermediate_size": 96}))
    weights = (
        case(
            "missing-tensor",
            "the weights in {path} do not fit its config.json (1 tensors missing, 0 of other shapes; e.g. layers.1.mlp.down_proj.weight)",
        )
        / "model.safetensors"
    )
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(weights))
    del tensors["layers.1.mlp.down_proj.weight"]
    save_file(tensors, str(weights), metadata={"format": "pt"})
    weights = case("pickled", "the weights file pytorch_model.bin in {path} holds pickled Python objects, not plain tensors") / "model.safetensors"
    _pickle_weights(weights)
    return cases


class _RunsCode:
    """An object whose unpickling calls a function: what a hostile pytorch_model.bin holds (here a harmless os.getcwd)."""

    def __reduce__(self) -> tuple:
        return (os.getcwd, ())


def _pickle_weights(safetensors_file: Path) -> None:
    """Replace a model.safetensors with a pytorch_model.bin of the same tensors plus one object that runs code."""
    import torch
    from safetensors.torch import load_file

    tensors: dict = load_file(str(safetensors_file))
    safetensors_file.unlink()
    torch.save({**tensors, "hook": _RunsCode()}, safetensors_file.with_name("pytorch_model.bin"))


def test_model_check_of_broken_directories_gives_one_line(models: dict[str, Path], tmp_path: Path) -> None:
    for name, (path, reason) in _broken(models, tmp_path).items():
        code, out, err = _check(str(path))
        assert code == 2, (name, out, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {reason}"), (name, err)
        assert "Traceback" not in out + err
        code, out, _ = _check(str(path), "--json")
        error = json.loads(out)["error"]
        assert code == 2 and error["code"] == "model_error" and error["message"].startswith(reason), (name, error)


def test_a_broken_directory_is_refused_by_index_too(models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, reason = _broken(models, tmp_path)["truncated"]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LODEX_ENCODER__MODEL", str(path))
    (tmp_path / "docs").mkdir()
    result = runner.invoke(app, ["index", str(tmp_path / "docs")])
    assert result.exit_code == 2 and reason in result.stderr and "Traceback" not in result.output


def test_pickled_weights_are_a_model_error_with_the_fix(models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, reason = _broken(models, tmp_path)["pickled"]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LODEX_ENCODER__MODEL", str(path))
    (tmp_path / "docs").mkdir()
    result = runner.invoke(app, ["index", str(tmp_path / "docs")])
    assert result.exit_code == 2 and reason in result.stderr, result.output
    assert "convert the weights to safetensors" in result.stderr and "unexpected" not in result.output and "torch.load" not in result.output


def _measured_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """`model check` measures the model at its first call only; later calls print that report (as text, or as JSON):
    for a test that reads both forms of one check, the model loaded and measured once."""
    import lodex.api.cli.model_check as model_check

    reports: list[dict] = []
    measure = model_check.check_model

    def once(settings, directory):  # noqa: ANN001, ANN202 - check_model's own signature
        if not reports:
            reports.append(measure(settings, directory))
        return reports[0]

    monkeypatch.setattr(model_check, "check_model", once)


@pytest.mark.slow  # the bundled model: exact and int8 vectors of the probe texts measured
def test_model_check_of_the_bundled_model(fast_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's model cache, where its int8 export already lies (made once per run by fast_cache): the check loads it,
    gates it and measures it as on a fresh cache, without exporting the same model a second time (~20 s); its JSON and
    its text are of one measurement."""
    monkeypatch.setenv("LODEX_ENCODER__CACHE_DIR", str(fast_cache))
    _measured_once(monkeypatch)
    exports = sorted(fast_cache.glob("*.onnx"))
    code, out, _ = _check("--json")
    report = json.loads(out)
    assert code == 0 and report["model_id"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert (report["architecture"], report["kind"], report["dim"]) == ("BertModel", "encoder", 384)
    assert report["window"] == {"value": 256, "source": "sentence_bert_config.json max_seq_length"}
    assert report["pooling"] == {"value": "mean", "source": "1_Pooling/config.json"}
    assert report["fast_mode"]["available"] and report["fast_mode"]["mean_cosine"] >= 0.99
    assert 20e6 < report["parameters"] < 25e6 and report["memory_mb"]["int8_model"] < 30
    code, out, _ = _check()
    assert code == 0 and "architecture    BertModel (bert, encoder), 22.7M parameters, 384 dims" in out
    assert sorted(fast_cache.glob("*.onnx")) == exports  # the run's export served the check: nothing exported again


def test_model_check_says_why_fast_mode_is_not_available(models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import lodex.encoders.fast_mode as fast_mode
    import lodex.encoders.model_probe as probe

    monkeypatch.setattr(probe, "FAST_GATE", 1.01)  # no export can pass: the gate's reason
    code, out, _ = _check(str(models["lfm2"]))
    assert code == 0 and "fast mode       no — its int8 vectors keep a cosine of only 0.99" in out and "(fast mode needs 1.01); served exactly" in out

    def failing(*args, **kwargs):
        raise RuntimeError("Exporting the operator 'aten::unsupported' to ONNX is not supported")

    monkeypatch.setattr(fast_mode, "load_onnx_model", failing)
    monkeypatch.setenv("LODEX_ENCODER__PRECISION", "fast")
    _measured_once(monkeypatch)  # the JSON and the text below: one check
    code, out, _ = _check(str(models["lfm2"]), "--json")
    report = json.loads(out)
    assert code == 0 and report["fast_mode"]["available"] is False and report["tokens_per_s"]["fast"] is None
    assert (
        report["fast_mode"]["reason"]
        == "its int8 ONNX export failed (RuntimeError: Exporting the operator 'aten::unsupported' to ONNX is not supported)"
    )
    assert report["memory_mb"]["fast"] is None and report["configured_precision"] == "fast"
    code, out, _ = _check(str(models["lfm2"]))
    assert 'served exactly; encoder.precision = "fast" is refused: set it to "exact"' in out
