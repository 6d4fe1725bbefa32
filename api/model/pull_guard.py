"""What `lodex model pull` accepts from a hub it does not control: the hosts it may be sent to, the file names it
writes (safetensors weights only, never a pickle), where and how it writes them, and the config keys that would load
the model's own Python code (dropped: lodex never runs code that comes with a model)."""

import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

import httpx

from lodex.encoders.errors import ModelError

# The hub's own domains: huggingface.co sends large files to its CDN (cdn-lfs.huggingface.co, cdn-lfs-us-1.hf.co,
# cas-bridge.xethub.hf.co); a mirror (HF_ENDPOINT) may send them to its own host or to one of its subdomains.
HF_DOMAINS = ("huggingface.co", "hf.co")
_WEIGHTS = re.compile(r"model(-\d+-of-\d+)?\.safetensors")
_PICKLES = re.compile(r"pytorch_model(-\d+-of-\d+)?\.bin")
_SMALL = re.compile(r"((\d+_[A-Za-z]+/)?[A-Za-z0-9_][\w.-]*\.(json|txt|model|md|tiktoken))")
_REMOTE_CODE_KEYS = ("auto_map",)  # what transformers reads to import a model's own modules (trust_remote_code)
_REMOTE_CODE_FILES = ("config.json", "tokenizer_config.json")


def _domain(host: str) -> str:
    """The domain whose subdomains a redirect from `host` may go to ("" for an IP address or a bare name)."""
    return "" if host.replace(".", "").isdigit() or "." not in host or ":" in host else host


def allowed_domains(endpoint: str) -> tuple[str, ...]:
    """The domains whose hosts (and subdomains) the hub at `endpoint` may redirect a download to."""
    host = (urlsplit(endpoint).hostname or "").lower()
    own = _domain(host)
    return (*HF_DOMAINS, own) if host in HF_DOMAINS else ((own,) if own else ())


def redirect_guard(endpoint: str) -> Callable[[httpx.Request], None]:
    """An httpx request hook that refuses, before it is sent, a request (a redirect) that leaves the hub: to another
    host or port than the endpoint's, other than a subdomain of its domain (of huggingface.co or hf.co for the hub
    itself), or from https to http."""
    base = httpx.URL(endpoint)
    domains = allowed_domains(endpoint)

    def check(request: httpx.Request) -> None:
        url = request.url
        host = url.host.lower()
        same = host == base.host.lower() and url.port == base.port
        listed = url.port is None and any(host == d or host.endswith("." + d) for d in domains)
        if (same or listed) and not (base.scheme == "https" and url.scheme != "https"):
            return
        where = f"{url.scheme}://{url.host}" + (f":{url.port}" if url.port else "")
        raise ModelError(
            f"the hub at {endpoint} sent lodex to {where}, which is neither the hub nor its download host",
            "use the hub or a mirror that serves its files itself (HF_ENDPOINT); lodex follows redirects "
            "only to the hub's own host and its subdomains",
        )

    return check


def pick_files(names: list[str]) -> tuple[list[str], list[str], list[str]]:
    """The files lodex fetches: config, tokenizer and sentence-transformers files, the safetensors weights; and the
    PyTorch pickles the listing offers (never fetched: unpickling runs code). A name that is not a plain relative
    path of these shapes (`..`, absolute, a control character) is never written; ONNX, OpenVINO, TF and Flax copies
    are left on the hub."""
    small = sorted(n for n in names if _SMALL.fullmatch(n) and ".." not in n.split("/") and not _PICKLES.match(n))
    weights = sorted(n for n in names if _WEIGHTS.fullmatch(n))
    pickles = sorted(n for n in names if _PICKLES.fullmatch(n))
    return small, weights, pickles


def announced_size(value: object) -> int | None:
    """A size the hub announced, as a number of bytes (None when it is not one)."""
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def is_hex(value: object, length: int) -> bool:
    """Whether `value` is a string of `length` hex digits (a hash, a commit)."""
    return isinstance(value, str) and len(value) == length and all(c in "0123456789abcdef" for c in value.lower())


def no_pickles(model_id: str, pickles: list[str]) -> ModelError:
    """The refusal of a model whose only weights are PyTorch pickles."""
    found = f" (only {', '.join(pickles[:3])})" if pickles else ""
    return ModelError(
        f"{model_id} has no safetensors weights{found}: lodex pulls model.safetensors only, never pickled weights, which can run code when loaded",
        "pull a revision that has model.safetensors (--revision), or convert the weights on a trusted machine and set encoder.model to that folder",
    )


def fresh_staging(staging: Path) -> None:
    """The staging folder as a real folder that holds only folders and regular files: one that is a link, or holds a
    link or anything else (left by another process) is removed whole, so no write follows a link out of it."""
    if staging.is_symlink() or (staging.exists() and not staging.is_dir()):
        staging.unlink()
    elif staging.is_dir() and any(_odd_entries(staging)):
        shutil.rmtree(staging)
    staging.mkdir(parents=True, exist_ok=True)


def _odd_entries(folder: Path) -> Iterator[Path]:
    for top, dirs, files in os.walk(folder, followlinks=False):
        for name in dirs + files:
            path = Path(top, name)
            if path.is_symlink() or not (path.is_dir() or path.is_file()):
                yield path


def target(staging: Path, name: str) -> Path:
    """Where file `name` is written in `staging`, its folders made; a ModelError if that is not inside `staging`
    (a link planted since the staging folder was checked)."""
    dest = staging / name
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.parent.resolve() != staging.resolve() / Path(name).parent:
        raise ModelError(
            f"{name} would be written outside the model's folder (through a link in {staging})", f"remove {staging} and run the command again"
        )
    return dest


def open_part(path: Path, append: bool) -> IO[bytes]:
    """`path` opened to write (appended to, or from empty) without following a link there."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_APPEND if append else os.O_TRUNC)
    try:
        return os.fdopen(os.open(path, flags, 0o644), "ab" if append else "wb")
    except OSError as exc:
        raise ModelError(f"cannot write {path.name} in {path.parent} ({exc.strerror})", f"remove {path} and run the command again") from exc


def write_within(stream: Iterator[bytes], out: IO[bytes], room: int, too_long: ModelError) -> None:
    """Write `stream` to `out`, at most `room` bytes: past them, `too_long` is raised without reading the rest."""
    for block in stream:
        if len(block) > room:
            raise too_long
        out.write(block)
        room -= len(block)


def drop_remote_code(folder: Path, progress: Callable[[str], None]) -> list[str]:
    """Remove `auto_map` (the model's own Python classes, which transformers imports under trust_remote_code) from the
    configs fetched into `folder`: lodex builds the model from its architecture and never imports a model's code.
    Returns the files changed."""
    changed = []
    for name in _REMOTE_CODE_FILES:
        path = folder / name
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(config, dict) or not any(key in config for key in _REMOTE_CODE_KEYS):
            continue
        for key in _REMOTE_CODE_KEYS:
            config.pop(key, None)
        path.write_text(json.dumps(config, indent=2, ensure_ascii=False), encoding="utf-8")
        progress(f"{name}: dropped auto_map (the model's own Python code, which lodex never runs)")
        changed.append(name)
    return changed
