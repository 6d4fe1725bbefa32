"""The Python API in this process: `lodex.open(data_dir)` opens the index as the application object in its read role,
with the same method list (LodexAPI) and result types as `lodex.Client` (over HTTP) and the same answers as
`lodex search --json`."""

from pathlib import Path
from typing import Any

from lodex.api.application import Application
from lodex.api.factory import open_app
from lodex.api.settings import load_settings
from lodex.store.object_store import is_remote


def open(data_dir: str | Path | None = None, config: str | Path | None = None, **settings: Any) -> Application:  # noqa: A001
    """Open the index in `data_dir` (default: index.data_dir of config.toml) for searching and reading in this process
    (the query encoder loaded once; close it, or use `with`, to release it); `settings`: overrides as
    section__key=value (e.g. search__mode="hybrid")."""
    overrides: dict[str, Any] = {name.replace("__", "."): value for name, value in settings.items()}
    if data_dir is not None:
        overrides["index.data_dir"] = str(data_dir) if is_remote(str(data_dir)) else str(Path(data_dir).expanduser().resolve())
    return open_app(load_settings(Path(config) if config else None, overrides), "read")
