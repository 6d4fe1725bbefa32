"""Search result types and their stable JSON shape (shared by the CLI and the API)."""

from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import PurePosixPath
from typing import Any


@dataclass(frozen=True)
class Passage:
    """A chunk of a result document: its text, exact offsets into the document's text, its cosine similarity
    to the query, the spans of `text` (offsets within it) where query words matched, and where it is: the page (PDF
    page, slide) it starts and ends on and the section (heading path) it starts in, None where the format has none."""

    text: str
    char_start: int
    char_end: int
    score: float
    highlights: list[tuple[int, int]] = field(default_factory=list)
    page: int | None = None
    page_end: int | None = None
    section: str | None = None


@dataclass(frozen=True)
class DocumentHit:
    """One ranked document with its best passages."""

    doc_id: str
    path: str
    title: str
    score: float
    passages: list[Passage]


@dataclass(frozen=True)
class SearchResponse:
    """What a search returns: {"query", "mode", "took_ms", "results": [...]}."""

    query: str
    took_ms: float
    results: list[DocumentHit]
    mode: str = "dense"

    def to_dict(self) -> dict[str, Any]:
        """The documented JSON shape (what dataclasses.asdict gives, built directly: asdict's deep copy was the
        biggest single cost of the API under load)."""
        return {"query": self.query, "took_ms": self.took_ms, "results": [
            {"doc_id": hit.doc_id, "path": hit.path, "title": hit.title, "score": hit.score, "passages": [
                {"text": p.text, "char_start": p.char_start, "char_end": p.char_end, "score": p.score, "highlights": list(p.highlights),
                 "page": p.page, "page_end": p.page_end, "section": p.section}
                for p in hit.passages]}
            for hit in self.results], "mode": self.mode}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SearchResponse":
        """The response of a JSON answer in the shape of to_dict (a server's, for the CLI)."""
        return cls(data["query"], data["took_ms"], [
            DocumentHit(hit["doc_id"], hit["path"], hit["title"], hit["score"], [
                Passage(p["text"], p["char_start"], p["char_end"], p["score"], [tuple(h) for h in p["highlights"]], p.get("page"),
                        p.get("page_end"), p.get("section"))
                for p in hit["passages"]])
            for hit in data["results"]], data.get("mode", "dense"))


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
