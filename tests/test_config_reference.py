"""The configuration page (docs/configuration.md) is generated from the settings classes and config.toml's comments:
every key documented, every default the real one, and the committed page up to date with the code."""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from pydantic import Field

from lodex.search.settings import SearchSettings

ROOT = Path(__file__).resolve().parents[1]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("config_reference", ROOT / "scripts" / "config_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


gen = _generator()


def test_the_committed_page_is_up_to_date() -> None:
    page = gen.render(gen.CONFIG.read_text(encoding="utf-8"))
    assert gen.PAGE.read_text(encoding="utf-8") == page, "run: python scripts/config_reference.py"


def test_every_key_of_every_section_is_on_the_page_with_its_real_default() -> None:
    page = gen.PAGE.read_text(encoding="utf-8")
    classes = gen.sections()
    assert set(classes) == {"index", "chunking", "watch", "api", "encoder", "search", "storage", "serve", "mcp"}
    for section, cls in classes.items():
        defaults = cls()  # the section as built with no file and no environment
        for key in cls.model_fields:
            value = getattr(defaults, key)
            entry = page.split(f"### `{section}.{key}` ", 1)[1].split("\n### ", 1)[0]
            assert f"default `{gen.toml_value(value)}`" in entry, f"{section}.{key}"
            assert f"env `LODEX_{section.upper()}__{key.upper()}`" in entry


def test_a_key_added_without_a_comment_fails() -> None:
    class Grown(SearchSettings):
        """[search]: as it is, plus a key nobody documented."""

        brand_new_key: int = Field(7, ge=1)

    classes = {**gen.sections(), "search": Grown}
    with pytest.raises(gen.Undocumented, match="search.brand_new_key"):
        gen.render(gen.CONFIG.read_text(encoding="utf-8"), classes)
    documented = gen.CONFIG.read_text(encoding="utf-8").replace("[api]\n", "# A key documented in config.toml.\nbrand_new_key = 7\n\n[api]\n")
    page = gen.render(documented, classes)
    assert "### `search.brand_new_key`" in page and "default `7` · ≥ 1" in page


def test_check_mode_fails_on_a_stale_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    stale = tmp_path / "configuration.md"
    stale.write_text(gen.PAGE.read_text(encoding="utf-8").replace("default `10`", "default `11`"), encoding="utf-8")
    monkeypatch.setattr(gen, "PAGE", stale)
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    assert gen.main(["--check"]) == 1
    assert "out of date" in capsys.readouterr().err
    assert gen.main([]) == 0 and gen.main(["--check"]) == 0
