"""The composition root: builds the core objects (encoder, store, indexer, writer, watcher, searcher) from settings,
and `WriteSide`, the one owner of an index's write side; the only place that does (CLI, service, eval and benches
use it). Builders never change what they are given."""

import importlib
from collections.abc import Callable
from functools import partial
from typing import cast
from pathlib import Path

from lodex.api.index_files import index_manifest, remote_store
from lodex.api.model_cache import encoder_languages, model_path
from lodex.api.settings import EncoderSettings, Settings
from lodex.indexer.chunking.chunker import Chunker, ChunkRule
from lodex.indexer.chunking.late_chunking import LateChunking, late_chunking
from lodex.indexer.encoders.encoder import Encoder
from lodex.indexer.encoders.model_languages import unread_languages
from lodex.indexer.pipeline import Indexer
from lodex.indexer.readers.readers import reader_versions
from lodex.indexer.scanner import ScanRules
from lodex.indexer.watch_service import WatchService
from lodex.indexer.watcher import ChangeCollector, FolderWatcher
from lodex.indexer.writer import IndexWriter, RunHooks
from lodex.search.searcher import Fusion, Searcher
from lodex.search.snapshot_source import SnapshotSource
from lodex.store.base import PERSIST_EVERY_S, Store
from lodex.store.blas_threads import single_threaded_numpy_blas
from lodex.store.errors import ConfigError
from lodex.store.job_log import JobLog
from lodex.store.lance_store import AnnPolicy, LanceStore
from lodex.store.manifest import IndexManifest
from lodex.store.origin import make_origin

single_threaded_numpy_blas()  # every process that loads the search or index stack (a forwarded CLI search does not)


def _transformers(cfg: EncoderSettings, spill_dir: Path | None = None, quantization: str | None = None) -> Encoder:
    from lodex.indexer.encoders.transformers_encoder import TransformersEncoder

    return TransformersEncoder(cfg, spill_dir, quantization)


# Encoder backends by name (`encoder.backend`); tests register a deterministic fake here.
ENCODER_BACKENDS: dict[str, Callable[[EncoderSettings], Encoder]] = {"transformers": _transformers}


def _backend(name: str) -> Callable[[EncoderSettings], Encoder]:
    """A registered backend, or `module:callable` for a plug-in encoder (called with the [encoder] settings)."""
    if name in ENCODER_BACKENDS:
        return ENCODER_BACKENDS[name]
    module, _, attr = name.partition(":")
    if attr:
        try:
            return cast(Callable[[EncoderSettings], Encoder], getattr(importlib.import_module(module), attr))
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"cannot load encoder.backend {name!r}: {exc}", "check the module:callable path") from exc
    raise ConfigError(f"unknown encoder.backend {name!r}", f"use one of: {', '.join(ENCODER_BACKENDS)}, or module:callable")


def encoder_settings(settings: Settings, manifest: IndexManifest) -> EncoderSettings:
    """The [encoder] settings as the encoder takes them: a relative encoder.model resolved against the config file's
    folder (a hub id to its copy pulled by `lodex model pull`), and the precision the index of `manifest` keeps
    (`IndexManifest.precision`: "auto" resolved to the one it was built with; "auto" still for a new index)."""
    cfg = settings.encoder
    if cfg.model:
        cfg = cfg.model_copy(update={"model": str(model_path(settings))})
    if (precision := manifest.precision(cfg.precision)) != cfg.precision:
        cfg = cfg.model_copy(update={"precision": precision})
    return cfg


def build_encoder(settings: Settings, data_dir: Path | None = None, manifest: IndexManifest | None = None) -> Encoder:
    """The configured encoder, loaded for the index in `data_dir` (default the settings' data dir), whose `manifest` is
    read there when not given (see encoder_settings)."""
    backend = _backend(settings.encoder.backend)
    spill = settings.data_dir if data_dir is None else data_dir
    manifest = manifest if manifest is not None else IndexManifest.read(spill)
    cfg = encoder_settings(settings, manifest)
    if backend is not _transformers:
        return backend(cfg)
    if settings.index.engine != "ray":  # fast mode measured and checked here before: rebuilt from its recipe, no PyTorch
        from lodex.indexer.encoders.recipe_encoder import load_fast_encoder

        light = load_fast_encoder(cfg, manifest.fast_quantization)
        if light is not None:
            return light
    return _transformers(cfg, spill, manifest.fast_quantization)  # a streamed model spills beside the index


