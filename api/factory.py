"""The composition root: `open_app` opens an index as the application object (api/application.py) in a read, write
or serve role, from the core objects built here from settings (encoder, store, indexer, writer, watcher, searcher);
the only place that builds them (the CLI, the HTTP app, MCP, `lodex.open`, eval, benches and tests' fixtures take the
object or these builders; the encoder backends, the Ray indexer and the search fusion are built in encoder_backends.py,
build_ray.py and build_search.py beside it). Builders never change what they are given."""

from collections.abc import Callable
from functools import partial
from pathlib import Path

from lodex.api.application import Application, Role
from lodex.api.build_ray import ray_indexer
from lodex.api.build_search import search_fusion
from lodex.api.encoder_backends import encoder_backend, encoder_settings, transformers_encoder
from lodex.api.index_files import index_manifest, read_job_log, remote_store, require_index, wipe_index
from lodex.api.index_policy import ann_policy, chunk_rule, chunk_tokens, late_plan, scan_rules, whole_vector_tokens
from lodex.api.model.cache import encoder_languages, encoder_search
from lodex.api.serving import ServeBuilders, Serving
from lodex.api.settings import Settings
from lodex.encoders.encoder import Encoder
from lodex.encoders.model_languages import unread_languages
from lodex.indexer.chunking.chunker import Chunker
from lodex.indexer.pipeline import Indexer
from lodex.indexer.readers.readers import reader_versions
from lodex.indexer.watch_service import WatchService
from lodex.indexer.watcher import ChangeCollector, FolderWatcher
from lodex.indexer.writer import IndexWriter, RunHooks
from lodex.search.blas_threads import single_threaded_numpy_blas
from lodex.search.searcher import Searcher
from lodex.search.snapshot_source import SnapshotSource
from lodex.store.base import PERSIST_EVERY_S, Store
from lodex.store.errors import ConfigError
from lodex.store.job_log import FileRecord, JobLog
from lodex.store.lance_store import LanceStore
from lodex.store.manifest import IndexManifest
from lodex.store.origin import make_origin
from lodex.store.write_lock import WriteLock

single_threaded_numpy_blas()  # every process that loads the search or index stack (a forwarded CLI search does not)


def build_encoder(settings: Settings, data_dir: Path | None = None, manifest: IndexManifest | None = None) -> Encoder:
    """The configured encoder, loaded for the index in `data_dir` (default the settings' data dir), whose `manifest` is
    read there when not given (see encoder_settings)."""
    backend = encoder_backend(settings.encoder.backend)
    spill = settings.data_dir if data_dir is None else data_dir
    manifest = manifest if manifest is not None else IndexManifest.read(spill)
    cfg = encoder_settings(settings, manifest)
    if backend is not transformers_encoder:
        return backend(cfg)
    if settings.index.engine != "ray":  # fast mode measured and checked here before: rebuilt from its recipe, no PyTorch
        from lodex.encoders.recipe_encoder import load_fast_encoder

        light = load_fast_encoder(cfg, manifest.fast_quantization)
        if light is not None:
            return light
    return transformers_encoder(cfg, spill, manifest.fast_quantization)  # a streamed model spills beside the index


def build_query_encoder(settings: Settings, manifest: IndexManifest | None = None) -> Encoder:
    """An encoder for queries only: rebuilt without PyTorch from the recipe the full encoder left when it loaded its ONNX
    query model for these settings (a cold `lodex search` starts seconds sooner), else the full encoder; `manifest`:
    the configured index's (read when not given)."""
    manifest = manifest if manifest is not None else IndexManifest.read(settings.data_dir)
    if settings.encoder.backend == "transformers":
        from lodex.encoders.query_encoder import load_query_encoder

        light = load_query_encoder(encoder_settings(settings, manifest))
        if light is not None:
            return light
    return build_encoder(settings, manifest=manifest)


def build_chunker(settings: Settings, encoder: Encoder, manifest: IndexManifest) -> Chunker:
    """The chunker for this encoder's tokenizer, cutting as the index of `manifest` was cut (chunk_rule)."""
    size = chunk_tokens(settings, encoder)
    if not 0 <= settings.chunking.overlap < size // 2:
        raise ConfigError(f"chunking.overlap {settings.chunking.overlap} must be below half a chunk ({size // 2} tokens)", "lower chunking.overlap")
    return Chunker(encoder.token_spans, max_tokens=size, overlap=settings.chunking.overlap, rule=chunk_rule(settings, encoder, manifest))


