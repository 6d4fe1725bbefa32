"""`lodex model pull` against a hostile hub: redirects to other hosts, files longer than announced or corrupted, names
that climb out of the model's folder, links planted in its staging folder, pickled weights and a config asking to run
the model's own code. Each is refused or neutralised, nothing is written outside the model cache, and no code runs."""

import json
import os
from pathlib import Path

import httpx
import pytest

from lodex.api.factory import build_encoder
from lodex.api.model.cache import cached_model, models_dir
from lodex.api.model.pull import MANIFEST, pull_model
from lodex.api.model.pull_guard import redirect_guard
from lodex.encoders.errors import ModelError
from tests.hub_server import Hub, HubServer
from tests.test_model_pull import MODEL_ID, WEIGHTS, _settings, online, tiny_dir  # noqa: F401 - the fixtures

pytestmark = pytest.mark.usefixtures("online")


def _tree(root: Path) -> dict[str, bytes | str]:
    """Every path under `root` (links not followed) and its bytes, or where a link points."""
    out: dict[str, bytes | str] = {}
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(top, name)
            out[str(path.relative_to(root))] = os.readlink(path) if path.is_symlink() else path.read_bytes() if path.is_file() else "dir"
    return out


def test_a_redirect_to_another_host_is_refused_before_it_is_sent(tiny_dir: Path, tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    elsewhere = Hub(MODEL_ID, Hub.from_folder(MODEL_ID, tiny_dir).files)  # another server, holding the same bytes
    with HubServer(elsewhere) as other:
        hub = Hub.from_folder(MODEL_ID, tiny_dir, redirect_to=other.url)  # LFS files sent to another host (a port here)
        with HubServer(hub) as server, pytest.raises(ModelError, match="sent lodex to http://127.0.0.1:.*neither the hub") as refused:
            pull_model(MODEL_ID, settings.encoder, server.url)
    assert "HF_ENDPOINT" in refused.value.fix
    assert elsewhere.requests == []  # the redirect was never followed
    assert not models_dir(settings.encoder).exists() or os.listdir(models_dir(settings.encoder)) == []


def test_hub_domains_may_redirect_to_their_cdn_and_nothing_else() -> None:
    hub, mirror = redirect_guard("https://huggingface.co"), redirect_guard("https://mirror.example.org")
    for url in ("https://cdn-lfs.huggingface.co/x", "https://cas-bridge.xethub.hf.co/x", "https://huggingface.co/a/b"):
        hub(httpx.Request("GET", url))
    mirror(httpx.Request("GET", "https://cdn.mirror.example.org/x"))
    for guard, url in (
        (hub, "https://evil.example/x"),
        (hub, "http://cdn-lfs.huggingface.co/x"),
        (hub, "https://huggingface.co.evil.example/x"),
        (hub, "https://cdn-lfs.hf.co:8443/x"),
        (mirror, "https://cdn-lfs.huggingface.co/x"),
        (mirror, "http://169.254.169.254/"),
    ):
        with pytest.raises(ModelError, match="neither the hub nor its download host"):
            guard(httpx.Request("GET", url))


def test_a_file_longer_than_announced_is_cut_at_its_size_and_refused(tiny_dir: Path, tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    extra = 256 << 20
    hub = Hub.from_folder(MODEL_ID, tiny_dir, oversize={WEIGHTS: extra})
    with HubServer(hub) as server, pytest.raises(ModelError, match=f"{WEIGHTS} is larger than the .* bytes the hub announced"):
        pull_model(MODEL_ID, settings.encoder, server.url)
    assert hub.sent[WEIGHTS] < len(hub.files[WEIGHTS]) + extra // 4  # lodex hung up near the announced size
    assert os.listdir(models_dir(settings.encoder)) == []  # nothing kept: no model, no staging folder


def test_a_corrupted_file_leaves_the_cache_as_it_was(tiny_dir: Path, tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    with HubServer(Hub.from_folder(MODEL_ID, tiny_dir)) as server:
        pull_model(MODEL_ID, settings.encoder, server.url)  # an older copy, in place
    before = _tree(tmp_path)
    newer = Hub.from_folder(MODEL_ID, tiny_dir, sha="f" * 40, corrupt={WEIGHTS})  # a new commit whose weights are corrupted
    newer.files["config.json"] = newer.files["config.json"].replace(b"{", b'{"note": "v2", ', 1)
    with HubServer(newer) as server, pytest.raises(ModelError, match=f"{WEIGHTS} does not match the hub's sha256"):
        pull_model(MODEL_ID, settings.encoder, server.url)
    assert _tree(tmp_path) == before  # the older copy untouched, no half-pulled newer one beside it


def test_names_that_leave_the_model_folder_are_never_written(tiny_dir: Path, tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    hub = Hub.from_folder(MODEL_ID, tiny_dir)
    for name in ("../escape.json", "/tmp/absolute.json", "1_Pooling/../../escape.json", "../../../escape.txt", "config.json\n"):
        hub.files[name] = b'{"lodex_escape_marker": 1}'
    with HubServer(hub) as server:
        pull_model(MODEL_ID, settings.encoder, server.url)
    final = cached_model(settings.encoder, MODEL_ID)
    assert sorted(os.listdir(tmp_path)) == ["cache"] and os.listdir(models_dir(settings.encoder)) == [final.name]
    assert not any(b"lodex_escape_marker" in data for data in _tree(final).values() if isinstance(data, bytes))
    assert not Path("/tmp/absolute.json").exists()


@pytest.mark.parametrize("link", ["config.json.incomplete", "1_Pooling", ""])  # a file, a folder, the staging folder itself
def test_links_planted_in_the_staging_folder_are_not_followed(tiny_dir: Path, tmp_path: Path, link: str) -> None:
    settings = _settings(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "config.json.incomplete").write_bytes(b"mine")
    staging = cached_model(settings.encoder, MODEL_ID).with_name(f".{MODEL_ID.replace('/', '--')}.partial")
    staging.parent.mkdir(parents=True)
    if link:
        staging.mkdir()
        (staging / link).symlink_to(outside if link == "1_Pooling" else outside / link)
    else:
        staging.symlink_to(outside)
    before = _tree(outside)
    with HubServer(Hub.from_folder(MODEL_ID, tiny_dir)) as server:
        pull_model(MODEL_ID, settings.encoder, server.url)
    assert _tree(outside) == before
    final = cached_model(settings.encoder, MODEL_ID)
    assert not any(p.is_symlink() for p in final.rglob("*"))
    assert (final / "1_Pooling" / "config.json").read_bytes() == (tiny_dir / "1_Pooling" / "config.json").read_bytes()


def test_pickled_weights_are_never_fetched(tiny_dir: Path, tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    hub = Hub.from_folder(MODEL_ID, tiny_dir)
    hub.files["pytorch_model.bin"] = hub.files.pop(WEIGHTS)  # the only weights: a PyTorch pickle
    with HubServer(hub) as server, pytest.raises(ModelError, match=f"{MODEL_ID} has no safetensors weights .only pytorch_model.bin.") as refused:
        pull_model(MODEL_ID, settings.encoder, server.url)
    assert "--revision" in refused.value.fix
    assert hub.gets("pytorch_model.bin") == [] and not models_dir(settings.encoder).exists()


def test_a_config_asking_to_run_the_models_own_code_is_stripped_and_nothing_runs(
    tiny_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _settings(tmp_path)
    marker = tmp_path / "code-ran"
    hub = Hub.from_folder(MODEL_ID, tiny_dir)
    config = json.loads(hub.files["config.json"])
    config["auto_map"] = {"AutoModel": "modeling_evil.EvilModel", "AutoConfig": "modeling_evil.EvilConfig"}
    hub.files["config.json"] = json.dumps(config).encode()
    hub.files["modeling_evil.py"] = f"open({str(marker)!r}, 'w').write('ran')\n".encode()
    with HubServer(hub) as server:
        done = pull_model(MODEL_ID, settings.encoder, server.url)
    final = cached_model(settings.encoder, MODEL_ID)
    assert "auto_map" not in json.loads((final / "config.json").read_text())
    assert json.loads((final / MANIFEST).read_text())["dropped_auto_map"] == ["config.json"]
    assert "modeling_evil.py" not in done["fetched"] and not (final / "modeling_evil.py").exists()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    settings.encoder.model = MODEL_ID
    assert build_encoder(settings).embed(["a test"]).shape == (1, 64)
    assert not marker.exists()
