"""What settings and an index's manifest decide together, read before anything is built: chunk length, where chunks
end, late chunking, a document's own vector, the FAISS index kind and which files are taken. An existing index keeps
what it was built with (its manifest), so an upgrade never forces a rebuild."""

from lodex.api.settings import Settings
from lodex.encoders.encoder import Encoder
from lodex.indexer.chunking.chunker import ChunkRule
from lodex.indexer.chunking.late_chunking import LateChunking, late_chunking
from lodex.indexer.scanner import ScanRules
from lodex.store.lance_store import AnnPolicy
from lodex.store.manifest import IndexManifest


def chunk_tokens(settings: Settings, encoder: Encoder) -> int:
    """Chunk length in content tokens: the configured length, capped by the model, less special tokens."""
    return min(settings.chunking.max_tokens, encoder.max_length) - encoder.special_tokens


def chunk_rule(settings: Settings, encoder: Encoder, manifest: IndexManifest) -> ChunkRule:
    """Where chunks end (chunking.whole_slack, chunking.overlap_at_breaks, chunking.whole_tokens) for a new index; an
    existing index keeps the rule it was built with (`IndexManifest.chunk_rule`; one from before these options: the
    legacy rule), so an upgrade never re-cuts its documents (`lodex index --rebuild` applies the configured rule). The
    slack and a whole text stay within what the model reads."""
    size = chunk_tokens(settings, encoder)
    room = max(encoder.max_length - encoder.special_tokens - size, 0)
    whole = min(settings.chunking.whole_tokens, encoder.max_length) - encoder.special_tokens
    configured = ChunkRule(min(settings.chunking.whole_slack, room), settings.chunking.overlap_at_breaks, whole if whole > size else 0)
    return ChunkRule.recorded(manifest.chunk_rule(configured.origin()))


def late_plan(settings: Settings, encoder: Encoder, manifest: IndexManifest) -> LateChunking | None:
    """Late chunking as configured (chunking.late, encoder.window_tokens, chunking.late_margin), checked against the
    model; None when off. "auto": as the index of `manifest` was built (an index from before late chunking keeps
    plain chunking, an index built with it keeps it and its rule, so an upgrade never forces a rebuild), off for a new one."""
    chunking = settings.chunking
    enabled = manifest.late_chunking(chunking.late)
    long_only = manifest.late_for(chunking.late_for) == "long"
    return late_chunking(
        enabled,
        settings.encoder.window_tokens,
        chunking.late_margin,
        min(chunking.max_tokens, encoder.max_length),
        encoder.window_limit,
        encoder.pooling,
        long_only,
    )


def whole_vector_tokens(settings: Settings, encoder: Encoder, manifest: IndexManifest) -> int:
    """chunking.document_vector for the index of `manifest`: the longest input (special tokens included) a document's
    own vector is encoded whole from (a late-chunking window: encoder.window_tokens, else twice a chunk, within the
    model), or 0 (its chunks' mean). An existing index keeps what it was built with (`IndexManifest.whole_vector_tokens`;
    one from before the option: the mean); `lodex index --rebuild` applies the setting."""
    window = settings.encoder.window_tokens or 2 * min(settings.chunking.max_tokens, encoder.max_length)
    return manifest.whole_vector_tokens(min(window, encoder.max_length) if settings.chunking.document_vector == "whole" else 0)


def ann_policy(settings: Settings) -> AnnPolicy:
    """Which FAISS index to keep (index.ann, index.ann_above, index.compress_above, index.compressed_codes) and how an
    IVF one searches (search.nprobe, search.refine_factor)."""
    index, search = settings.index, settings.search
    return AnnPolicy(index.ann, index.ann_above, search.nprobe, index.compress_above, search.refine_factor, index.compressed_codes)


def scan_rules(settings: Settings) -> ScanRules:
    """Which files the indexer takes."""
    return ScanRules.from_settings(settings.index)
