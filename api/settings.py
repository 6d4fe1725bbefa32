"""Settings: config.toml → one typed object, overridden by LODEX_SECTION__KEY variables and CLI flags."""

from contextvars import ContextVar
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, TomlConfigSettingsSource

from lodex.indexer.settings import ChunkingSettings, EncoderSettings, IndexSettings, Section, WatchSettings
from lodex.search.settings import SearchSettings
from lodex.store.errors import ConfigError

__all__ = ["ApiSettings", "ChunkingSettings", "EncoderSettings", "IndexSettings", "SearchSettings", "Settings", "WatchSettings", "load_settings"]

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

    @field_validator("api_key")
    @classmethod
    def _strip_key(cls, value: str) -> str:
        """A key of blanks is no key (it would pass for one in the check that guards public addresses)."""
        return value.strip()


class Settings(BaseSettings):
    """Every lodex setting; `base_dir` anchors relative paths (the config file's folder)."""

    model_config = SettingsConfigDict(env_prefix="LODEX_", env_nested_delimiter="__", extra="ignore")

    index: IndexSettings = IndexSettings()
    chunking: ChunkingSettings = ChunkingSettings()
    watch: WatchSettings = WatchSettings()
    api: ApiSettings = ApiSettings()
    encoder: EncoderSettings = EncoderSettings()
    search: SearchSettings = SearchSettings()
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
    def data_dir(self) -> Path:
        """The data directory, absolute."""
        return self.path(self.index.data_dir)


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
