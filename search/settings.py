"""The typed settings of the query side ([search]): retrieval mode, document ranking, fusion and result sizes."""

from typing import Annotated, Literal

from pydantic import Field

from lodex.encoders.settings import Section
from lodex.search.names import FusionMethod, Mode, Ranking


class SearchSettings(Section):
    """[search]: retrieval mode, document ranking, fusion and result sizes."""

    mode: Mode = "hybrid"
    ranking: Ranking = "blend"
    fusion: FusionMethod | Literal["auto"] = "auto"
    dense_weight: float = Field(0.6, ge=0, le=1)
    ceiling_share: float = Field(0.5, gt=0, le=1)
    rrf_k: float = Field(60.0, gt=0)
    bm25_weight: float = Field(1.0, ge=0)
    feedback_chunks: int = Field(5, ge=0, le=1000)
    feedback_weight: Annotated[float, Field(ge=0)] | Literal["auto"] = Field("auto", union_mode="left_to_right")
    doc_dense_weight: float = Field(0.7, ge=0, le=1)
    hybrid_blend_alpha: float = Field(0.6, ge=0, le=1)
    top_m: int = Field(3, ge=1, le=100)
    keyword_passages: int = Field(2, ge=1, le=100)
    blend_alpha: float = Field(0.5, ge=0, le=1)
    k: int = Field(10, ge=1, le=1000)
    passages: int = Field(3, ge=0, le=50)
    candidates: int = Field(100, ge=1)
    nprobe: int = Field(64, ge=1, le=65_536)
    refine_factor: int = Field(4, ge=1, le=64)
