"""`lodex model pull ID`: a model from the Hugging Face hub (or the mirror in HF_ENDPOINT) into lodex's model cache —
resumable, each file checked against the hub's hash, refused before its weights are fetched when lodex cannot run it."""

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from lodex.api.model_cache import cached_model, is_model_id
from lodex.indexer.encoders.model_info import read_model_declarations, read_model_dir
from lodex.indexer.errors import ModelError
from lodex.indexer.settings import EncoderSettings

DEFAULT_ENDPOINT = "https://huggingface.co"
MANIFEST = ".lodex-pull.json"
_WEIGHTS = re.compile(r"^(model(-\d+-of-\d+)?\.safetensors|pytorch_model(-\d+-of-\d+)?\.bin)$")
_SMALL = re.compile(r"^((\d+_[A-Za-z]+/)?[\w.-]+\.(json|txt|model|md|tiktoken)|model\.safetensors\.index\.json|pytorch_model\.bin\.index\.json)$")
_ST_FILES = ("modules.json", "config_sentence_transformers.json", "sentence_bert_config.json", "1_Pooling/config.json")
_EMBEDDING_PIPELINES = ("sentence-similarity", "feature-extraction")
_CHUNK = 1 << 20
Progress = Callable[[str], None]


@dataclass(frozen=True)
class HubFile:
    """One file of a model repository and the hash the hub gives for it: ("sha256", hex) for LFS files, ("git-sha1",
    hex) — the git blob id — for the others."""

    name: str
    size: int | None
    algorithm: str
    digest: str


def hub_endpoint() -> str:
    """$HF_ENDPOINT, else the Hugging Face hub."""
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def pull_model(model_id: str, cfg: EncoderSettings, endpoint: str, revision: str = "main", force: bool = False,
               progress: Progress = lambda line: None, attempts: int = 3, timeout_s: float = 60.0) -> dict[str, Any]:
    """Fetch `model_id` at `revision` into the model cache; a ModelError (one line, with the fix) when the hub cannot be
    reached, a file does not match its hash, or lodex cannot run the model. Returns what was done, for the CLI."""
    if not is_model_id(model_id):
        raise ModelError(f"{model_id!r} is not a model id", "give the hub's owner/name, e.g. intfloat/multilingual-e5-small")
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        raise ModelError("HF_HUB_OFFLINE is set: `lodex model pull` needs the hub", "unset HF_HUB_OFFLINE for this command")
    final = cached_model(cfg, model_id)
    with httpx.Client(timeout=timeout_s, follow_redirects=False) as client:
        info = _get_json(client, f"{endpoint}/api/models/{model_id}/revision/{revision}", model_id)
        sha = str(info.get("sha") or revision)
        done = _read_manifest(final)
        if done.get("sha") == sha and done.get("id") == model_id:
            progress(f"{model_id} is up to date in {final}")
            return {"model": model_id, "revision": sha, "path": str(final), "fetched": [], "up_to_date": True}
        names = [str(s.get("rfilename")) for s in info.get("siblings") or [] if s.get("rfilename")]
        small, weights = _pick(names)
        if not force:
            _check_embedding(model_id, info, names)
        staging = final.with_name(f".{final.name}.partial")
        staging.mkdir(parents=True, exist_ok=True)
        files = _hashes(client, endpoint, model_id, sha, info, small + weights)
        fetched = []
        for name in small:
            fetched += _fetch(client, f"{endpoint}/{model_id}/resolve/{sha}/{name}", staging / name, files[name], attempts, progress)
        _runnable(model_id, staging, read_model_declarations)  # the `model check` rules that need no weights, before them
        if not weights:
            raise ModelError(f"{model_id} has no weights lodex can read (no model.safetensors or pytorch_model.bin)",
                             "pull a model that has safetensors weights")
        for name in weights:
            fetched += _fetch(client, f"{endpoint}/{model_id}/resolve/{sha}/{name}", staging / name, files[name], attempts, progress)
    _runnable(model_id, staging, read_model_dir)
    manifest = {"id": model_id, "sha": sha, "endpoint": endpoint, "files": {n: [f.algorithm, f.digest] for n, f in files.items()}}
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=1))
    _install(staging, final)
    progress(f"pulled {model_id} ({sha[:12]}) into {final}")
    return {"model": model_id, "revision": sha, "path": str(final), "fetched": fetched, "up_to_date": False}


