"""The configured index's small files, read before any heavy import (no numpy, Arrow or Lance): where it lives,
its origin record and its job log — what `lodex search` and `lodex status` need before asking a running server."""

from pathlib import Path
from typing import Any

from lodex.api.settings import Settings
from lodex.store.errors import StoreError
from lodex.store.job_log import JobLog
from lodex.store.object_store import ObjectStore
from lodex.store.origin import ORIGIN_FILE, read_origin

__all__ = ["index_origin", "read_job_log", "remote_store", "require_index"]


def remote_store(settings: Settings, data_dir: Path | None = None) -> ObjectStore | None:
    """The object store holding the index when index.data_dir is a URI (s3://bucket/prefix, …), else None; None too
    for another `data_dir` than the configured one's (an evaluation's temporary index)."""
    uri = settings.remote_uri
    if uri is None or (data_dir is not None and data_dir != settings.data_dir):
        return None
    return ObjectStore(uri, settings.storage_options(), settings.serve.refresh_s)


def index_origin(settings: Settings) -> dict[str, Any] | None:
    """The origin record of the configured index (None: no index there yet); for one on object storage, first copied
    into the local cache, where the encoder and late chunking's plan read it."""
    remote = remote_store(settings)
    if remote is not None:
        remote.pull(ORIGIN_FILE, settings.data_dir)
    return read_origin(settings.data_dir)


def require_index(settings: Settings) -> None:
    """StoreError unless the configured data dir holds an index (see index_origin)."""
    if index_origin(settings) is None:
        raise StoreError(f"no index in {settings.location}", "build one first with `lodex index DIR`")


def read_job_log(settings: Settings) -> JobLog:
    """The job log of the configured index, for reading (a replica's copy for one on object storage)."""
    require_index(settings)
    remote = remote_store(settings)
    return JobLog.replica(settings.data_dir, remote) if remote is not None else JobLog(settings.data_dir)
