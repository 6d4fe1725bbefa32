"""A model's files fetched from the hub for `lodex model pull`: each file's expected hash and size, and its download —
resumable, never past the announced size, checked against the hash."""

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from lodex.api.model.pull_guard import announced_size, is_hex, open_part, write_within
from lodex.encoders.errors import ModelError

_CHUNK = 1 << 20
Progress = Callable[[str], None]


@dataclass(frozen=True)
class HubFile:
    """One file of a model repository and the hash the hub gives for it: ("sha256", hex) for LFS files, ("git-sha1",
    hex) — the git blob id — for the others."""

    name: str
    size: int
    algorithm: str
    digest: str


@dataclass(frozen=True)
class Source:
    """Where a model's files come from: the hub, the model, the commit, and the hub's listing of it."""

    endpoint: str
    model_id: str
    sha: str
    info: dict[str, Any]

    def url(self, name: str) -> str:
        return f"{self.endpoint}/{self.model_id}/resolve/{self.sha}/{name}"


class CutOff(ModelError):
    """A download cut off `attempts` times: what it got is kept, for the next run to resume."""


def file_hashes(client: httpx.Client, source: Source, names: list[str]) -> dict[str, HubFile]:
    """Each file's expected hash and size: from the listing when it carries them (lfs.sha256, blobId), else from the
    headers of a HEAD of the file (X-Linked-Etag: the LFS sha256; ETag: the git blob id)."""
    listed: dict[str, dict[str, Any]] = {str(s.get("rfilename")): s for s in source.info.get("siblings") or [] if isinstance(s, dict)}
    out = {}
    for name in names:
        sibling = listed.get(name) or {}
        lfs: dict[str, Any] = sibling["lfs"] if isinstance(sibling.get("lfs"), dict) else {}
        lfs_size, blob_size = announced_size(lfs.get("size")), announced_size(sibling.get("size"))
        if is_hex(lfs.get("sha256"), 64) and lfs_size is not None:
            out[name] = HubFile(name, lfs_size, "sha256", str(lfs["sha256"]))
        elif is_hex(sibling.get("blobId"), 40) and blob_size is not None:
            out[name] = HubFile(name, blob_size, "git-sha1", str(sibling["blobId"]))
        else:
            out[name] = _head_hash(client, source.url(name), name)
    return out


def _head_hash(client: httpx.Client, url: str, name: str) -> HubFile:
    try:
        response = client.head(url)
    except httpx.HTTPError as exc:
        raise ModelError(f"cannot reach the hub for {name}: {type(exc).__name__}", "check the network and run the command again") from exc
    linked = response.headers.get("x-linked-etag", "").strip('"').removeprefix("W/").strip('"')
    etag = response.headers.get("etag", "").removeprefix("W/").strip('"')
    size = announced_size(response.headers.get("x-linked-size") or response.headers.get("content-length"))
    fix = "use a hub or mirror that serves the files' hashes and sizes, or download the model by hand and set encoder.model to it"
    if size is None:
        raise ModelError(f"the hub gives no size for {name} (HTTP {response.status_code}, no X-Linked-Size or Content-Length)", fix)
    if is_hex(linked, 64):
        return HubFile(name, size, "sha256", linked)
    if is_hex(etag, 40) or is_hex(etag, 64):
        return HubFile(name, size, "git-sha1" if len(etag) == 40 else "sha256", etag)
    raise ModelError(f"the hub gives no hash for {name} (HTTP {response.status_code}, no X-Linked-Etag or ETag)", fix)


def fetch_file(client: httpx.Client, url: str, dest: Path, expected: HubFile, attempts: int, progress: Progress) -> list[str]:
    """Download `url` into `dest` unless it is there with the right hash; a cut-off download resumes where it stopped
    (an HTTP Range request), `attempts` times in this call, and from its .incomplete file in the next."""
    if dest.is_file() and _digest(dest, expected.algorithm) == expected.digest.lower():
        return []
    part = dest.with_name(dest.name + ".incomplete")
    for attempt in range(1, attempts + 1):
        try:
            _download(client, url, part, expected)
            break
        except httpx.HTTPError as exc:
            have = part.stat().st_size if part.exists() else 0
            if attempt == attempts:
                raise CutOff(
                    f"the download of {expected.name} was cut off at {have} bytes ({type(exc).__name__})",
                    "run the same command again: it resumes where it stopped",
                ) from exc
            progress(f"{expected.name}: cut off at {have} bytes, resuming")
    got = _digest(part, expected.algorithm)
    if got != expected.digest.lower():
        part.unlink()
        raise ModelError(
            f"{expected.name} does not match the hub's {expected.algorithm} ({got[:12]}… instead of {expected.digest[:12]}…)",
            "run the command again; if it fails the same way, the hub or mirror serves a corrupted file",
        )
    part.replace(dest)
    progress(f"{expected.name}: {dest.stat().st_size} bytes, {expected.algorithm} checked")
    return [expected.name]


def _download(client: httpx.Client, url: str, part: Path, expected: HubFile) -> None:
    """The file's bytes after those `part` holds, as they arrive (a cut-off download keeps every byte it got), never
    past the size the hub announced, and undecoded (the hash is of the bytes themselves)."""
    size = expected.size
    have = part.stat().st_size if part.is_file() else 0
    if have > size:
        part.unlink()
        have = 0
    headers = {"Range": f"bytes={have}-"} if have else {}
    with client.stream("GET", url, headers=headers, follow_redirects=True) as response:
        if response.status_code == 416 and have:  # already whole
            return
        if response.status_code not in (200, 206):
            raise ModelError(f"the hub answered HTTP {response.status_code} for {expected.name}", "run the command again later")
        start = have if response.status_code == 206 else 0
        too_long = ModelError(
            f"{expected.name} is larger than the {size:,} bytes the hub announced for it",
            "the hub or mirror serves another file than it lists: check HF_ENDPOINT, or try again later",
        )
        if start + (announced_size(response.headers.get("content-length")) or 0) > size:
            raise too_long
        with open_part(part, append=start > 0) as out:
            write_within(response.iter_raw(), out, size - start, too_long)


def _digest(path: Path, algorithm: str) -> str:
    """sha256 of the file, or its git blob id (sha1 of "blob SIZE\\0" + content)."""
    if algorithm == "sha256":
        h = hashlib.sha256()
    else:
        h = hashlib.sha1()
        h.update(f"blob {path.stat().st_size}\0".encode())
    with path.open("rb") as source:
        while block := source.read(_CHUNK):
            h.update(block)
    return h.hexdigest()
