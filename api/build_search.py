"""The query side's pieces built from [search] settings: how a searcher fuses and ranks its retrievals."""

from typing import Any

from lodex.search.fusion import Fusion
from lodex.search.settings import SearchSettings

FUSION, FEEDBACK_WEIGHT = "convex", 1.0  # "auto" where the model declares neither


def search_fusion(cfg: SearchSettings, declared: dict[str, Any] | None = None) -> Fusion:
    """The fusion of dense and keyword retrieval, and the document ranking's parameters, as [search] sets them; "auto"
    (search.fusion, search.feedback_weight): what the model `declared` for itself (encoders/model_search.py), else
    convex and 1.0."""
    declared = declared or {}
    return Fusion(
        method=declared.get("fusion", FUSION) if cfg.fusion == "auto" else cfg.fusion,
        dense_weight=cfg.dense_weight,
        ceiling_share=cfg.ceiling_share,
        rrf_k=cfg.rrf_k,
        bm25_weight=cfg.bm25_weight,
        feedback_chunks=cfg.feedback_chunks,
        feedback_weight=float(declared.get("feedback_weight", FEEDBACK_WEIGHT) if cfg.feedback_weight == "auto" else cfg.feedback_weight),
        doc_dense_weight=cfg.doc_dense_weight,
        hybrid_blend_alpha=cfg.hybrid_blend_alpha,
        top_m=cfg.top_m,
        blend_alpha=cfg.blend_alpha,
        depth=cfg.candidates,
        keyword_passages=cfg.keyword_passages,
    )
