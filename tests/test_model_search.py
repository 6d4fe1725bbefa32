"""The search settings a model declares for itself (config.json lodex_search): read, checked, taken by
search.fusion and search.feedback_weight "auto" and never over a value the user set; an earlier import gets them."""

import json
from pathlib import Path

import pytest

from lodex.api.build_search import search_fusion
from lodex.api.factory import build_searcher
from lodex.api.model.cache import encoder_search
from lodex.api.model.imports import MARK, SEARCH, refresh_declarations
from lodex.api.settings import Settings
from lodex.encoders.model_search import declared_search
from lodex.search.settings import SearchSettings
from lodex.store.lance_store import LanceStore
from lodex.store.origin import make_origin
from tests.fakes import FakeEncoder


def _model(tmp_path: Path, config: dict) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_a_declared_fusion_is_taken_by_auto_and_never_over_a_set_value(tmp_path: Path) -> None:
    folder = _model(tmp_path, {"lodex_search": {"fusion": "ceiling", "feedback_weight": 0.5}})
    declared, source = declared_search(str(folder))
    assert declared == {"fusion": "ceiling", "feedback_weight": 0.5} and source == "config.json lodex_search"
    auto = search_fusion(SearchSettings(), declared)
    assert (auto.method, auto.feedback_weight) == ("ceiling", 0.5)
    mine = search_fusion(SearchSettings(fusion="rrf", feedback_weight=2.0), declared)
    assert (mine.method, mine.feedback_weight) == ("rrf", 2.0)
    plain = search_fusion(SearchSettings(), {})  # a model that declares nothing: lodex's own defaults
    assert (plain.method, plain.feedback_weight) == ("convex", 1.0)


@pytest.mark.parametrize(
    "declared",
    [
        {"fusion": "magic", "feedback_weight": -1},
        {"fusion": ["ceiling"], "feedback_weight": "0.5"},
        {"feedback_weight": True, "mode": "dense", "dense_weight": 0.1},
        "ceiling",
        None,
    ],
)
def test_what_lodex_does_not_know_is_left_out(tmp_path: Path, declared: object) -> None:
    """A hostile or mistaken declaration changes nothing: unknown keys, unknown or mistyped values, not a table."""
    folder = _model(tmp_path, {"lodex_search": declared})
    assert declared_search(str(folder))[0] == {}
    fusion = search_fusion(SearchSettings(), declared_search(str(folder))[0])
    assert (fusion.method, fusion.feedback_weight, fusion.dense_weight) == ("convex", 1.0, 0.6)


def test_unreadable_config_and_the_bundled_model_declare_nothing(tmp_path: Path) -> None:
    assert declared_search("")[0] == {}
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    assert declared_search(str(broken))[0] == {} and declared_search(str(tmp_path / "missing"))[0] == {}


def test_the_searcher_of_a_configured_model_uses_its_declaration(tmp_path: Path) -> None:
    folder = _model(tmp_path, {"lodex_search": {"fusion": "ceiling", "feedback_weight": 0.25}})
    settings = Settings(base_dir=tmp_path)
    settings.encoder.model = str(folder)
    assert encoder_search(settings) == {"fusion": "ceiling", "feedback_weight": 0.25}
    encoder = FakeEncoder()
    store = LanceStore.open(tmp_path / "data", make_origin(encoder.origin(), 64, 4))
    searcher = build_searcher(settings, encoder, store)
    assert (searcher.fusion.method, searcher.fusion.feedback_weight) == ("ceiling", 0.25)
    settings.search.fusion = "convex"
    assert build_searcher(settings, encoder, store).fusion.method == "convex"


def test_an_earlier_import_gets_the_declaration_and_keeps_the_rest(tmp_path: Path) -> None:
    """An import made before lodex declared search settings is brought up to date in place (config.json only)."""
    folder = _model(tmp_path, {"model_type": "xlm-roberta", "lodex_languages": ["zh"], MARK: {"sha256": "0" * 64}})
    refresh_declarations(folder)
    config = json.loads((folder / "config.json").read_text())
    assert config["lodex_search"] == SEARCH and config["lodex_languages"] == ["zh"] and config[MARK] == {"sha256": "0" * 64}
    assert [p.name for p in folder.iterdir()] == ["config.json"]  # no staging file left
    refresh_declarations(tmp_path / "nowhere")  # nothing to bring up to date: nothing happens
