"""A local stand-in for the Hugging Face hub on 127.0.0.1, in the hub's layout: /api/models/{id}/revision/{rev} (the
listing, siblings without hashes), /{id}/resolve/{rev}/{file} (HEAD: ETag = git blob id, or for LFS files a 302 with
X-Linked-Etag = sha256; GET: the bytes, with Range requests), and faults to inject: a connection dropped mid-file, a
corrupted file, a file longer than announced, a redirect to another server."""

import hashlib
import json
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SHA = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class Hub:
    """One served model: its files (name -> bytes), listing fields, the faults, and the requests seen."""

    model_id: str
    files: dict[str, bytes]
    pipeline_tag: str = "sentence-similarity"
    lfs_suffixes: tuple[str, ...] = (".safetensors", ".bin")
    drop: dict[str, int] = field(default_factory=dict)  # file -> bytes sent before the connection is dropped
    drop_times: int = 1  # how many GETs of each dropped file are cut off
    corrupt: set[str] = field(default_factory=set)
    oversize: dict[str, int] = field(default_factory=dict)  # file -> bytes sent after its own (no Content-Length)
    redirect_to: str = ""  # where LFS files are sent (another server's URL; "": this one's /cdn/)
    sha: str = SHA
    sent: dict[str, int] = field(default_factory=dict)  # file -> bytes of an oversized GET written before the client left
    requests: list[tuple[str, str, str]] = field(default_factory=list)  # (method, path, Range header)
    _drops: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_folder(cls, model_id: str, folder: Path, **kw: Any) -> "Hub":
        files = {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
        return cls(model_id, files, **kw)

    def gets(self, name: str) -> list[str]:
        """The Range headers of the GETs that fetched file `name`'s bytes (not its redirects; "" for none)."""
        lfs = name.endswith(self.lfs_suffixes)
        return [r for m, p, r in self.requests if m == "GET" and p.endswith(f"/{name}") and p.startswith("/cdn/") == lfs]


def _etag(hub: Hub, name: str) -> dict[str, str]:
    data = hub.files[name]
    if name.endswith(hub.lfs_suffixes):
        return {"X-Linked-Etag": f'"{hashlib.sha256(data).hexdigest()}"', "X-Linked-Size": str(len(data))}
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # the git blob id
    return {"ETag": f'"{blob}"'}


class _Handler(BaseHTTPRequestHandler):
    hub: Hub

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None, length: int | None = None) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _route(self) -> tuple[str, str | None]:
        """("api", None) for the listing, ("file", name) for a resolve or cdn URL of a served file, ("", None) else."""
        hub, path = self.hub, urllib.parse.unquote(self.path.split("?")[0])
        if path == f"/api/models/{hub.model_id}/revision/main" or path == f"/api/models/{hub.model_id}/revision/{hub.sha}":
            return "api", None
        for prefix in (f"/{hub.model_id}/resolve/main/", f"/{hub.model_id}/resolve/{hub.sha}/", "/cdn/"):
            if path.startswith(prefix) and path[len(prefix) :] in hub.files:
                return "file", path[len(prefix) :]
        return "", None

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's name
        self.do_GET()

    def do_GET(self) -> None:  # noqa: N802
        hub = self.hub
        hub.requests.append((self.command, self.path, self.headers.get("Range", "")))
        kind, name = self._route()
        if kind == "api":
            body = json.dumps(
                {"id": hub.model_id, "sha": hub.sha, "pipeline_tag": hub.pipeline_tag, "tags": [], "siblings": [{"rfilename": n} for n in hub.files]}
            ).encode()
            self._send(200, body, {"Content-Type": "application/json"})
            return
        if kind != "file" or name is None:
            self._send(404, b"not found")
            return
        if name.endswith(hub.lfs_suffixes) and "/resolve/" in self.path:  # LFS: a redirect to the "CDN"
            self._send(302, headers={"Location": f"{hub.redirect_to}/cdn/{name}"} | _etag(hub, name))
            return
        if self.command == "GET" and name in hub.oversize:
            self._send_oversized(name)
            return
        data = hub.files[name]
        if name in hub.corrupt:
            data = data[:-1] + bytes([data[-1] ^ 0xFF])
        start = int(self.headers.get("Range", "bytes=0-").removeprefix("bytes=").split("-")[0] or 0)
        headers = _etag(hub, name) if "/resolve/" in self.path else {}
        if start:
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        status, body = (206 if start else 200), data[start:]
        if self.command == "GET" and name in hub.drop and hub._drops.get(name, 0) < hub.drop_times:
            hub._drops[name] = hub._drops.get(name, 0) + 1
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: hub.drop[name]])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)  # the connection drops mid-file
            return
        self._send(status, body, headers)

    def _send_oversized(self, name: str) -> None:
        """The file, then `oversize` more bytes in 1 MiB writes, the length told by closing the connection; the bytes
        written before the client hung up are counted in `sent`."""
        hub, zeros = self.hub, bytes(1 << 20)
        self.send_response(200)
        self.end_headers()
        hub.sent[name] = 0
        try:
            self.wfile.write(hub.files[name])
            hub.sent[name] = len(hub.files[name])
            while hub.sent[name] < len(hub.files[name]) + hub.oversize[name]:
                self.wfile.write(zeros)
                hub.sent[name] += len(zeros)
        except OSError:
            pass
        self.close_connection = True


class HubServer:
    """`hub` served on 127.0.0.1 (a free port) in a thread; `url` is the HF_ENDPOINT to give lodex."""

    def __init__(self, hub: Hub) -> None:
        handler = type("Handler", (_Handler,), {"hub": hub})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "HubServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
