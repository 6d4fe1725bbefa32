"""Build the core objects (encoder, store, indexer, searcher) from settings; the only place that does."""

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lodex.api.settings import EncoderSettings, Settings
from lodex.indexer.chunker import Chunker
from lodex.indexer.encoder import Encoder
from lodex.indexer.pipeline import Indexer
from lodex.indexer.scanner import ScanRules
from lodex.indexer.watch_service import WatchService
from lodex.indexer.watcher import ChangeCollector, FolderWatcher
from lodex.indexer.writer import IndexWriter
from lodex.search.searcher import Fusion, Searcher
from lodex.store.errors import ConfigError
from lodex.store.job_log import JobLog
from lodex.store.lance_store import AnnPolicy, Store
from lodex.store.origin import make_origin


def _transformers(cfg: EncoderSettings) -> Encoder:
    from lodex.indexer.transformers_encoder import TransformersEncoder

    return TransformersEncoder(
        model_dir=cfg.model or None, pooling=cfg.pooling, normalize=cfg.normalize, max_length=cfg.max_length,
        threads=cfg.threads, batch_tokens=cfg.batch_tokens, query_prefix=cfg.query_prefix, document_prefix=cfg.document_prefix,
        precision=cfg.precision, cache_dir=cfg.cache_dir or None, fast_queries=cfg.fast_queries,
    )


# Encoder backends by name (`encoder.backend`); tests register a deterministic fake here.
ENCODER_BACKENDS: dict[str, Callable[[EncoderSettings], Encoder]] = {"transformers": _transformers}


def _backend(name: str) -> Callable[[EncoderSettings], Encoder]:
    """A registered backend, or `module:callable` for a plug-in encoder (called with the [encoder] settings)."""
    if name in ENCODER_BACKENDS:
        return ENCODER_BACKENDS[name]
    module, _, attr = name.partition(":")
    if attr:
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"cannot load encoder.backend {name!r}: {exc}", "check the module:callable path") from exc
    raise ConfigError(f"unknown encoder.backend {name!r}", f"use one of: {', '.join(ENCODER_BACKENDS)}, or module:callable")


def build_encoder(settings: Settings) -> Encoder:
    """The configured encoder, loaded."""
    backend = _backend(settings.encoder.backend)
    if settings.encoder.model:
        settings.encoder.model = str(settings.path(settings.encoder.model))
    return backend(settings.encoder)


def chunk_tokens(settings: Settings, encoder: Encoder) -> int:
    """Chunk length in content tokens: the configured length, capped by the model, less special tokens."""
    return min(settings.chunking.max_tokens, encoder.max_length) - encoder.special_tokens


def build_chunker(settings: Settings, encoder: Encoder) -> Chunker:
    """The chunker for this encoder's tokenizer."""
    size = chunk_tokens(settings, encoder)
    if not 0 <= settings.chunking.overlap < size // 2:
        raise ConfigError(f"chunking.overlap {settings.chunking.overlap} must be below half a chunk ({size // 2} tokens)", "lower chunking.overlap")
    return Chunker(encoder.token_spans, max_tokens=size, overlap=settings.chunking.overlap)


def open_store(settings: Settings, encoder: Encoder, data_dir: Path, create: bool) -> Store:
    """The store in data_dir, checked against this encoder and chunking (created when allowed)."""
    origin = make_origin(encoder.origin(), chunk_tokens(settings, encoder), settings.chunking.overlap, settings.chunking.title_prefix)
    return Store.open(data_dir, origin, create=create, ann=ann_policy(settings))


def ann_policy(settings: Settings) -> AnnPolicy:
    """Which FAISS index to keep (index.ann, index.ann_above) and how widely an IVF one searches (search.nprobe)."""
    return AnnPolicy(settings.index.ann, settings.index.ann_above, settings.search.nprobe)


def scan_rules(settings: Settings) -> ScanRules:
    """Which files the indexer takes."""
    cfg = settings.index
    mib = 1024 * 1024
    return ScanRules(cfg.include, cfg.exclude, cfg.skip_hidden, int(cfg.max_file_mb * mib), cfg.follow_symlinks,
                     int(cfg.max_parsed_mb * mib), int(cfg.stream_above_mb * mib))


def build_indexer(settings: Settings, encoder: Encoder, store: Store, jobs: JobLog | None = None) -> Indexer:
    """The indexing pipeline over this store, recording its runs in `jobs`."""
    cfg = settings.index
    return Indexer(store, encoder, build_chunker(settings, encoder), scan_rules(settings), cfg.flush_tokens,
                   jobs=jobs, retries=cfg.retries, retry_backoff_s=cfg.retry_backoff_s, title_prefix=settings.chunking.title_prefix)


def build_writer(settings: Settings, indexer: Indexer, root: Path, **run_options: Any) -> IndexWriter:
    """The one writer of a long-lived process (watch, serve): its runs keep the full-text index caught up."""
    indexer.optimize_every_s = settings.watch.optimize_every_s
    return IndexWriter(indexer, root, nice=settings.watch.writer_nice, **run_options)


def build_watch(settings: Settings, indexer: Indexer, root: Path, **run_options: Any) -> WatchService:
    """Watcher, change collector and the one writer, for `root`."""
    collector = ChangeCollector(root, settings.watch.quiet_s)
    watcher = FolderWatcher(root, scan_rules(settings), collector, settings.watch.polling, settings.watch.ignore,
                            settings.watch.poll_interval_s)
    return WatchService(build_writer(settings, indexer, root, **run_options), watcher, collector)


def build_searcher(settings: Settings, encoder: Encoder, store: Store) -> Searcher:
    """The query side over this store."""
    cfg = settings.search
    fusion = Fusion(method=cfg.fusion, dense_weight=cfg.dense_weight, rrf_k=cfg.rrf_k, bm25_weight=cfg.bm25_weight,
                    feedback_chunks=cfg.feedback_chunks, feedback_weight=cfg.feedback_weight, doc_dense_weight=cfg.doc_dense_weight,
                    hybrid_blend_alpha=cfg.hybrid_blend_alpha,
                    top_m=cfg.top_m, blend_alpha=cfg.blend_alpha, depth=cfg.candidates)
    return Searcher(store, encoder, passages=cfg.passages, candidates=cfg.candidates, mode=cfg.mode, ranking=cfg.ranking, fusion=fusion)
