"""The query side's pieces built from [search] settings: how a searcher fuses and ranks its retrievals."""

from lodex.search.fusion import Fusion
from lodex.search.settings import SearchSettings


def search_fusion(cfg: SearchSettings) -> Fusion:
    """The fusion of dense and keyword retrieval, and the document ranking's parameters, as [search] sets them."""
    return Fusion(
        method=cfg.fusion,
        dense_weight=cfg.dense_weight,
        ceiling_share=cfg.ceiling_share,
        rrf_k=cfg.rrf_k,
        bm25_weight=cfg.bm25_weight,
        feedback_chunks=cfg.feedback_chunks,
        feedback_weight=cfg.feedback_weight,
        doc_dense_weight=cfg.doc_dense_weight,
        hybrid_blend_alpha=cfg.hybrid_blend_alpha,
        top_m=cfg.top_m,
        blend_alpha=cfg.blend_alpha,
        depth=cfg.candidates,
        keyword_passages=cfg.keyword_passages,
    )