def open_store(
    settings: Settings,
    encoder: Encoder,
    data_dir: Path,
    create: bool,
    long_lived: bool = False,
    optimize_apart: bool = False,
    manifest: IndexManifest | None = None,
) -> LanceStore:
    """The store in data_dir (or on object storage, data_dir its cache), checked against this encoder and chunking
    (created when allowed); `manifest`: its record, read (pulled from object storage) when not given; the store keeps
    it as settled. The format readers' versions are checked only by the writer (create=True): a search reads stored
    passages, it extracts nothing, and so needs not import the readers. `long_lived` (watch, serve): its small
    updates save the vector index at most every watch.save_index_every_s; `optimize_apart` (serve): it optimizes
    large tables in a helper process at watch.writer_nice, its seconds of compaction kept off the query threads'."""
    manifest = manifest if manifest is not None else index_manifest(settings, data_dir)
    late = late_plan(settings, encoder, manifest)
    origin = make_origin(
        encoder.origin(),
        chunk_tokens(settings, encoder),
        settings.chunking.overlap,
        settings.chunking.title_prefix,
        reader_versions() if create else None,
        late.origin() if late else None,
        chunk_rule(settings, encoder, manifest).origin(),
        whole_vector_tokens(settings, encoder, manifest),
    )
    persist_every_s = settings.watch.save_index_every_s if long_lived else PERSIST_EVERY_S
    return LanceStore.open(
        data_dir,
        origin,
        create=create,
        ann=ann_policy(settings),
        remote=remote_store(settings, data_dir),
        persist_every_s=persist_every_s,
        optimize_nice=settings.watch.writer_nice if optimize_apart else None,
        manifest=manifest,
    )


def build_indexer(
    settings: Settings, encoder: Encoder, store: Store, jobs: JobLog | None = None, long_lived: bool = False, manifest: IndexManifest | None = None
) -> Indexer:
    """The indexing pipeline over this store, recording its runs in `jobs`, chunking as the index of `manifest` keeps
    (the store's record, `LanceStore.manifest`, when not given); `long_lived` (watch, serve): its long runs keep the
    full-text index caught up as they go (watch.optimize_every_s), and it indexes locally whatever index.engine (the
    store's own pace of saving the vector index is set when it is opened: open_store)."""
    manifest = manifest if manifest is not None else _store_manifest(store)
    chunker, late = build_chunker(settings, encoder, manifest), late_plan(settings, encoder, manifest)
    whole = whole_vector_tokens(settings, encoder, manifest)
    unread = unread_languages(encoder_languages(settings)) if whole else frozenset()
    if settings.index.engine == "ray" and not long_lived:
        return ray_indexer(settings, encoder, store, chunker, late, jobs, whole, unread, partial(build_encoder, manifest=manifest))
    return Indexer(
        store,
        encoder,
        chunker,
        scan_rules(settings),
        settings.index,
        jobs=jobs,
        title_prefix=settings.chunking.title_prefix,
        late=late,
        optimize_every_s=settings.watch.optimize_every_s if long_lived else 0.0,
        whole_vector=whole,
        unread=unread,
    )


def _store_manifest(store: Store) -> IndexManifest:
    """The record a LanceStore keeps as it was opened (settled); another store's, read in its data dir."""
    return store.manifest if isinstance(store, LanceStore) else IndexManifest.read(store.data_dir)


def build_writer(settings: Settings, indexer: Indexer, root: Path, hooks: RunHooks = RunHooks()) -> IndexWriter:
    """The one writer of a long-lived process (watch, serve), at the configured CPU priority."""
    return IndexWriter(indexer, root, nice=settings.watch.writer_nice, hooks=hooks)


def build_watch(settings: Settings, indexer: Indexer, root: Path, hooks: RunHooks = RunHooks()) -> WatchService:
    """Watcher, change collector and the one writer, for `root`."""
    collector = ChangeCollector(root, settings.watch.quiet_s)
    watcher = FolderWatcher(root, scan_rules(settings), collector, settings.watch.polling, settings.watch.ignore, settings.watch.poll_interval_s)
    return WatchService(build_writer(settings, indexer, root, hooks), watcher, collector)


def open_reader(settings: Settings, dim: int, manifest: IndexManifest | None = None) -> LanceStore:
    """A read-only handle on the index in settings.data_dir (searches, listings, status), at its latest version;
    `manifest`: its record (read there when not given)."""
    return LanceStore(settings.data_dir, dim, ann_policy(settings), remote_store(settings), manifest=manifest)


def build_searcher(settings: Settings, encoder: Encoder, store: Store, source: SnapshotSource | None = None) -> Searcher:
    """The query side over this store (`source`: the snapshots it shares with other searchers of the index)."""
    cfg = settings.search
    return Searcher(
        store,
        encoder,
        passages=cfg.passages,
        candidates=cfg.candidates,
        mode=cfg.mode,
        ranking=cfg.ranking,
        fusion=search_fusion(cfg, encoder_search(settings)),
        source=source,
        languages=encoder_languages(settings),
    )