def build_query_encoder(settings: Settings, manifest: IndexManifest | None = None) -> Encoder:
    """An encoder for queries only: rebuilt without PyTorch from the recipe the full encoder left when it loaded its ONNX
    query model for these settings (a cold `lodex search` starts seconds sooner), else the full encoder; `manifest`:
    the configured index's (read when not given)."""
    manifest = manifest if manifest is not None else IndexManifest.read(settings.data_dir)
    if settings.encoder.backend == "transformers":
        from lodex.indexer.encoders.query_encoder import load_query_encoder

        light = load_query_encoder(encoder_settings(settings, manifest))
        if light is not None:
            return light
    return build_encoder(settings, manifest=manifest)


def chunk_tokens(settings: Settings, encoder: Encoder) -> int:
    """Chunk length in content tokens: the configured length, capped by the model, less special tokens."""
    return min(settings.chunking.max_tokens, encoder.max_length) - encoder.special_tokens


def build_chunker(settings: Settings, encoder: Encoder, manifest: IndexManifest) -> Chunker:
    """The chunker for this encoder's tokenizer, cutting as the index of `manifest` was cut (chunk_rule)."""
    size = chunk_tokens(settings, encoder)
    if not 0 <= settings.chunking.overlap < size // 2:
        raise ConfigError(f"chunking.overlap {settings.chunking.overlap} must be below half a chunk ({size // 2} tokens)", "lower chunking.overlap")
    return Chunker(encoder.token_spans, max_tokens=size, overlap=settings.chunking.overlap, rule=chunk_rule(settings, encoder, manifest))


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
    return late_chunking(enabled, settings.encoder.window_tokens, chunking.late_margin, min(chunking.max_tokens, encoder.max_length),
                         encoder.window_limit, encoder.pooling, long_only)


def whole_vector_tokens(settings: Settings, encoder: Encoder, manifest: IndexManifest) -> int:
    """chunking.document_vector for the index of `manifest`: the longest input (special tokens included) a document's
    own vector is encoded whole from (a late-chunking window: encoder.window_tokens, else twice a chunk, within the
    model), or 0 (its chunks' mean). An existing index keeps what it was built with (`IndexManifest.whole_vector_tokens`;
    one from before the option: the mean); `lodex index --rebuild` applies the setting."""
    window = settings.encoder.window_tokens or 2 * min(settings.chunking.max_tokens, encoder.max_length)
    return manifest.whole_vector_tokens(min(window, encoder.max_length) if settings.chunking.document_vector == "whole" else 0)


def open_store(settings: Settings, encoder: Encoder, data_dir: Path, create: bool, long_lived: bool = False,
               optimize_apart: bool = False, manifest: IndexManifest | None = None) -> LanceStore:
    """The store in data_dir (or on object storage, data_dir its cache), checked against this encoder and chunking
    (created when allowed); `manifest`: its record, read (pulled from object storage) when not given; the store keeps
    it as settled. The format readers' versions are checked only by the writer (create=True): a search reads stored
    passages, it extracts nothing, and so needs not import the readers. `long_lived` (watch, serve): its small
    updates save the vector index at most every watch.save_index_every_s; `optimize_apart` (serve): it optimizes
    large tables in a helper process at watch.writer_nice, its seconds of compaction kept off the query threads'."""
    manifest = manifest if manifest is not None else index_manifest(settings, data_dir)
    late = late_plan(settings, encoder, manifest)
    origin = make_origin(encoder.origin(), chunk_tokens(settings, encoder), settings.chunking.overlap, settings.chunking.title_prefix,
                         reader_versions() if create else None, late.origin() if late else None,
                         chunk_rule(settings, encoder, manifest).origin(), whole_vector_tokens(settings, encoder, manifest))
    persist_every_s = settings.watch.save_index_every_s if long_lived else PERSIST_EVERY_S
    return LanceStore.open(data_dir, origin, create=create, ann=ann_policy(settings), remote=remote_store(settings, data_dir),
                           persist_every_s=persist_every_s, optimize_nice=settings.watch.writer_nice if optimize_apart else None,
                           manifest=manifest)


def ann_policy(settings: Settings) -> AnnPolicy:
    """Which FAISS index to keep (index.ann, index.ann_above, index.compress_above, index.compressed_codes) and how an
    IVF one searches (search.nprobe, search.refine_factor)."""
    index, search = settings.index, settings.search
    return AnnPolicy(index.ann, index.ann_above, search.nprobe, index.compress_above, search.refine_factor, index.compressed_codes)


def scan_rules(settings: Settings) -> ScanRules:
    """Which files the indexer takes."""
    return ScanRules.from_settings(settings.index)