def _runnable(model_id: str, staging: Path, check: Callable[[Path], object]) -> None:
    """`check` (the `model check` rules) on the files fetched so far, its refusal naming the model rather than the folder."""
    try:
        check(staging)
    except ModelError as exc:
        raise ModelError(f"{model_id} cannot run in lodex: {exc.message.replace(str(staging), 'the model')}", exc.fix) from exc


def _get_json(client: httpx.Client, url: str, model_id: str) -> dict[str, Any]:
    try:
        response = client.get(url, follow_redirects=True)
    except httpx.HTTPError as exc:
        raise ModelError(f"cannot reach the hub at {url.split('/api/')[0]}: {type(exc).__name__} {exc}".strip(),
                         "check the network, or set HF_ENDPOINT to a reachable mirror") from exc
    if response.status_code in (401, 403, 404):
        raise ModelError(f"the hub has no model {model_id} (HTTP {response.status_code})",
                         "check the id (a gated or private model needs a local download: set encoder.model to its folder)")
    if response.status_code != 200:
        raise ModelError(f"the hub answered HTTP {response.status_code} for {model_id}", "try again later")
    try:
        data = response.json()
    except ValueError as exc:
        raise ModelError(f"the hub's answer for {model_id} is not JSON", "check HF_ENDPOINT") from exc
    if not isinstance(data, dict):
        raise ModelError(f"the hub's answer for {model_id} is not a JSON object", "check HF_ENDPOINT")
    return data


def _pick(names: list[str]) -> tuple[list[str], list[str]]:
    """The files lodex needs: config, tokenizer and sentence-transformers files, then the weights (safetensors when the
    model has them, else PyTorch .bin). ONNX, OpenVINO, TF and Flax copies are left on the hub."""
    small = sorted(n for n in names if _SMALL.match(n))
    weights = sorted(n for n in names if _WEIGHTS.match(n))
    safetensors = [n for n in weights if n.endswith(".safetensors")]
    if safetensors:
        weights = safetensors
        small = [n for n in small if n != "pytorch_model.bin.index.json"]
    return small, weights


def _check_embedding(model_id: str, info: dict[str, Any], names: list[str]) -> None:
    """Refuse a model that does not declare itself an embedding model: no sentence-transformers files, no
    embedding pipeline tag on the hub."""
    tags = [str(t) for t in info.get("tags") or []]
    pipeline = str(info.get("pipeline_tag") or "")
    if any(n in names for n in _ST_FILES) or pipeline in _EMBEDDING_PIPELINES or "sentence-transformers" in tags:
        return
    raise ModelError(f"{model_id} is not an embedding model (hub pipeline: {pipeline or 'none'}; no sentence-transformers "
                     "pooling files): its vectors would not rank passages",
                     "pull an embedding model (e.g. intfloat/multilingual-e5-small), or add --force to fetch it anyway")


def _hashes(client: httpx.Client, endpoint: str, model_id: str, sha: str, info: dict[str, Any], names: list[str]) -> dict[str, HubFile]:
    """Each file's expected hash: from the listing when it carries them (lfs.sha256, blobId), else from the headers of a
    HEAD of the file (X-Linked-Etag: the LFS sha256; ETag: the git blob id)."""
    listed = {str(s.get("rfilename")): s for s in info.get("siblings") or []}
    out = {}
    for name in names:
        sibling = listed.get(name) or {}
        lfs = sibling.get("lfs") or {}
        if _is_hex(lfs.get("sha256"), 64):
            out[name] = HubFile(name, lfs.get("size"), "sha256", str(lfs["sha256"]))
            continue
        if _is_hex(sibling.get("blobId"), 40):
            out[name] = HubFile(name, sibling.get("size"), "git-sha1", str(sibling["blobId"]))
            continue
        out[name] = _head_hash(client, f"{endpoint}/{model_id}/resolve/{sha}/{name}", name)
    return out


