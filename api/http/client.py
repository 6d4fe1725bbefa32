"""The Python API over HTTP: `lodex.Client(url, key)` asks a running `lodex serve` the one method list (LodexAPI) and
answers with the same types as `lodex.open` (an error answer is raised as a LodexError with the server's message)."""

import http.client
import json
from datetime import datetime
from types import TracebackType
from typing import Any

from lodex.api.http.json_client import JsonClient, error_of
from lodex.api.models import DeletedOut, DocumentListOut, DocumentOut, IndexStatus, PushOut, RunOut, TextOut
from lodex.api.request import search_request
from lodex.search.context import MAX_WINDOW_CHARS
from lodex.search.names import Mode
from lodex.search.results import SearchResponse
from lodex.store.errors import LodexError


class RemoteError(LodexError):
    """An error the server answered (its status and message kept)."""

    code = "remote_error"

    def __init__(self, message: str, status: int, code: str = "remote_error") -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class Client:
    """A client of a running `lodex serve` at `url` (with its api.api_key as `key`, when one is set)."""

    def __init__(self, url: str = "http://127.0.0.1:8765", key: str | None = None, timeout: float = 60.0) -> None:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = JsonClient(url, headers, timeout)

    def _ask(self, method: str, path: str, params: dict[str, Any] | None = None, json_body: Any = None) -> Any:
        try:
            status, data = self._http.request(method, path, params, json_body)
        except (OSError, http.client.HTTPException) as exc:
            raise RemoteError(f"cannot reach lodex at {self._http.url}: {exc}", 503) from exc
        if status >= 400:
            code, message = error_of(data) or ("remote_error", data[:200].decode("utf-8", "replace"))
            raise RemoteError(message, status, code)
        try:
            return json.loads(data)
        except ValueError as exc:
            raise RemoteError(f"lodex at {self._http.url} answered something other than JSON", status) from exc

    def search(
        self,
        query: str,
        k: int | None = None,
        *,
        path_glob: str | None = None,
        ext: list[str] | tuple[str, ...] | None = None,
        modified_after: datetime | float | str | None = None,
        mode: Mode | None = None,
        lang: list[str] | tuple[str, ...] | None = None,
    ) -> SearchResponse:
        """As `LodexAPI.search`, answered (and checked) by the server; values of the wrong type raise InvalidRequest here."""
        request = search_request(q=query, k=k, path_glob=path_glob, ext=ext, modified_after=modified_after, mode=mode, lang=lang)
        return SearchResponse.from_dict(self._ask("POST", "/search", json_body=request.body()))

    def documents(
        self, offset: int = 0, limit: int = 50, *, path_glob: str | None = None, ext: list[str] | tuple[str, ...] | None = None
    ) -> DocumentListOut:
        """As `LodexAPI.documents`."""
        params: dict[str, Any] = {"offset": offset, "limit": limit, "path_glob": path_glob, "ext": list(ext or ()) or None}
        return DocumentListOut.model_validate(self._ask("GET", "/documents", params))

    def read(self, doc_id: str, start: int = 0, end: int | None = None, *, page: int | None = None, max_chars: int = MAX_WINDOW_CHARS) -> TextOut:
        """As `LodexAPI.read`."""
        params: dict[str, Any] = {"start": start, "end": end, "page": page, "max_chars": max_chars}
        return TextOut.model_validate(self._ask("GET", f"/documents/{doc_id}/text", params))

    def document(self, doc_id: str) -> DocumentOut:
        """As `LodexAPI.document`."""
        return DocumentOut.model_validate({k: v for k, v in self._ask("GET", f"/documents/{doc_id}").items() if k != "chunks"})

    def status(self) -> IndexStatus:
        """As `LodexAPI.status`."""
        return IndexStatus.model_validate(self._ask("GET", "/status"))

    def push(self, name: str, text: str, *, title: str = "", metadata: dict[str, Any] | None = None) -> PushOut:
        """As `LodexAPI.push`: POST /documents, answered once the document is indexed."""
        body = {"name": name, "text": text, "title": title, "metadata": metadata or {}}
        return PushOut.model_validate(self._ask("POST", "/documents", {"wait": "true"}, body))

    def delete(self, doc_id: str) -> DeletedOut:
        """As `LodexAPI.delete`."""
        return DeletedOut.model_validate(self._ask("DELETE", f"/documents/{doc_id}"))

    def reindex(self) -> RunOut:
        """As `LodexAPI.reindex`: POST /reindex, answered once the run is done."""
        return RunOut.model_validate(self._ask("POST", "/reindex", {"wait": "true"}))

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
