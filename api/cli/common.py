"""What the `lodex` commands share: their common options and the settings they load from the config file, the
environment and the flags."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lodex.store.errors import ConfigError

if TYPE_CHECKING:
    from lodex.api.settings import Settings

ConfigOpt = Annotated[Path | None, typer.Option("--config", envvar="LODEX_CONFIG", help="config.toml to read (default ./config.toml).")]
DataDirOpt = Annotated[
    str | None,
    typer.Option(
        "--data-dir",
        envvar="LODEX_DATA_DIR",
        help="Index directory, or s3://bucket/prefix (gs://, az://) on object storage (default: index.data_dir).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]
DirArg = Annotated[Path | None, typer.Argument(help="The folder (default: index.root in config.toml).", show_default=False)]


def command_settings(ctx: typer.Context, config: Path | None, data_dir: str | None, **flags: Any) -> Any:
    """Settings from the config file and environment, then the flags given (`flags`: "section.key" → value, as keyword
    arguments with "__" for "."; None: not given)."""
    from lodex.api.settings import load_settings
    from lodex.store.object_store import is_remote

    globals_ = ctx.obj or {}
    chosen = data_dir or globals_.get("data_dir")
    overrides = {"index.data_dir": (chosen if is_remote(chosen) else str(Path(chosen).resolve())) if chosen else None}
    overrides |= {name.replace("__", "."): value for name, value in flags.items()}
    return load_settings(config or globals_.get("config"), overrides)


def index_root(settings: "Settings", directory: Path | None) -> Path:
    """The folder a command indexes, watches or serves: DIR when given, else index.root; ConfigError when neither names
    an existing folder."""
    if directory is not None:
        root = directory.expanduser().resolve()
    elif settings.index.root:
        root = settings.path(settings.index.root)
    else:
        raise ConfigError("no folder to index", "pass DIR (lodex index DIR) or set index.root in config.toml")
    if not root.is_dir():
        raise ConfigError(f"{root} is not a folder", "pass an existing folder")
    return root
