"""The typed settings of the indexing side ([index], [watch], [chunking]; [encoder] is encoders/settings.py's): defaults
and limits defined once, here; the core takes these sections, api/settings.py loads them from config.toml and the
environment."""

from typing import Literal

from pydantic import Field

from lodex.encoders.settings import Section
from lodex.store.ann_policy import AnnKind


class IndexSettings(Section):
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
    max_seconds_per_file: float = Field(120, gt=0)
    max_memory_mb_per_file: int = Field(1024, ge=64)
    max_memory_mb: int = Field(0, ge=0)
    language: str = Field("", pattern=r"^([A-Za-z]{2,3})?$")
    ann: AnnKind = "auto"
    ann_above: int = Field(50_000, ge=10_000)
    compress_above: int = Field(1_000_000, ge=10_000)
    compressed_codes: Literal["sq8", "pq"] = "sq8"
    flush_tokens: int = Field(131072, ge=256)
    retries: int = Field(3, ge=0, le=20)
    retry_backoff_s: float = Field(0.5, ge=0)
    engine: Literal["local", "ray"] = "local"
    ray_address: str = ""
    ray_actors: int = Field(0, ge=0)
    ray_cpus_per_actor: float = Field(1.0, gt=0)
    ray_writes: Literal["fragments", "driver"] = "fragments"


class WatchSettings(Section):
    """[watch]: how folder changes are picked up."""

    quiet_s: float = Field(1.0, ge=0)
    polling: bool = False
    poll_interval_s: float = Field(1.0, gt=0)
    optimize_every_s: float = Field(30.0, ge=0)
    save_index_every_s: float = Field(300.0, ge=0)
    writer_nice: int = Field(19, ge=0, le=19)
    ignore: list[str] = ["*.swp", "*.swx", "*.swo", "*~", "*.tmp", "*.temp", ".#*", "#*#", "4913", "*.part", "*.crdownload", "~$*"]


class ChunkingSettings(Section):
    """[chunking]: chunk length and overlap in model tokens."""

    max_tokens: int = Field(128, ge=16)
    overlap: int = Field(32, ge=0)
    title_prefix: bool = False
    late: bool | Literal["auto"] = "auto"
    late_margin: int = Field(32, ge=0)
    late_for: Literal["all", "long"] = "long"
    whole_slack: int = Field(0, ge=0)
    overlap_at_breaks: bool = True
    whole_tokens: int = Field(0, ge=0)
    document_vector: Literal["mean", "whole"] = "whole"
