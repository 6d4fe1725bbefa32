"""The write side of one index (WriteSide), owned in one place, and the wipe a rebuild starts with."""

import shutil
from pathlib import Path
from types import TracebackType

from lodex.api.factory import build_encoder, build_indexer, build_watch, build_writer, open_store
from lodex.api.index_files import index_manifest, remote_store
from lodex.api.settings import Settings
from lodex.indexer.encoders.encoder import Encoder
from lodex.indexer.watch_service import WatchService
from lodex.indexer.writer import IndexWriter, RunHooks
from lodex.store.errors import ConfigError, StoreError
from lodex.store.job_log import JobLog
from lodex.store.lease import LEASE_FILE
from lodex.store.manifest import IndexManifest
from lodex.store.object_store import ObjectStore
from lodex.store.write_lock import LOCK_FILE, WriteLock


def wipe_index(data_dir: Path, remote: ObjectStore | None = None) -> None:
    """Remove an index (only a folder that holds one, or an empty one); the write lock file stays. On object storage
    (data_dir its cache): the index under the prefix, its lease kept, and the cache."""
    if remote is not None:
        if not IndexManifest.present_on(remote) and any(name != LEASE_FILE for name in remote.entries()):
            raise StoreError(f"{remote} does not look like a lodex index; not deleting it", "pass the right --data-dir")
        remote.wipe(keep=(LEASE_FILE,))
    if not data_dir.exists():
        return
    if not IndexManifest.present(data_dir) and any(p.name != LOCK_FILE for p in data_dir.iterdir()):
        raise StoreError(f"{data_dir} does not look like a lodex index; not deleting it", "pass the right --data-dir")
    for child in data_dir.iterdir():
        if child.name != LOCK_FILE:
            shutil.rmtree(child) if child.is_dir() else child.unlink()


class WriteSide:
    """The write side of one index, owned in one place: the write lock (one writing process), the job log (checked
    against the folder the index mirrors), the encoder, the store and the indexer. The CLI's index, retry and watch
    and `lodex serve` all open it; closing it releases the lock."""

    def __init__(self, settings: Settings, root: Path, rebuild: bool = False, encoder: Encoder | None = None,
                 long_lived: bool = False, optimize_apart: bool = False) -> None:
        """`long_lived` (watch, serve) and `optimize_apart` (serve): as open_store and build_indexer take them."""
        self.settings = settings
        self.root = root
        remote = remote_store(settings)
        self.lock = WriteLock(settings.data_dir, remote).acquire()
        try:
            if rebuild:
                wipe_index(settings.data_dir, remote)
            manifest = index_manifest(settings)  # read once (pulled from object storage first), before the encoder
            self.jobs = JobLog(settings.data_dir, remote)
            try:
                if self.jobs.root and Path(self.jobs.root) != root:
                    raise ConfigError(f"the index in {settings.location} mirrors {self.jobs.root}, not {root}",
                                      "give that folder, use another --data-dir for this one, or `lodex index --rebuild` to replace the index")
                self.encoder = encoder or build_encoder(settings, manifest=manifest)
                self.store = open_store(settings, self.encoder, settings.data_dir, create=True, long_lived=long_lived,
                                        optimize_apart=optimize_apart, manifest=manifest)
                self.jobs.set_root(str(root))
                self.indexer = build_indexer(settings, self.encoder, self.store, self.jobs, long_lived)
            except BaseException:
                self.jobs.close()
                raise
        except BaseException:
            self.lock.release()
            raise

    def writer(self, hooks: RunHooks = RunHooks()) -> IndexWriter:
        """The one writer thread of this index (not started)."""
        return build_writer(self.settings, self.indexer, self.root, hooks)

    def watch(self, hooks: RunHooks = RunHooks()) -> WatchService:
        """The folder watcher feeding the one writer (not started)."""
        return build_watch(self.settings, self.indexer, self.root, hooks)

    def close(self) -> None:
        """Stop the store's optimizing helper process (if it has one), close the job log and release the write lock."""
        self.store.close()
        self.jobs.close()
        self.lock.release()

    def __enter__(self) -> "WriteSide":
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