def open_app(
    settings: Settings,
    role: Role,
    root: Path | None = None,
    *,
    encoder: Encoder | None = None,
    rebuild: bool = False,
    long_lived: bool = False,
    watch: bool = True,
    on_file: Callable[[FileRecord], None] | None = None,
) -> Application:
    """The index of `settings` as the application object, in `role`: "read" (StoreError where there is no index),
    "write" for the folder `root` (`rebuild`: wiped first; `long_lived`: watch), or "serve" (`lodex serve`: the write
    side for `root` and its writer, `watch` with the watcher; a read-only replica with serve.read_only). `encoder`:
    one already loaded (tests, benches); `on_file`: told of each file the serving writer indexes or fails."""
    if role == "read":
        return _open_read(settings, encoder)
    if role == "write":
        assert root is not None, "a write side mirrors a folder"
        return _open_write(settings, root, rebuild, encoder, long_lived)
    if settings.serve.read_only:
        app = _open_replica(settings, encoder)
    else:
        assert root is not None, "a writing service mirrors a folder"
        # optimize_apart: its seconds of compaction kept off the query threads' runtime
        app = _open_write(settings, root, encoder=encoder, long_lived=True, optimize_apart=True, role="serve")
    try:
        return app.serve(
            Serving(settings, app.encoder, app.store if isinstance(app.store, LanceStore) else None, _serve_builders(settings, app), watch, on_file)
        )
    except BaseException:
        app.release()
        raise


def _open_read(settings: Settings, encoder: Encoder | None) -> Application:
    """The query encoder (the light ONNX one when it exists), a read-only store at the latest committed version, and a
    searcher over it, built on first use."""
    manifest = require_index(settings)  # read once, before the encoder
    encoder = encoder or build_query_encoder(settings, manifest)
    store = open_store(settings, encoder, settings.data_dir, create=False, manifest=manifest)
    return Application(settings, "read", encoder, store, None, None, partial(build_searcher, settings, encoder, store))


def _open_write(
    settings: Settings,
    root: Path,
    rebuild: bool = False,
    encoder: Encoder | None = None,
    long_lived: bool = False,
    optimize_apart: bool = False,
    role: Role = "write",
) -> Application:
    """The write side of one index: the write lock (one writing process), the job log (checked against the folder the
    index mirrors), the encoder, the store and the indexer; `long_lived` and `optimize_apart` as open_store takes them."""
    remote = remote_store(settings)
    lock = WriteLock(settings.data_dir, remote).acquire()
    try:
        if rebuild:
            wipe_index(settings.data_dir, remote)
        manifest = index_manifest(settings)  # read once (pulled from object storage first), before the encoder
        jobs = JobLog(settings.data_dir, remote)
        try:
            if jobs.root and Path(jobs.root) != root:
                raise ConfigError(
                    f"the index in {settings.location} mirrors {jobs.root}, not {root}",
                    "give that folder, use another --data-dir for this one, or `lodex index --rebuild` to replace the index",
                )
            encoder = encoder or build_encoder(settings, manifest=manifest)
            store = open_store(
                settings, encoder, settings.data_dir, create=True, long_lived=long_lived, optimize_apart=optimize_apart, manifest=manifest
            )
            jobs.set_root(str(root))
            indexer = build_indexer(settings, encoder, store, jobs, long_lived)
        except BaseException:
            jobs.close()
            raise
    except BaseException:
        lock.release()
        raise
    return Application(settings, role, encoder, store, jobs, root, partial(build_searcher, settings, encoder, store), indexer, lock)


def _open_replica(settings: Settings, encoder: Encoder | None) -> Application:
    """A read-only replica's reads (serve.read_only): the encoder and the job log of an index another process writes."""
    manifest = index_manifest(settings)  # read once (pulled from object storage first), before the encoder
    encoder = encoder or build_encoder(settings, manifest=manifest)
    open_store(settings, encoder, settings.data_dir, create=False, manifest=manifest).close()  # an index there, for this encoder
    jobs = read_job_log(settings, manifest)
    reader = partial(open_reader, settings, encoder.dim)
    return Application(settings, "serve", encoder, None, jobs, Path(jobs.root or ""), lambda: build_searcher(settings, encoder, reader()))


def _serve_builders(settings: Settings, app: Application) -> ServeBuilders:
    """What the serve role builds as it starts: readers' store handles, their searchers and the writer or watcher."""
    encoder, indexer, root = app.encoder, app.indexer, app.root
    searcher = partial(build_searcher, settings, encoder)
    if indexer is None or root is None:
        return ServeBuilders(partial(open_reader, settings, encoder.dim), searcher)
    return ServeBuilders(
        partial(open_reader, settings, encoder.dim),
        searcher,
        partial(build_watch, settings, indexer, root),
        partial(build_writer, settings, indexer, root),
    )
