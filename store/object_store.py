"""An index on object storage (s3://, gs://, az://): where its Lance tables live, and the small files kept beside them
(origin record, persisted vector index, job log copy, writer lease), read and written through pyarrow's file systems."""

import fnmatch
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from lodex.store.errors import StoreError

# Lance's schemes for object stores; "s3+ddb" is S3 with Lance's DynamoDB commit store, for S3-compatible stores
# without conditional writes (If-None-Match), where two commits could otherwise overwrite each other.
SCHEMES = ("s3", "s3+ddb", "gs", "az")
ACCESS_FIX = "check storage.endpoint, storage.region, the bucket and the credentials (AWS_ACCESS_KEY_ID, …)"


def is_remote(location: str) -> bool:
    """Whether an index location is an object-store URI rather than a folder on this machine."""
    scheme, sep, _ = location.partition("://")
    return bool(sep) and scheme in SCHEMES


class ObjectStore:
    """One index's prefix on an object store: `uri` (scheme://bucket/prefix) and the Lance storage options for it
    (endpoint, region, allow_http, …; credentials come from the usual environment variables, AWS_ACCESS_KEY_ID and
    the like). `refresh_s`: how long a reader trusts the versions it last read before asking again."""

    def __init__(self, uri: str, options: dict[str, str] | None = None, refresh_s: float = 1.0) -> None:
        if not is_remote(uri):
            raise StoreError(f"{uri} is not an object-store URI", f"use one of {', '.join(s + '://bucket/prefix' for s in SCHEMES)}")
        parts = urlsplit(uri)
        if not parts.netloc:
            raise StoreError(f"{uri} names no bucket", "write it as scheme://bucket/prefix")
        self.uri = uri.rstrip("/")
        self.scheme = parts.scheme
        self.base = f"{parts.netloc}/{parts.path.strip('/')}".rstrip("/")  # bucket/prefix, as pyarrow names it
        self._query = f"?{parts.query}" if parts.query else ""  # s3+ddb://bucket/prefix?ddbTableName=…
        self.options = dict(options or {})
        self.refresh_s = refresh_s
        self._fs: Any = None
        self._fs_lock = threading.Lock()

    @property
    def lance_uri(self) -> str:
        """Where the Lance tables live (as under a local data dir: a `lance` folder)."""
        return f"{self.scheme}://{self.base}/lance{self._query}"

    def __str__(self) -> str:
        return self.uri

    # ---- the file system -----------------------------------------------------------------
    def filesystem(self) -> Any:
        """pyarrow's file system for this store, configured from the same options Lance gets (made once)."""
        with self._fs_lock:
            if self._fs is None:
                self._fs = self._make_fs()
            return self._fs

    def _make_fs(self) -> Any:
        import pyarrow.fs as pafs

        opt = {k.lower(): v for k, v in self.options.items()}
        if self.scheme.startswith("s3"):
            endpoint = opt.get("aws_endpoint") or opt.get("endpoint") or ""
            split = urlsplit(endpoint) if "://" in endpoint else None
            return pafs.S3FileSystem(
                region=opt.get("aws_region") or opt.get("region") or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None,
                endpoint_override=(split.netloc if split else endpoint) or None,
                scheme=(split.scheme if split else "https" if opt.get("allow_http", "false") != "true" else "http"),
                access_key=opt.get("aws_access_key_id"),
                secret_key=opt.get("aws_secret_access_key"),
                session_token=opt.get("aws_session_token"),
            )
        if self.scheme == "gs":
            return pafs.GcsFileSystem()
        account = opt.get("azure_storage_account_name") or opt.get("account_name") or os.environ.get("AZURE_STORAGE_ACCOUNT_NAME", "")
        key = opt.get("azure_storage_account_key") or opt.get("account_key") or os.environ.get("AZURE_STORAGE_ACCOUNT_KEY")
        return pafs.AzureFileSystem(account_name=account, account_key=key)

    def _path(self, name: str) -> str:
        return f"{self.base}/{name}"

    # ---- small files beside the tables ---------------------------------------------------
    def get(self, name: str) -> bytes | None:
        """The bytes of the file `name` under the prefix, or None when there is none."""
        import pyarrow.fs as pafs

        with _mapped(f"read {name} from {self.uri}"):
            fs = self.filesystem()
            if fs.get_file_info(self._path(name)).type != pafs.FileType.File:
                return None
            with fs.open_input_stream(self._path(name)) as stream:
                return bytes(stream.read())

    def put(self, name: str, data: bytes) -> None:
        """Write the file `name` (an object store replaces an object whole: readers see the old or the new one)."""
        with _mapped(f"write {name} to {self.uri}"), self.filesystem().open_output_stream(self._path(name)) as stream:
            stream.write(data)

    def delete(self, name: str) -> None:
        """Remove the file `name` (absent: nothing to do)."""
        import pyarrow.fs as pafs

        with _mapped(f"delete {name} from {self.uri}"):
            fs = self.filesystem()
            if fs.get_file_info(self._path(name)).type == pafs.FileType.File:
                fs.delete_file(self._path(name))

    def names(self, pattern: str = "*") -> list[str]:
        """Names of the files directly under the prefix that match a glob, sorted."""
        import pyarrow.fs as pafs

        with _mapped(f"list {self.uri}"):
            infos = self.filesystem().get_file_info(pafs.FileSelector(self.base, allow_not_found=True))
        return sorted(i.base_name for i in infos if i.type == pafs.FileType.File and fnmatch.fnmatch(i.base_name, pattern))

    def entries(self) -> list[str]:
        """Names of everything directly under the prefix (files and folders)."""
        import pyarrow.fs as pafs

        with _mapped(f"list {self.uri}"):
            return sorted(i.base_name for i in self.filesystem().get_file_info(pafs.FileSelector(self.base, allow_not_found=True)))

    def wipe(self, keep: tuple[str, ...] = ()) -> None:
        """Remove everything under the prefix (tables included) but the files named in `keep`."""
        import pyarrow.fs as pafs

        with _mapped(f"delete the index in {self.uri}"):
            fs = self.filesystem()
            for info in fs.get_file_info(pafs.FileSelector(self.base, allow_not_found=True)):
                if info.type == pafs.FileType.Directory:
                    fs.delete_dir(info.path)
                elif info.base_name not in keep:
                    fs.delete_file(info.path)

    # ---- the local cache -----------------------------------------------------------------
    def pull(self, name: str, folder: Path, as_name: str | None = None) -> bool:
        """Copy the file `name` into `folder` (replaced atomically; as `as_name` when given); when the store has
        none, the local copy goes too. True when there is one."""
        target = folder / (as_name or name)
        data = self.get(name)
        if data is None:
            target.unlink(missing_ok=True)
            return False
        folder.mkdir(parents=True, exist_ok=True)
        temp = folder / f".{target.name}.{os.getpid()}.{threading.get_ident()}.part"
        temp.write_bytes(data)
        os.replace(temp, target)
        return True

    def push(self, path: Path, name: str | None = None) -> None:
        """Upload a local file under its own name (or `name`)."""
        self.put(name or path.name, path.read_bytes())


@contextmanager
def _mapped(action: str) -> Iterator[None]:
    """Object-store failures (network, credentials, a missing bucket) become one StoreError with the fix (the vendor's
    exception kept as its cause)."""
    try:
        yield
    except (OSError, ValueError) as exc:
        detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise StoreError(f"cannot {action}: {detail}", ACCESS_FIX) from exc
