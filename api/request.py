"""The one search request of every door (GET and POST /search, `lodex search`, MCP's search tool, `lodex.open` and
`lodex.Client`): its fields, their types and their limits, checked in one place, the same way for all."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import AliasChoices, BaseModel, Field, ValidationError

from lodex.api.models import Text
from lodex.api.settings import Settings
from lodex.search.names import Mode
from lodex.search.results import SearchFilters
from lodex.store.errors import LodexError

MAX_GLOB_CHARS = 1000  # a search's path glob (fnmatch compiles and caches each one)
MAX_EXTENSIONS = 50  # extensions, and language codes, one search may name
MAX_EXTENSION_CHARS = 32


class BadRequest(LodexError):
    """A search (or listing) whose values are of the right types but out of bounds: an empty query, too long a one,
    k out of range, too many extensions or languages, a malformed language code."""

    code = "bad_request"


class InvalidRequest(LodexError):
    """A request whose values are not of the types it takes (a word for k, an unknown mode, a time that is none, text
    that is not valid Unicode)."""

    code = "invalid_request"


class TooLarge(LodexError):
    """A pushed document's text over api.max_document_kb."""

    code = "too_large"


@dataclass(frozen=True)
class Limits:
    """What one search may ask ([api] max_query_chars and max_k), and its k when it names none."""

    max_query_chars: int = 1000
    max_k: int = 100
    default_k: int = 10

    @classmethod
    def of(cls, settings: Settings) -> "Limits":
        """The limits `settings` set (default k: search.k, at most api.max_k)."""
        return cls(settings.api.max_query_chars, settings.api.max_k, min(settings.search.k, settings.api.max_k))


@dataclass(frozen=True)
class Search:
    """A checked search, as the read side takes it."""

    query: str
    k: int
    filters: SearchFilters
    mode: Mode | None = None


class SearchRequest(BaseModel):
    """A search: the body of POST /search, the parameters of GET /search, and what `lodex search`, MCP and the Python
    API ask."""

    q: Text = Field(description="The query, in plain words.")
    k: int | None = Field(None, strict=True, description="Documents to return (default: search.k; at most api.max_k).")
    path_glob: Text | None = Field(
        None,
        validation_alias=AliasChoices("path_glob", "path"),
        description="Only documents whose relative path matches this glob (`path`, its former name, is still read).",
    )
    ext: list[Text] | None = Field(None, description='Only these file extensions, e.g. ["md", "txt"].')
    modified_after: datetime | None = Field(
        None, description="Only documents modified after this time (ISO 8601 or epoch seconds; a time without a zone is this machine's local time)."
    )
    mode: Mode | None = Field(None, description="Retrieval mode (default: search.mode).")
    lang: list[Text] | None = Field(None, description='Only documents in these languages (ISO 639-1 codes, e.g. ["zh", "en"]).')

    def checked(self, limits: Limits) -> Search:
        """The search this request asks for, or BadRequest saying which value is out of bounds and how to fix it."""
        q, path, ext, lang = self.q, self.path_glob, self.ext, self.lang
        if not q.strip():
            raise BadRequest("q is empty", "pass some words to look for")
        if path is not None and len(path) > MAX_GLOB_CHARS:
            raise BadRequest(f"path_glob is longer than {MAX_GLOB_CHARS} characters", "pass a shorter glob")
        check_extensions(ext)
        if lang and (len(lang) > MAX_EXTENSIONS or any(not 2 <= len(c) <= 3 or not c.isalpha() or not c.isascii() for c in lang)):
            raise BadRequest(f"lang takes at most {MAX_EXTENSIONS} language codes of 2 or 3 letters (ISO 639)", "pass codes such as zh or en")
        if len(q) > limits.max_query_chars:
            raise BadRequest(f"q is longer than {limits.max_query_chars} characters (api.max_query_chars)", "pass a shorter query")
        k = limits.default_k if self.k is None else self.k
        if not 1 <= k <= limits.max_k:
            raise BadRequest(f"k must be between 1 and {limits.max_k} (api.max_k)", "ask for fewer documents")
        after = _timestamp(self.modified_after) if self.modified_after is not None else None
        return Search(q, k, SearchFilters(path, tuple(ext or ()), after, tuple(c.lower() for c in lang or ())), self.mode)

    def body(self) -> dict[str, Any]:
        """As JSON carries it (POST /search), the values not given left out."""
        return self.model_dump(mode="json", exclude_none=True)


def search_request(**fields: Any) -> SearchRequest:
    """A request of these fields (as SearchRequest names them), or InvalidRequest naming the first wrong one."""
    try:
        return SearchRequest(**fields)
    except ValidationError as exc:
        raise InvalidRequest(one_line(exc), "see the search parameters in the API docs (/docs) or `lodex search --help`") from exc


def check_search(limits: Limits, **fields: Any) -> Search:
    """The search these fields ask for (as SearchRequest names them), checked: InvalidRequest or BadRequest."""
    return search_request(**fields).checked(limits)


def check_extensions(ext: list[str] | None) -> None:
    """BadRequest when a search or a listing names too many extensions, or too long a one."""
    if ext and (len(ext) > MAX_EXTENSIONS or any(len(e) > MAX_EXTENSION_CHARS for e in ext)):
        raise BadRequest(f"ext takes at most {MAX_EXTENSIONS} extensions of at most {MAX_EXTENSION_CHARS} characters", "name fewer extensions")


def check_document_text(text: str, max_kb: int) -> None:
    """TooLarge when a pushed document's text (POST /documents, MCP's push_text) is over `max_kb` KiB in UTF-8."""
    if len(text.encode("utf-8", "surrogatepass")) > max_kb * 1024:
        raise TooLarge(f"document text over {max_kb} KiB (api.max_document_kb)", "push a shorter text, or split it into several documents")


def one_line(exc: ValidationError) -> str:
    """The first problem of a validation error, as `field: what is wrong`."""
    first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
    where = ".".join(str(part) for part in first.get("loc", ())) or "request"
    return f"{where}: {str(first.get('msg', 'invalid')).removeprefix('Value error, ')}"


def _timestamp(moment: datetime) -> float:
    """Seconds since the epoch; a time outside what the platform can convert is clamped (year 1 is long before)."""
    try:
        return moment.timestamp()
    except (OverflowError, OSError, ValueError):
        return float("-inf") if moment.year < 1970 else float("inf")
