"""Settings: config.toml → one typed object, overridden by LODEX_SECTION__KEY variables and CLI flags."""

from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, TomlConfigSettingsSource

from lodex.store.errors import ConfigError

_TOML_PATH: ContextVar[Path | None] = ContextVar("lodex_toml_path", default=None)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)  # a value set after loading is checked too


class IndexSettings(_Section):
    """[index]: what to index and where the index lives."""

    root: str = ""
    data_dir: str = ".lodex"
    include: list[str] = ["*"]
    exclude: list[str] = []
    skip_hidden: bool = True
    follow_symlinks: bool = False
    max_file_mb: float = Field(1024, gt=0)
    max_parsed_mb: float = Field(50, gt=0)
    stream_above_mb: float = Field(8, gt=0)
    ann: Literal["auto", "flat", "ivf"] = "auto"
    ann_above: int = Field(50_000, ge=10_000)
    flush_tokens: int = Field(32768, ge=256)
    retries: int = Field(3, ge=0, le=20)
    retry_backoff_s: float = Field(0.5, ge=0)


class WatchSettings(_Section):
    """[watch]: how folder changes are picked up."""

    quiet_s: float = Field(1.0, ge=0)
    polling: bool = False
    poll_interval_s: float = Field(1.0, gt=0)
    optimize_every_s: float = Field(30.0, ge=0)
    writer_nice: int = Field(19, ge=0, le=19)
    ignore: list[str] = ["*.swp", "*.swx", "*.swo", "*~", "*.tmp", "*.temp", ".#*", "#*#", "4913", "*.part", "*.crdownload", "~$*"]


class ChunkingSettings(_Section):
    """[chunking]: chunk length and overlap in model tokens."""

    max_tokens: int = Field(128, ge=16)
    overlap: int = Field(32, ge=0)
    title_prefix: bool = False


class EncoderSettings(_Section):
    """[encoder]: the model and how it runs."""

    backend: str = "transformers"
    model: str = ""
    pooling: Literal["auto", "mean", "cls", "last"] = "auto"
    normalize: bool = True
    max_length: int = Field(0, ge=0)
    threads: int = Field(0, ge=0)
    batch_tokens: int = Field(4096, ge=256)
    query_prefix: str = ""
    document_prefix: str = ""
    precision: Literal["exact", "fast"] = "exact"
    fast_queries: bool = True
    cache_dir: str = ""


class SearchSettings(_Section):
    """[search]: retrieval mode, document ranking, fusion and result sizes."""

    mode: Literal["dense", "bm25", "hybrid"] = "hybrid"
    ranking: Literal["max", "topm", "mean", "blend"] = "blend"
    fusion: Literal["convex", "rrf"] = "convex"
    dense_weight: float = Field(0.6, ge=0, le=1)
    rrf_k: float = Field(60.0, gt=0)
    bm25_weight: float = Field(1.0, ge=0)
    feedback_chunks: int = Field(5, ge=0, le=1000)
    feedback_weight: float = Field(1.0, ge=0)
    doc_dense_weight: float = Field(0.7, ge=0, le=1)
    hybrid_blend_alpha: float = Field(0.6, ge=0, le=1)
    top_m: int = Field(3, ge=1, le=100)
    blend_alpha: float = Field(0.5, ge=0, le=1)
    k: int = Field(10, ge=1, le=1000)
    passages: int = Field(3, ge=0, le=50)
    candidates: int = Field(100, ge=1)
    nprobe: int = Field(64, ge=1, le=65_536)


class ApiSettings(_Section):
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
