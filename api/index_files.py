"""The configured index's small files, read before any heavy import (no numpy, Arrow or Lance): where it lives, its
manifest (its origin record) and its job log — what `lodex search` and `lodex status` need before asking a running
server — and the wipe a rebuild starts with."""

import shutil
from pathlib import Path

from lodex.api.settings import Settings
from lodex.store.errors import StoreError
from lodex.store.job_log import JobLog
from lodex.store.lease import LEASE_FILE
from lodex.store.manifest import IndexManifest
from lodex.store.object_store import ObjectStore
from lodex.store.write_lock import LOCK_FILE

__all__ = ["index_manifest", "read_job_log", "remote_store", "require_index", "wipe_index"]


def remote_store(settings: Settings, data_dir: Path | None = None) -> ObjectStore | None:
    """The object store holding the index when index.data_dir is a URI (s3://bucket/prefix, …), else None; None too
    for another `data_dir` than the configured one's (an evaluation's temporary index)."""
    uri = settings.remote_uri
    if uri is None or (data_dir is not None and data_dir != settings.data_dir):
        return None
    return ObjectStore(uri, settings.storage_options(), settings.serve.refresh_s)


def index_manifest(settings: Settings, data_dir: Path | None = None) -> IndexManifest:
    """The manifest of the configured index (`exists` False: no index there yet), or of the one in `data_dir`; for one
    on object storage, its record first copied into the local cache (read before the encoder is built, which takes its
    precision from it)."""
    return IndexManifest.read(settings.data_dir if data_dir is None else data_dir, remote_store(settings, data_dir))


def require_index(settings: Settings) -> IndexManifest:
    """The configured index's manifest (see index_manifest); StoreError unless its data dir holds an index."""
    manifest = index_manifest(settings)
    if not manifest.exists:
        raise StoreError(f"no index in {settings.location}", "build one first with `lodex index DIR`")
    return manifest


def read_job_log(settings: Settings, manifest: IndexManifest | None = None) -> JobLog:
    """The job log of the configured index, for reading (a replica's copy for one on object storage); `manifest`: the
    index's, read by the caller (which has checked there is an index), else read here (require_index)."""
    if manifest is None:
        require_index(settings)
    remote = remote_store(settings)
    return JobLog.replica(settings.data_dir, remote) if remote is not None else JobLog(settings.data_dir)


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
