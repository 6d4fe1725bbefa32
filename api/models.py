"""Request and response bodies of the HTTP API (they make the OpenAPI schema at /docs)."""

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field


class ErrorBody(BaseModel):
    code: str = Field(description="Stable machine-readable error code, e.g. not_found, unauthorized, invalid_request.")
    message: str = Field(description="What went wrong and how to fix it.")


class ErrorOut(BaseModel):
    """The one error shape of every endpoint."""

    error: ErrorBody


class PassageOut(BaseModel):
    text: str
    char_start: int = Field(description="Offset of the passage in the document's extracted text.")
    char_end: int
    score: float = Field(description="Cosine similarity of the passage to the query.")
    highlights: list[tuple[int, int]] = Field(default_factory=list, description="[start, end) offsets within `text` of the query words it contains.")


class HitOut(BaseModel):
    doc_id: str
    path: str = Field(description="Path relative to the indexed folder (pushed documents: @api/<name>).")
    title: str
    score: float = Field(description="The document's score in the mode's scale (dense: cosine of its best passage; bm25: BM25; hybrid: fused reciprocal rank).")
    passages: list[PassageOut]


class SearchOut(BaseModel):
    query: str
    mode: str = Field(description="The retrieval mode used: dense, bm25 or hybrid.")
    took_ms: float
    results: list[HitOut]


class SearchIn(BaseModel):
    """POST /search body."""

    q: str = Field(description="The query, in plain words.")
    k: int | None = Field(None, description="Documents to return (default: search.k).")
    path: str | None = Field(None, description="Only documents whose relative path matches this glob.")
    ext: list[str] | None = Field(None, description="Only these file extensions, e.g. [\"md\", \"txt\"].")
    modified_after: datetime | None = Field(None, description="Only documents modified after this time (ISO 8601 or epoch seconds).")
    mode: Literal["dense", "bm25", "hybrid"] | None = Field(None, description="Retrieval mode (default: search.mode).")


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


class DocumentDetailOut(DocumentOut):
    chunks: list[ChunkOut]


class PushIn(BaseModel):
    """POST /documents body: a text document pushed by a tool, indexed like a file."""

    name: str = Field(min_length=1, max_length=300, description="Unique name; pushing the same name again replaces it.")
    text: str = Field(description="The document's text.")
    title: str = Field("", max_length=1000)
    metadata: dict[str, Any] = Field(default_factory=dict, description="Any JSON object, returned with the document.")


class PushOut(BaseModel):
    id: str
    path: str
    status: str = Field(description="indexed, or unchanged when the same text was pushed before")
    chunks: int


class DeletedOut(BaseModel):
    deleted: str


class QueuedOut(BaseModel):
    queued: bool
    queue_depth: int


class HealthOut(BaseModel):
    status: str


class ReadyOut(BaseModel):
    ready: bool
    model: str
    documents: int
    indexing: bool = Field(description="Changes are being applied or wait (also files the watcher saw change that are still settling): searches may not find them yet.")
    files_left: int = Field(description="Files the current indexing run has not reached yet (0 when idle).")


class StatsOut(BaseModel):
    version: str
    model: str
    dim: int
    data_dir: str
    root: str
    documents: int
    chunks: int
    failed: int
    queue_depth: int
    encode_tokens_per_s: float
    uptime_s: float
    last_run: dict[str, Any] | None
