"""Search result types: the one result model of every door (the searcher builds it; the HTTP API, the CLI, MCP and the
Python API show it; its JSON shape and OpenAPI schema come from these classes), and the filters a search takes."""

from dataclasses import dataclass, field
from fnmatch import fnmatch
from functools import cache
from pathlib import PurePosixPath
from typing import Annotated, Any, cast

from pydantic import Field, TypeAdapter

from lodex.search.names import Mode


@dataclass(frozen=True)
class Passage:
    """A chunk of a result document: its text, exact offsets into the document's text, its cosine similarity
    to the query, the spans of `text` (offsets within it) where query words matched, and where it is: the page (PDF
    page, slide) it starts and ends on and the section (heading path) it starts in, None where the format has none."""

    text: str
    char_start: Annotated[
        int,
        Field(
            description="Offset of the passage in the document's extracted text, in code points (Unicode "
            "characters, as Python counts them; not UTF-16 units)."
        ),
    ]
    char_end: int
    score: Annotated[float, Field(description="Cosine similarity of the passage to the query.")]
    highlights: Annotated[
        list[tuple[int, int]],
        Field(
            description="[start, end) offsets (code points) within `text` of the query words it "
            "contains (Chinese and Japanese: the words of the query's segmentation)."
        ),
    ] = field(default_factory=list)
    page: Annotated[int | None, Field(description="The page (PDF page, slide; 1-based) the passage starts on; null for formats without pages.")] = (
        None
    )
    page_end: Annotated[int | None, Field(description="The page it ends on.")] = None
    section: Annotated[
        str | None, Field(description='The heading path of the section it starts in, e.g. "2 Methods › 2.3 Sampling"; null without headings.')
    ] = None


@dataclass(frozen=True)
class DocumentHit:
    """One ranked document with its best passages."""

    doc_id: str
    path: Annotated[str, Field(description="Path relative to the indexed folder (pushed documents: @api/<name>).")]
    title: str
    score: Annotated[
        float,
        Field(
            description=(
                "The document's score in the mode's scale, higher is better. dense: cosines (search.ranking blend, the default: "
                "the mean of its best passage's and its mean vector's; max: its best passage's); bm25: BM25 of its best passage; "
                "hybrid: the fusion of both (search.fusion convex, the default: a weighted sum of min-max-normalized dense and "
                "BM25 scores, 0 to 1; ceiling: the same, BM25's part scaled by the keyword match's strength; rrf: a sum of "
                "reciprocal ranks)."
            )
        ),
    ]
    passages: list[Passage]


@dataclass(frozen=True)
class SearchResponse:
    """What a search returns: {"query", "mode", "took_ms", "results": [...]}."""

    query: str
    mode: Annotated[
        Mode,
        Field(
            description="The retrieval mode used: dense, bm25 or hybrid (a hybrid query in a language of "
            "another script the model does not cover is answered by bm25)."
        ),
    ]
    took_ms: float
    results: list[DocumentHit]

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape, as Python values (highlights as tuples; `json.dumps` writes them as lists)."""
        return cast(dict[str, Any], _shape().dump_python(self))

    def to_json(self) -> bytes:
        """The JSON shape, as UTF-8 JSON (what the HTTP API answers)."""
        return _shape().dump_json(self)

    @classmethod
    def from_dict(cls, data: Any) -> "SearchResponse":
        """The response of a JSON answer in this shape (a server's, for the CLI and `lodex.Client`); a ValueError
        (pydantic's ValidationError) when it is not one."""
        return _shape().validate_python(data)


@cache
def _shape() -> "TypeAdapter[SearchResponse]":
    """The JSON shape of a search response (built once, on first use)."""
    return TypeAdapter(SearchResponse)


@dataclass(frozen=True)
class SearchFilters:
    """Restrict results by a glob on the root-relative path and/or by file extensions."""

    path_glob: str | None = None
    extensions: tuple[str, ...] = field(default_factory=tuple)
    modified_after: float | None = None  # seconds since the epoch
    languages: tuple[str, ...] = field(default_factory=tuple)  # ISO 639-1 codes of the documents' languages

    def allows(self, path: str, mtime: float = 0.0, language: str | None = None) -> bool:
        """True when a document at `path`, modified at `mtime`, in `language`, passes every filter."""
        if self.path_glob and not fnmatch(path, self.path_glob):
            return False
        if self.modified_after is not None and mtime <= self.modified_after:
            return False
        if self.languages and (language or "") not in {code.lower() for code in self.languages}:
            return False
        if self.extensions:
            suffix = PurePosixPath(path).suffix.lower().lstrip(".")
            return suffix in {e.lower().lstrip(".") for e in self.extensions}
        return True

    @property
    def active(self) -> bool:
        """True when any filter is set."""
        return bool(self.path_glob or self.extensions or self.modified_after is not None or self.languages)
