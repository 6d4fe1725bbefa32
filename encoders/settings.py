"""The typed settings of the encoder ([encoder]) and the base every [section] of config.toml is typed with (here, in
the lowest layer that has settings, so that indexer/ and search/ type theirs with it)."""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Section(BaseModel):
    """A [section] of config.toml: unknown keys refused, values checked when set after loading too."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)  # a value set after loading is checked too


class EncoderSettings(Section):
    """[encoder]: the model and how it runs."""

    backend: str = "transformers"
    model: str = ""
    pooling: Literal["auto", "mean", "cls", "last"] = "auto"
    normalize: bool = True
    max_length: int = Field(0, ge=0)
    window_tokens: int = Field(0, ge=0)
    threads: int = Field(0, ge=0)
    batch_tokens: int = Field(4096, ge=256)
    query_prefix: str = ""
    document_prefix: str = ""
    append_eos: Literal["auto", "always", "never"] = "auto"
    precision: Literal["auto", "exact", "fast"] = "auto"
    fast_path: str = "auto"
    fast_queries: bool = True
    cache_dir: str = ""
    memory_budget_mb: int = Field(0, ge=0)
    stream_layers: bool = False
    layer_weights: Literal["fp32", "int8", "int4"] = "fp32"
