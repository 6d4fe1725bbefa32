"""Request and response bodies of the HTTP API (they make the OpenAPI schema at /docs); a search's are api/request.py's
SearchRequest and search/results.py's SearchResponse, shared with every other door."""

import json
import math
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, Field

from lodex.indexer.paths import PUSHED_PREFIX, pushed_name_problem

MAX_METADATA_DEPTH = 16  # nesting levels of a pushed document's metadata
MAX_METADATA_BYTES = 64 * 1024  # its size as JSON


def valid_text(value: str) -> str:
    """`value`, when it is text that UTF-8 can encode; a lone surrogate (an escape such as \\ud800 in JSON) is refused."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"holds a lone surrogate (\\u{ord(exc.object[exc.start]):04x}) at {exc.start}: not valid Unicode text") from exc
    return value


def valid_metadata(value: dict[str, Any]) -> dict[str, Any]:
    """A pushed document's metadata, refused when nested deeper than MAX_METADATA_DEPTH, larger than
    MAX_METADATA_BYTES as JSON, or holding a key or string that is not valid Unicode text."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > MAX_METADATA_DEPTH:
                raise ValueError(f"nested deeper than {MAX_METADATA_DEPTH} levels")
            for key in item if isinstance(item, dict) else ():
                valid_text(key)
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
        elif isinstance(item, str):
            valid_text(item)
        elif isinstance(item, float) and not math.isfinite(item):
            raise ValueError("holds NaN or Infinity, which JSON cannot carry")
    if len(json.dumps(value)) > MAX_METADATA_BYTES:
        raise ValueError(f"larger than {MAX_METADATA_BYTES // 1024} KiB as JSON")
    return value


def valid_name(value: str) -> str:
    """A pushed document's name, without surrounding white space; refused (never rewritten) when it is empty, holds a
    control character, is absolute or has a `.` or `..` segment (see indexer.paths.pushed_name_problem)."""
    value = valid_text(value).strip()
    problem = pushed_name_problem(value)
    if problem:
        raise ValueError(f"the name {problem}")
    return value


Text = Annotated[str, AfterValidator(valid_text)]


class ErrorBody(BaseModel):
    code: str = Field(description="Stable machine-readable error code, e.g. not_found, unauthorized, invalid_request.")
    message: str = Field(description="What went wrong and how to fix it.")


class ErrorOut(BaseModel):
    """The one error shape of every endpoint."""

    error: ErrorBody


class DocumentOut(BaseModel):
    id: str
    path: str
    title: str
    format: str
    size: int
    mtime: float
    chunk_count: int
    token_count: int
    indexed_at: float
    status: str = Field(description="indexed")
    source: str = Field(description="folder (a file of the watched folder) or api (pushed with POST /documents)")
    metadata: dict[str, Any] = {}


class FailedOut(BaseModel):
    path: str
    reason: str
    attempts: int


class DocumentListOut(BaseModel):
    total: int
    offset: int
    limit: int
    documents: list[DocumentOut]
    failed: list[FailedOut] = Field(description="Files that could not be indexed (with status=failed or all).")


class ChunkOut(BaseModel):
    ordinal: int
    char_start: int
    char_end: int
    token_count: int
    text: str
    page: int | None = None
    page_end: int | None = None
    section: str | None = None


class DocumentDetailOut(DocumentOut):
    chunks: list[ChunkOut]


class TextOut(BaseModel):
    """A window of a document's extracted text."""

    id: str
    path: str
    start: int = Field(description="Offset of the window's first character (clamped to the text).")
    end: int
    text: str
    page: int | None = Field(None, description="The page (PDF page, slide) the window starts on, where the format has pages.")
    section: str | None = Field(None, description="The section (heading path) the window starts in, where the format has them.")


class PushIn(BaseModel):
    """POST /documents body: a text document pushed by a tool, indexed like a file."""

    name: Annotated[str, AfterValidator(valid_name)] = Field(
        min_length=1,
        max_length=300,
        description=f"Unique name; pushing the same name again replaces it. Stored as {PUSHED_PREFIX}<name>: a "
        "single line of printable characters, relative (no leading /, \\, ~/ or drive letter), without '.' or '..' segments "
        "(between / or \\); surrounding white space is dropped. Other names answer 422.",
    )
    text: Text = Field(description="The document's text.")
    title: Text = Field("", max_length=1000)
    metadata: Annotated[dict[str, Any], AfterValidator(valid_metadata)] = Field(
        default_factory=dict,
        description=f"Any JSON object (at most {MAX_METADATA_DEPTH} levels deep, {MAX_METADATA_BYTES // 1024} KiB), returned with the document.",
    )


class PushOut(BaseModel):
    id: str
    path: str
    status: str = Field(
        description="queued (answered at once; GET /documents/{id} says when it is indexed), or with wait=true: "
        "indexed, or unchanged when the same text was pushed before"
    )
    chunks: int = Field(description="Chunks of the document (0 while queued).")


class DeletedOut(BaseModel):
    deleted: str


class RunOut(BaseModel):
    """What a reconciliation did: files counted by outcome, and those that failed with their reasons."""

    added: int
    updated: int
    unchanged: int
    reused: int
    deleted: int
    failed: int
    chunks: int
    tokens: int
    seconds: float
    interrupted: bool
    skipped: dict[str, int] = Field(description="Files no reader takes, by extension.")
    failures: dict[str, str]


class QueuedOut(BaseModel):
    queued: bool
    queue_depth: int


class IdentityOut(BaseModel):
    """GET /identity: proof that this is the server recorded in its data dir's server.json."""

    instance: str = Field(description="This server's instance id (random, new at each start), as server.json records it.")
    proof: str = Field(
        description="HMAC-SHA256, in hex, of the challenge under the per-start secret server.json holds (mode 0600); the secret itself is never sent."
    )


class HealthOut(BaseModel):
    status: str


class ReadyOut(BaseModel):
    ready: bool
    model: str
    documents: int
    indexing: bool = Field(
        description="Changes are being applied or wait (also files the watcher saw change that are still settling): searches may not find them yet."
    )
    files_left: int = Field(description="Files the current indexing run has not reached yet (0 when idle).")


class IndexStatus(BaseModel):
    """What an index holds: counts, model, folder, failures and the last run (the Python API's and MCP's status)."""

    documents: int
    chunks: int
    failed: int
    model: str
    dim: int
    data_dir: str
    root: str
    last_run: dict[str, Any] | None
    languages: dict[str, int] = Field({}, description='Documents per language (ISO 639-1 code; "unknown": none detected), most first.')
    keywords_segmented: bool = Field(
        True,
        description="Whether the keyword index holds lodex's terms (words per script, stems per language); false: an index made before, with Lance's English tokenizer, until `lodex index --rebuild`.",
    )


class StatsOut(IndexStatus):
    """GET /stats: the index's status and the server's own figures."""

    version: str
    queue_depth: int
    encode_tokens_per_s: float
    uptime_s: float
