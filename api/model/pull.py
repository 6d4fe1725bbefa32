"""`lodex model pull ID`: a model from the Hugging Face hub (or the mirror in HF_ENDPOINT) into lodex's model cache —
resumable, each file checked against the hub's hash, refused before its weights are fetched when lodex cannot run it."""

import hashlib
import io
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from lodex.api.model.cache import cached_model, is_model_id
from lodex.api.model.pull_guard import (
    announced_size,
    drop_remote_code,
    fresh_staging,
    is_hex,
    no_pickles,
    open_part,
    pick_files,
    redirect_guard,
    target,
    write_within,
)
from lodex.encoders.errors import ModelError
from lodex.encoders.model_info import read_model_declarations, read_model_dir
from lodex.encoders.settings import EncoderSettings

DEFAULT_ENDPOINT = "https://huggingface.co"
MANIFEST = ".lodex-pull.json"
_ST_FILES = ("modules.json", "config_sentence_transformers.json", "sentence_bert_config.json", "1_Pooling/config.json")
_EMBEDDING_PIPELINES = ("sentence-similarity", "feature-extraction")
_CHUNK = 1 << 20
_MAX_LISTING = 16 << 20  # bytes of the hub's listing of a model read at most (a real one is a few kB)
Progress = Callable[[str], None]


@dataclass(frozen=True)
class HubFile:
    """One file of a model repository and the hash the hub gives for it: ("sha256", hex) for LFS files, ("git-sha1",
    hex) — the git blob id — for the others."""

    name: str
    size: int
    algorithm: str
    digest: str


def hub_endpoint() -> str:
    """$HF_ENDPOINT, else the Hugging Face hub."""
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def pull_model(
    model_id: str,
    cfg: EncoderSettings,
    endpoint: str,
    revision: str = "main",
    force: bool = False,
    progress: Progress = lambda line: None,
    attempts: int = 3,
    timeout_s: float = 60.0,
) -> dict[str, Any]:
    """Fetch `model_id` at `revision` into the model cache; a ModelError (one line, with the fix) when the hub cannot be
    reached, a file does not match its hash, or lodex cannot run the model. Returns what was done, for the CLI. A
    refused pull leaves the cache as it was; a cut-off one keeps what it got for the next run."""
    if not is_model_id(model_id):
        raise ModelError(f"{model_id!r} is not a model id", "give the hub's owner/name, e.g. intfloat/multilingual-e5-small")
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        raise ModelError("HF_HUB_OFFLINE is set: `lodex model pull` needs the hub", "unset HF_HUB_OFFLINE for this command")
    final = cached_model(cfg, model_id)
    staging = final.with_name(f".{final.name}.partial")
    with httpx.Client(
        timeout=timeout_s,
        follow_redirects=False,
        max_redirects=5,
        headers={"Accept-Encoding": "identity"},
        event_hooks={"request": [redirect_guard(endpoint)]},
    ) as client:
        info = _get_json(client, f"{endpoint}/api/models/{model_id}/revision/{revision}", model_id)
        sha = _commit(info, revision, model_id)
        done = _read_manifest(final)
        if done.get("sha") == sha and done.get("id") == model_id:
            progress(f"{model_id} is up to date in {final}")
            return {"model": model_id, "revision": sha, "path": str(final), "fetched": [], "up_to_date": True}
        names = [str(s.get("rfilename")) for s in info.get("siblings") or [] if isinstance(s, dict) and s.get("rfilename")]
        small, weights, pickles = pick_files(names)
        if not force:
            _check_embedding(model_id, info, names)
        if not weights:
            raise no_pickles(model_id, pickles)
        try:
            fresh_staging(staging)
            fetched, files, dropped = _fetch_model(client, Source(endpoint, model_id, sha, info), small, weights, staging, attempts, progress)
        except ModelError as exc:
            if not isinstance(exc, CutOff):
                shutil.rmtree(staging, ignore_errors=True)
            raise
    manifest = {
        "id": model_id,
        "sha": sha,
        "endpoint": endpoint,
        "files": {n: [f.algorithm, f.digest] for n, f in files.items()},
        "dropped_auto_map": dropped,
    }
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=1))
    _install(staging, final)
    progress(f"pulled {model_id} ({sha[:12]}) into {final}")
    return {"model": model_id, "revision": sha, "path": str(final), "fetched": fetched, "up_to_date": False}


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


