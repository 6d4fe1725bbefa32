"""`lodex model pull`: a tiny model fetched from a local stand-in for the hub — resumed after a dropped connection,
checked against the hub's hashes, refused when lodex cannot run it — then used offline by its id."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lodex.api.cli import app
from lodex.api.factory import build_encoder
from lodex.api.model.cache import cached_model, model_path
from lodex.api.model.pull import MANIFEST, pull_model
from lodex.api.settings import Settings
from lodex.encoders.errors import ModelError
from tests.hub_server import SHA, Hub, HubServer
from tests.tiny_models import sentence_transformers_files, tiny_model

MODEL_ID = "tiny-org/tiny-embedder"
WEIGHTS = "model.safetensors"


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tiny_model("bert", tmp_path_factory.mktemp("tiny") / "model")
    return sentence_transformers_files(path, pooling="mean")


@pytest.fixture
def online(monkeypatch: pytest.MonkeyPatch) -> None:
    """`lodex model pull` refuses to run under HF_HUB_OFFLINE: the tests lift it (the only hub they reach is local)."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)


def _settings(tmp_path: Path) -> Settings:
    settings = Settings(base_dir=tmp_path)
    settings.encoder.cache_dir = str(tmp_path / "cache")
    return settings


def test_pull_resumes_a_dropped_download_and_then_works_offline(
    tiny_dir: Path, tmp_path: Path, online: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _settings(tmp_path)
    half = len((tiny_dir / WEIGHTS).read_bytes()) // 2
    hub = Hub.from_folder(MODEL_ID, tiny_dir, drop={WEIGHTS: half})
    with HubServer(hub) as server:
        done = pull_model(MODEL_ID, settings.encoder, server.url)
        again = pull_model(MODEL_ID, settings.encoder, server.url)
    final = cached_model(settings.encoder, MODEL_ID)
    assert done["path"] == str(final) and done["revision"] == SHA and WEIGHTS in done["fetched"]
    assert hub.gets(WEIGHTS) == ["", f"bytes={half}-"]  # the second GET resumed where the first was cut off
    for name in ("config.json", "tokenizer.json", WEIGHTS, "modules.json", "1_Pooling/config.json"):
        assert (final / name).read_bytes() == (tiny_dir / name).read_bytes()
    assert json.loads((final / MANIFEST).read_text())["sha"] == SHA
    assert not list(final.rglob("*.incomplete")) and not list(final.parent.glob(".*.partial"))
    assert again["up_to_date"] and again["fetched"] == []
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the server is gone: the id now names the cached copy
    settings.encoder.model = MODEL_ID
    assert model_path(settings) == final
    vectors = build_encoder(settings).embed(["ein kleiner Test", "一个小测试"])
    assert vectors.shape == (2, 64)


def test_a_download_cut_off_in_one_run_resumes_in_the_next(tiny_dir: Path, tmp_path: Path, online: None) -> None:
    settings = _settings(tmp_path)
    cut = 1000
    hub = Hub.from_folder(MODEL_ID, tiny_dir, drop={WEIGHTS: cut}, drop_times=2)
    with HubServer(hub) as server:
        with pytest.raises(ModelError, match=f"cut off at {2 * cut} bytes") as cut_off:
            pull_model(MODEL_ID, settings.encoder, server.url, attempts=2)
        assert "run the same command again" in cut_off.value.fix
        assert not cached_model(settings.encoder, MODEL_ID).exists()
        pull_model(MODEL_ID, settings.encoder, server.url)
    assert hub.gets(WEIGHTS) == ["", f"bytes={cut}-", f"bytes={2 * cut}-"]
    assert (cached_model(settings.encoder, MODEL_ID) / WEIGHTS).read_bytes() == (tiny_dir / WEIGHTS).read_bytes()


@pytest.mark.parametrize("name", [WEIGHTS, "tokenizer.json"])  # an LFS file (sha256) and a plain one (git blob id)
def test_a_file_that_does_not_match_the_hubs_hash_is_refused(tiny_dir: Path, tmp_path: Path, online: None, name: str) -> None:
    settings = _settings(tmp_path)
    hub = Hub.from_folder(MODEL_ID, tiny_dir, corrupt={name})
    with HubServer(hub) as server, pytest.raises(ModelError, match=f"{name} does not match the hub's"):
        pull_model(MODEL_ID, settings.encoder, server.url)
    final = cached_model(settings.encoder, MODEL_ID)
    assert not final.exists() and not (final.with_name(f".{final.name}.partial") / name).exists()


def test_a_model_that_is_not_an_embedding_model_is_refused_before_its_weights(tiny_dir: Path, tmp_path: Path, online: None) -> None:
    settings = _settings(tmp_path)
    files = {n: b for n, b in Hub.from_folder(MODEL_ID, tiny_dir).files.items() if n not in ("modules.json", "1_Pooling/config.json")}
    hub = Hub(MODEL_ID, files, pipeline_tag="text-generation")
    with HubServer(hub) as server:
        with pytest.raises(ModelError, match="not an embedding model .*pipeline: text-generation") as refused:
            pull_model(MODEL_ID, settings.encoder, server.url)
        assert "--force" in refused.value.fix
        assert hub.gets(WEIGHTS) == []
        assert pull_model(MODEL_ID, settings.encoder, server.url, force=True)["fetched"]  # --force fetches it anyway


def test_an_architecture_lodex_cannot_build_is_refused_before_its_weights(tiny_dir: Path, tmp_path: Path, online: None) -> None:
    settings = _settings(tmp_path)
    hub = Hub.from_folder(MODEL_ID, tiny_dir)
    hub.files["config.json"] = json.dumps({"model_type": "no-such-architecture"}).encode()
    with HubServer(hub) as server, pytest.raises(ModelError, match=f"{MODEL_ID} cannot run in lodex: unsupported architecture in the model"):
        pull_model(MODEL_ID, settings.encoder, server.url)
    assert hub.gets(WEIGHTS) == []


def test_cli_pull_says_how_to_use_it_and_refuses_offline(tiny_dir: Path, tmp_path: Path, online: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LODEX_ENCODER__CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    with HubServer(Hub.from_folder(MODEL_ID, tiny_dir)) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        result = CliRunner().invoke(app, ["model", "pull", MODEL_ID, "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["path"].endswith("tiny-org--tiny-embedder")
        assert f'encoder.model = "{MODEL_ID}"' in result.stderr
        checked = CliRunner().invoke(app, ["model", "check", MODEL_ID, "--json"])
        assert checked.exit_code == 0 and json.loads(checked.stdout)["model"].endswith("tiny-org--tiny-embedder")
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        refused = CliRunner().invoke(app, ["model", "pull", MODEL_ID])
    assert refused.exit_code != 0 and "HF_HUB_OFFLINE is set" in refused.stderr and "Traceback" not in refused.output


def test_an_id_never_pulled_says_to_pull_it(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    settings.encoder.model = MODEL_ID
    with pytest.raises(ModelError, match="neither a local folder nor a pulled model") as missing:
        model_path(settings)
    assert f"run `lodex model pull {MODEL_ID}`" in missing.value.fix
