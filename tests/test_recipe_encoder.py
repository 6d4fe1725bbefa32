"""Fast mode rebuilt from its recipe (no PyTorch): the same chunk vectors (plain and late chunking), token spans and
query vectors as the full encoder, in either session layout; used only where the recipe's fast path is this CPU's."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lodex.api.factory import build_indexer, open_store
from lodex.api.settings import Settings
from lodex.encoders.recipe_encoder import RecipeEncoder, load_fast_encoder
from lodex.encoders.settings import EncoderSettings
from lodex.encoders.transformers_encoder import TransformersEncoder
from lodex.store.schema import vectors_of
from tests.conftest import EVALDATA

pytestmark = pytest.mark.slow


def _folder(root: Path) -> Path:
    """Twelve documents of 1 to 10 Cranfield abstracts (one chunk to many windows: ~90 chunks in all), and an empty one."""
    with (EVALDATA / "cranfield" / "corpus.jsonl").open() as fh:
        abstracts = [json.loads(line)["text"] for line in fh][:80]
    root.mkdir()
    at = 0
    for i, size in enumerate((1, 1, 2, 3, 10, 1, 4, 6, 1, 2, 5, 1)):
        (root / f"d{i}.txt").write_text("\n\n".join(abstracts[at : at + size]))
        at = (at + size) % 50
    (root / "empty.txt").write_text("")
    return root


def _vectors(settings: Settings, encoder, root: Path, data: Path) -> dict[tuple[str, int], np.ndarray]:
    store = open_store(settings, encoder, data, create=True)
    build_indexer(settings, encoder, store).run(root)
    rows = store.chunks.search().select(["document_id", "char_start", "vector"]).limit(None).to_arrow()
    return dict(zip(zip(rows["document_id"].to_pylist(), rows["char_start"].to_pylist()), vectors_of(rows)))


@pytest.fixture(scope="module")
def full_encoders() -> dict[str, TransformersEncoder]:
    """The full encoder of each fast path, loaded once for the module: late chunking is a setting of the chunker, not
    of the encoder, so the plain and late runs of a path share one (the recipe is what each test rebuilds)."""
    return {}


@pytest.mark.parametrize("path", ["int8", "int8-sessions"])
@pytest.mark.parametrize("late", [True, False])
def test_the_recipe_encoder_gives_the_full_encoders_vectors(
    tmp_path: Path, fast_cache: Path, path: str, late: bool, full_encoders: dict[str, TransformersEncoder]
) -> None:
    settings = Settings(base_dir=tmp_path)
    settings.encoder.precision, settings.encoder.cache_dir, settings.encoder.fast_path = "fast", str(fast_cache), path
    settings.chunking.late = late
    cfg = settings.encoder
    if path not in full_encoders:
        full_encoders[path] = TransformersEncoder(cfg)  # exports (once per session), checks, and leaves the recipe
    full = full_encoders[path]
    assert full._settings == cfg
    light = load_fast_encoder(cfg, None)
    assert isinstance(light, RecipeEncoder) and light.origin() == full.origin()
    assert light.parallel_calls == full.parallel_calls and light.batch_tokens == full.batch_tokens
    root = _folder(tmp_path / "docs")
    expected = _vectors(settings, full, root, tmp_path / "full")
    got = _vectors(settings, light, root, tmp_path / "light")
    assert got.keys() == expected.keys() and len(got) > 40
    assert max(float(np.abs(got[k] - expected[k]).max()) for k in got) < 1e-5
    text = (root / "d4.txt").read_text()
    assert all(np.array_equal(a, b) for a, b in zip(light.token_spans([text, "é à 𠀀 x"]), full.token_spans([text, "é à 𠀀 x"])))
    queries = ["heat transfer in hypersonic flow", "boundary layer", "x"]
    assert np.abs(light.embed(queries, kind="query") - full.embed(queries, kind="query")).max() < 1e-5
    light.release_memory()


def test_the_recipe_is_not_used_where_it_does_not_apply(tmp_path: Path, fast_cache: Path) -> None:
    cfg = EncoderSettings(precision="fast", cache_dir=str(fast_cache), fast_path="int8")
    TransformersEncoder(cfg)
    assert load_fast_encoder(cfg, None) is not None
    assert load_fast_encoder(cfg.model_copy(update={"precision": "exact"}), None) is None  # exact documents: PyTorch
    assert load_fast_encoder(cfg.model_copy(update={"cache_dir": str(tmp_path / "empty")}), None) is None  # nothing measured there
    assert load_fast_encoder(cfg.model_copy(update={"stream_layers": True, "precision": "auto"}), None) is None  # auto streams exactly
    auto = cfg.model_copy(update={"fast_path": "auto"})
    remembered = TransformersEncoder(auto)  # measures (or remembers) this CPU's path, and leaves its recipe
    light = load_fast_encoder(auto.model_copy(update={"precision": "auto"}), None)
    assert light is not None and light.recipe["fast_path"] == remembered.fast_path.name


def test_a_warm_fast_index_run_loads_no_pytorch(tmp_path: Path, fast_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second `lodex index` in fast mode (warm cache: the first ran here, on the run's cache) encodes its new file
    in a process of its own without importing torch or transformers."""
    from typer.testing import CliRunner

    from lodex.api.cli import app

    root = _folder(tmp_path / "docs")
    env = {"LODEX_ENCODER__PRECISION": "fast", "LODEX_ENCODER__CACHE_DIR": str(fast_cache), "HF_HUB_OFFLINE": "1"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    (root / "new0.txt").write_text("A new note 0 on swept wings and their buffeting at transonic speed.")
    first = CliRunner().invoke(app, ["index", str(root), "--json"])
    assert first.exit_code == 0, first.output
    (root / "new1.txt").write_text("A new note 1 on swept wings and their buffeting at transonic speed.")
    script = (
        "import sys, json; from lodex.api.cli import main; sys.argv = ['lodex', 'index', sys.argv[1], '--json']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(json.dumps({'torch': 'torch' in sys.modules, 'transformers': 'transformers' in sys.modules}))"
    )
    done = subprocess.run([sys.executable, "-c", script, str(root)], capture_output=True, text=True, cwd=tmp_path, timeout=600, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert json.loads(lines[0])["added"] == 1 and json.loads(lines[-1]) == {"torch": False, "transformers": False}
    assert "PyTorch not loaded" in done.stderr