def _head_hash(client: httpx.Client, url: str, name: str) -> HubFile:
    try:
        response = client.head(url)
    except httpx.HTTPError as exc:
        raise ModelError(f"cannot reach the hub for {name}: {type(exc).__name__}", "check the network and run the command again") from exc
    linked = response.headers.get("x-linked-etag", "").strip('"').removeprefix("W/").strip('"')
    etag = response.headers.get("etag", "").removeprefix("W/").strip('"')
    size = response.headers.get("x-linked-size") or response.headers.get("content-length")
    if _is_hex(linked, 64):
        return HubFile(name, int(size) if size else None, "sha256", linked)
    if _is_hex(etag, 40) or _is_hex(etag, 64):
        return HubFile(name, int(size) if size else None, "git-sha1" if len(etag) == 40 else "sha256", etag)
    raise ModelError(f"the hub gives no hash for {name} (HTTP {response.status_code}, no X-Linked-Etag or ETag)",
                     "use a hub or mirror that serves the files' hashes, or download the model by hand and set encoder.model to it")


def _is_hex(value: object, length: int) -> bool:
    return isinstance(value, str) and len(value) == length and all(c in "0123456789abcdef" for c in value.lower())


def _fetch(client: httpx.Client, url: str, dest: Path, expected: HubFile, attempts: int, progress: Progress) -> list[str]:
    """Download `url` into `dest` unless it is there with the right hash; a cut-off download resumes where it stopped
    (an HTTP Range request), `attempts` times in this call, and from its .incomplete file in the next."""
    if dest.is_file() and _digest(dest, expected.algorithm) == expected.digest.lower():
        return []
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".incomplete")
    for attempt in range(1, attempts + 1):
        try:
            _download(client, url, part, expected)
            break
        except httpx.HTTPError as exc:
            have = part.stat().st_size if part.exists() else 0
            if attempt == attempts:
                raise ModelError(f"the download of {expected.name} was cut off at {have} bytes ({type(exc).__name__})",
                                 "run the same command again: it resumes where it stopped") from exc
            progress(f"{expected.name}: cut off at {have} bytes, resuming")
    got = _digest(part, expected.algorithm)
    if got != expected.digest.lower():
        part.unlink()
        raise ModelError(f"{expected.name} does not match the hub's {expected.algorithm} ({got[:12]}… instead of {expected.digest[:12]}…)",
                         "run the command again; if it fails the same way, the hub or mirror serves a corrupted file")
    part.replace(dest)
    progress(f"{expected.name}: {dest.stat().st_size} bytes, {expected.algorithm} checked")
    return [expected.name]


def _download(client: httpx.Client, url: str, part: Path, expected: HubFile) -> None:
    have = part.stat().st_size if part.exists() else 0
    if expected.size is not None and have > expected.size:
        part.unlink()
        have = 0
    headers = {"Range": f"bytes={have}-"} if have else {}
    with client.stream("GET", url, headers=headers, follow_redirects=True) as response:
        if response.status_code == 416 and have:  # already whole
            return
        if response.status_code not in (200, 206):
            raise ModelError(f"the hub answered HTTP {response.status_code} for {expected.name}", "run the command again later")
        mode = "ab" if response.status_code == 206 else "wb"
        with part.open(mode) as out:
            for block in response.iter_bytes():  # as it arrives: a cut-off download keeps every byte it got
                out.write(block)


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