def _fetch_model(
    client: httpx.Client, source: Source, small: list[str], weights: list[str], staging: Path, attempts: int, progress: Progress
) -> tuple[list[str], dict[str, HubFile], list[str]]:
    """The small files, checked by the `model check` rules that need no weights (the model's own code dropped), then
    the weights, checked again: the names fetched, every file's hash, the configs whose auto_map was dropped."""
    files = _hashes(client, source, small + weights)
    fetched = []
    for name in small:
        fetched += _fetch(client, source.url(name), target(staging, name), files[name], attempts, progress)
    dropped = drop_remote_code(staging, progress)
    _runnable(source.model_id, staging, read_model_declarations)  # before the weights are fetched
    for name in weights:
        fetched += _fetch(client, source.url(name), target(staging, name), files[name], attempts, progress)
    _runnable(source.model_id, staging, read_model_dir)
    return fetched, files, dropped


def _commit(info: dict[str, Any], revision: str, model_id: str) -> str:
    """The commit the hub resolved `revision` to (its 40 hex digits), else `revision` itself when it names none."""
    sha = info.get("sha")
    if sha is None:
        return revision
    if not is_hex(sha, 40):
        raise ModelError(f"the hub's answer for {model_id} names no valid commit ({str(sha)[:50]!r})", "check HF_ENDPOINT")
    return str(sha)


def _runnable(model_id: str, staging: Path, check: Callable[[Path], object]) -> None:
    """`check` (the `model check` rules) on the files fetched so far, its refusal naming the model rather than the folder."""
    try:
        check(staging)
    except ModelError as exc:
        raise ModelError(f"{model_id} cannot run in lodex: {exc.message.replace(str(staging), 'the model')}", exc.fix) from exc


def _get_json(client: httpx.Client, url: str, model_id: str) -> dict[str, Any]:
    """The hub's listing of the model, read up to _MAX_LISTING bytes."""
    body = io.BytesIO()
    try:
        with client.stream("GET", url, follow_redirects=True) as response:
            status = response.status_code
            if status == 200:
                write_within(
                    response.iter_raw(),
                    body,
                    _MAX_LISTING,
                    ModelError(f"the hub's listing of {model_id} is larger than {_MAX_LISTING >> 20} MB", "check HF_ENDPOINT"),
                )
    except httpx.HTTPError as exc:
        raise ModelError(
            f"cannot reach the hub at {url.split('/api/')[0]} ({type(exc).__name__})", "check the network, or set HF_ENDPOINT to a reachable mirror"
        ) from exc
    if status in (401, 403, 404):
        raise ModelError(
            f"the hub has no model {model_id} (HTTP {status})",
            "check the id (a gated or private model needs a local download: set encoder.model to its folder)",
        )
    if status != 200:
        raise ModelError(f"the hub answered HTTP {status} for {model_id}", "try again later")
    try:
        data = json.loads(body.getvalue())
    except ValueError as exc:
        raise ModelError(f"the hub's answer for {model_id} is not JSON", "check HF_ENDPOINT") from exc
    if not isinstance(data, dict):
        raise ModelError(f"the hub's answer for {model_id} is not a JSON object", "check HF_ENDPOINT")
    return data


def _check_embedding(model_id: str, info: dict[str, Any], names: list[str]) -> None:
    """Refuse a model that does not declare itself an embedding model: no sentence-transformers files, no
    embedding pipeline tag on the hub."""
    tags = [str(t) for t in info.get("tags") or []]
    pipeline = str(info.get("pipeline_tag") or "")
    if any(n in names for n in _ST_FILES) or pipeline in _EMBEDDING_PIPELINES or "sentence-transformers" in tags:
        return
    raise ModelError(
        f"{model_id} is not an embedding model (hub pipeline: {pipeline or 'none'}; no sentence-transformers "
        "pooling files): its vectors would not rank passages",
        "pull an embedding model (e.g. intfloat/multilingual-e5-small), or add --force to fetch it anyway",
    )


def _hashes(client: httpx.Client, source: Source, names: list[str]) -> dict[str, HubFile]:
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


def _fetch(client: httpx.Client, url: str, dest: Path, expected: HubFile, attempts: int, progress: Progress) -> list[str]:
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


def _read_manifest(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _install(staging: Path, final: Path) -> None:
    """Put the checked model in place of any older copy (renames: a reader never sees half a model)."""
    old = final.with_name(f".{final.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        final.rename(old)
    staging.rename(final)
    shutil.rmtree(old, ignore_errors=True)