def build_indexer(settings: Settings, encoder: Encoder, store: Store, jobs: JobLog | None = None, long_lived: bool = False,
                  manifest: IndexManifest | None = None) -> Indexer:
    """The indexing pipeline over this store, recording its runs in `jobs`, chunking as the index of `manifest` keeps
    (the store's record, `LanceStore.manifest`, when not given); `long_lived` (watch, serve): its long runs keep the
    full-text index caught up as they go (watch.optimize_every_s), and it indexes locally whatever index.engine (the
    store's own pace of saving the vector index is set when it is opened: open_store)."""
    manifest = manifest if manifest is not None else _store_manifest(store)
    chunker, late = build_chunker(settings, encoder, manifest), late_plan(settings, encoder, manifest)
    whole = whole_vector_tokens(settings, encoder, manifest)
    unread = unread_languages(encoder_languages(settings)) if whole else frozenset()
    if settings.index.engine == "ray" and not long_lived:
        return _ray_indexer(settings, encoder, store, chunker, late, jobs, whole, unread, manifest)
    return Indexer(store, encoder, chunker, scan_rules(settings), settings.index, jobs=jobs, title_prefix=settings.chunking.title_prefix,
                   late=late, optimize_every_s=settings.watch.optimize_every_s if long_lived else 0.0, whole_vector=whole, unread=unread)


def _store_manifest(store: Store) -> IndexManifest:
    """The record a LanceStore keeps as it was opened (settled); another store's, read in its data dir."""
    return store.manifest if isinstance(store, LanceStore) else IndexManifest.read(store.data_dir)


def _ray_indexer(settings: Settings, encoder: Encoder, store: Store, chunker: Chunker, late: LateChunking | None,
                 jobs: JobLog | None, whole_vector: int, unread: frozenset[str], manifest: IndexManifest) -> Indexer:
    """`lodex index --ray`: the indexer whose files are read, chunked and encoded on Ray; each actor builds this encoder
    from these settings and the index's manifest, its model on index.ray_cpus_per_actor threads (unless encoder.threads
    says)."""
    from lodex.indexer.ray_engine import RayIndexer

    threads = settings.encoder.threads or max(1, round(settings.index.ray_cpus_per_actor))
    on_actor = settings.model_copy(update={"encoder": settings.encoder.model_copy(update={"threads": threads})})
    make_encoder = partial(build_encoder, on_actor, manifest=manifest)
    return RayIndexer(store, encoder, chunker, scan_rules(settings), settings.index, make_encoder, jobs=jobs,
                      title_prefix=settings.chunking.title_prefix, late=late, whole_vector=whole_vector, unread=unread)


def build_writer(settings: Settings, indexer: Indexer, root: Path, hooks: RunHooks = RunHooks()) -> IndexWriter:
    """The one writer of a long-lived process (watch, serve), at the configured CPU priority."""
    return IndexWriter(indexer, root, nice=settings.watch.writer_nice, hooks=hooks)


def build_watch(settings: Settings, indexer: Indexer, root: Path, hooks: RunHooks = RunHooks()) -> WatchService:
    """Watcher, change collector and the one writer, for `root`."""
    collector = ChangeCollector(root, settings.watch.quiet_s)
    watcher = FolderWatcher(root, scan_rules(settings), collector, settings.watch.polling, settings.watch.ignore,
                            settings.watch.poll_interval_s)
    return WatchService(build_writer(settings, indexer, root, hooks), watcher, collector)


def open_reader(settings: Settings, dim: int, manifest: IndexManifest | None = None) -> LanceStore:
    """A read-only handle on the index in settings.data_dir (searches, listings, status), at its latest version;
    `manifest`: its record (read there when not given)."""
    return LanceStore(settings.data_dir, dim, ann_policy(settings), remote_store(settings), manifest=manifest)


def build_searcher(settings: Settings, encoder: Encoder, store: Store, source: SnapshotSource | None = None) -> Searcher:
    """The query side over this store (`source`: the snapshots it shares with other searchers of the index)."""
    cfg = settings.search
    fusion = Fusion(method=cfg.fusion, dense_weight=cfg.dense_weight, rrf_k=cfg.rrf_k, bm25_weight=cfg.bm25_weight,
                    feedback_chunks=cfg.feedback_chunks, feedback_weight=cfg.feedback_weight, doc_dense_weight=cfg.doc_dense_weight,
                    hybrid_blend_alpha=cfg.hybrid_blend_alpha,
                    top_m=cfg.top_m, blend_alpha=cfg.blend_alpha, depth=cfg.candidates, keyword_passages=cfg.keyword_passages)
    return Searcher(store, encoder, passages=cfg.passages, candidates=cfg.candidates, mode=cfg.mode, ranking=cfg.ranking, fusion=fusion,
                    source=source, languages=encoder_languages(settings))
