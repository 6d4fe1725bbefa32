"""`lodex model pull ID`: a model from the Hugging Face hub (or the mirror in HF_ENDPOINT) into lodex's model cache —
resumable, each file checked against the hub's hash, refused before its weights are fetched when lodex cannot run it."""

import io
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from lodex.api.model.cache import cached_model, is_model_id
from lodex.api.model.pull_files import CutOff, HubFile, Progress, Source, fetch_file, file_hashes
from lodex.api.model.pull_guard import (
    drop_remote_code,
    fresh_staging,
    is_hex,
    no_pickles,
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
_MAX_LISTING = 16 << 20  # bytes of the hub's listing of a model read at most (a real one is a few kB)


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


def _fetch_model(
    client: httpx.Client, source: Source, small: list[str], weights: list[str], staging: Path, attempts: int, progress: Progress
) -> tuple[list[str], dict[str, HubFile], list[str]]:
    """The small files, checked by the `model check` rules that need no weights (the model's own code dropped), then
    the weights, checked again: the names fetched, every file's hash, the configs whose auto_map was dropped."""
    files = file_hashes(client, source, small + weights)
    fetched = []
    for name in small:
        fetched += fetch_file(client, source.url(name), target(staging, name), files[name], attempts, progress)
    dropped = drop_remote_code(staging, progress)
    _runnable(source.model_id, staging, read_model_declarations)  # before the weights are fetched
    for name in weights:
        fetched += fetch_file(client, source.url(name), target(staging, name), files[name], attempts, progress)
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
