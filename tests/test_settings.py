"""Settings: config.toml documents every key with its default; env variables override; bad values are clear."""

import tomllib
from pathlib import Path

import pytest

from lodex.api.settings import Settings, load_settings
from lodex.store.errors import ConfigError

CONFIG = Path(__file__).resolve().parents[1] / "config.toml"
SECTIONS = ("index", "chunking", "encoder", "search", "watch", "api", "storage", "serve")


def test_every_key_is_documented_with_its_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for pinned in ("LODEX_ENCODER__PRECISION", "LODEX_ENCODER__CACHE_DIR"):  # conftest pins them for the other tests:
        monkeypatch.delenv(pinned)  # the defaults as users get them
    lines = CONFIG.read_text().splitlines()
    parsed = tomllib.loads(CONFIG.read_text())
    defaults = Settings(base_dir=CONFIG.parent)
    for section in SECTIONS:
        model = getattr(defaults, section)
        assert set(parsed[section]) == set(type(model).model_fields), f"[{section}] keys differ from the settings"
        for key in type(model).model_fields:
            at = next(i for i, line in enumerate(lines) if line.startswith(f"{key} ="))
            assert lines[at - 1].startswith("# ") and len(lines[at - 1]) > 12, f"{section}.{key} has no comment"
            if (section, key) != ("index", "root"):
                assert parsed[section][key] == getattr(model, key), f"{section}.{key} differs from its default"


def test_env_overrides_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[search]\nk = 5\n[encoder]\nthreads = 1\n")
    monkeypatch.setenv("LODEX_SEARCH__K", "7")
    settings = load_settings(config)
    assert settings.search.k == 7 and settings.encoder.threads == 1
    assert settings.data_dir == (tmp_path / ".lodex").resolve()


def test_unknown_key_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[search]\nkk = 5\n")
    with pytest.raises(ConfigError, match="search.kk"):
        load_settings(config)


def test_bad_toml_is_a_config_error(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[search\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert "line 1" in caught.value.one_line() and "TOML" in caught.value.one_line()
