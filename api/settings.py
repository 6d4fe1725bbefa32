"""Settings: config.toml → one typed object, overridden by LODEX_SECTION__KEY variables and CLI flags."""

import os
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, TomlConfigSettingsSource

from lodex.encoders.settings import EncoderSettings, Section
from lodex.indexer.settings import ChunkingSettings, IndexSettings, WatchSettings
from lodex.search.settings import SearchSettings
from lodex.store.errors import ConfigError
from lodex.store.object_store import is_remote

__all__ = [
    "ApiSettings",
    "ChunkingSettings",
    "EncoderSettings",
    "IndexSettings",
    "SearchSettings",
    "ServeSettings",
    "Settings",
    "StorageSettings",
    "WatchSettings",
    "load_settings",
]

_TOML_PATH: ContextVar[Path | None] = ContextVar("lodex_toml_path", default=None)


class ApiSettings(Section):
    """[api]: the HTTP service of `lodex serve`."""

    host: str = "127.0.0.1"
    port: int = Field(8765, ge=1, le=65535)
    api_key: str = ""
    allowed_hosts: list[str] = []
    cors_origins: list[str] = []
    max_query_chars: int = Field(1000, ge=1)
    max_k: int = Field(100, ge=1, le=1000)
    max_body_kb: int = Field(2048, ge=1)
    max_document_kb: int = Field(1024, ge=1)
    query_threads: int = Field(1, ge=1, le=32)
    max_queued_pushes: int = Field(10_000, ge=1)
    max_queued_push_mb: int = Field(1024, ge=1)
    max_embed_inputs: int = Field(2048, ge=1)
    max_embed_chars: int = Field(32_000, ge=1)
    max_queued_embed_inputs: int = Field(4096, ge=1)
    embed_slice_inputs: int = Field(8, ge=1)

    @field_validator("api_key")
    @classmethod
    def _strip_key(cls, value: str) -> str:
        """A key of blanks is no key (it would pass for one in the check that guards public addresses)."""
        return value.strip()


class StorageSettings(Section):
    """[storage]: an index on object storage (index.data_dir = s3://bucket/prefix, gs://…, az://…)."""

    endpoint: str = ""
    region: str = ""
    allow_http: bool = False
    cache_dir: str = ""
    options: dict[str, str] = {}


class ServeSettings(Section):
    """[serve]: how `lodex serve` follows the index."""

    read_only: bool = False
    refresh_s: float = Field(1.0, ge=0)


class McpSettings(Section):
    """[mcp]: the MCP server for agents (`lodex mcp`, and /mcp on `lodex serve`)."""

    allow_writes: bool = False
    max_sessions: int = Field(100, ge=1)
    session_idle_s: float = Field(600.0, gt=0)


class Settings(BaseSettings):
    """Every lodex setting; `base_dir` anchors relative paths (the config file's folder)."""

    model_config = SettingsConfigDict(env_prefix="LODEX_", env_nested_delimiter="__", extra="ignore")

    index: IndexSettings = IndexSettings()
    chunking: ChunkingSettings = ChunkingSettings()
    watch: WatchSettings = WatchSettings()
    api: ApiSettings = ApiSettings()
    encoder: EncoderSettings = EncoderSettings()
    search: SearchSettings = SearchSettings()
    storage: StorageSettings = StorageSettings()
    serve: ServeSettings = ServeSettings()
    mcp: McpSettings = McpSettings()
    base_dir: Path = Field(default_factory=Path.cwd, exclude=True)
    config_file: Path | None = Field(default=None, exclude=True)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml = _TOML_PATH.get()
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if toml is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml))
        return tuple(sources)

    def path(self, value: str) -> Path:
        """A configured path, resolved against the config file's folder."""
        return (self.base_dir / Path(value).expanduser()).resolve()

    @property
    def remote_uri(self) -> str | None:
        """index.data_dir when it names an object store (s3://bucket/prefix, …), else None."""
        return self.index.data_dir.rstrip("/") if is_remote(self.index.data_dir) else None

    @property
    def data_dir(self) -> Path:
        """The data directory, absolute; for an index on object storage, its local cache (storage.cache_dir, else
        $XDG_CACHE_HOME/lodex/indexes/<scheme>/<bucket>/<prefix>): what must stay on this machine."""
        uri = self.remote_uri
        if uri is None:
            return self.path(self.index.data_dir)
        if self.storage.cache_dir:
            return self.path(self.storage.cache_dir)
        scheme, _, rest = uri.partition("://")
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lodex" / "indexes"
        return (base / scheme.replace("+", "_") / rest.partition("?")[0].strip("/")).resolve()

    @property
    def location(self) -> str | Path:
        """Where the index is, for messages: its URI on object storage, else the data directory."""
        return self.remote_uri or self.data_dir

    def storage_options(self) -> dict[str, str]:
        """Lance's storage options for index.data_dir on object storage: storage.options, then endpoint, region
        and allow_http (storage.endpoint empty: $AWS_ENDPOINT_URL, if set). Credentials stay in the environment."""
        cfg = self.storage
        options = dict(cfg.options)
        endpoint = cfg.endpoint or os.environ.get("AWS_ENDPOINT_URL", "")
        if endpoint:
            options.setdefault("aws_endpoint", endpoint)
        if cfg.region:
            options.setdefault("aws_region", cfg.region)
        if cfg.allow_http:
            options.setdefault("allow_http", "true")
        return options


def find_config(explicit: Path | None) -> Path | None:
    """The config file to read: --config/LODEX_CONFIG if given, else ./config.toml when present."""
    if explicit is not None:
        if not explicit.is_file():
            raise ConfigError(f"config file {explicit} not found", "check --config or LODEX_CONFIG")
        return explicit
    default = Path.cwd() / "config.toml"
    return default if default.is_file() else None


def load_settings(config: Path | None = None, overrides: dict[str, Any] | None = None) -> Settings:
    """Read config.toml (if any) with environment overrides, then apply explicit `overrides`."""
    path = find_config(config)
    token = _TOML_PATH.set(path)
    try:
        settings = Settings(base_dir=path.parent.resolve() if path else Path.cwd(), config_file=path)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(
            f"invalid setting {where}: {first['msg']}",
            f"fix it in {path or 'the environment'} (or the LODEX_{where.upper().replace('.', '__')} variable)",
        ) from exc
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}", "fix the TOML syntax") from exc
    finally:
        _TOML_PATH.reset(token)
    for dotted, value in (overrides or {}).items():
        if value is not None:
            section, key = dotted.split(".")
            try:
                setattr(getattr(settings, section), key, value)
            except ValidationError as exc:
                raise ConfigError(f"invalid setting {dotted}: {exc.errors()[0]['msg']}", "fix the flag's value") from exc
    return settings
