"""What a document reader gives (text plus where each part of it is: pages, sections) and how a chunk's location is
looked up in it; the contract every binary-format reader (PDF, Office, EPUB, mail, RTF) follows."""

from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field

SECTION_SEPARATOR = " › "  # between the headings of a section path: "2 Methods › 2.3 Sampling"


@dataclass(frozen=True)
class ReadLimits:
    """What a reader may spend on one file: bytes it may inflate from a container (a zip bomb is refused before it
    is inflated) and characters of text it may produce."""

    max_inflated_bytes: int = 50 * 1024 * 1024
    max_text_chars: int = 50 * 1024 * 1024


@dataclass(frozen=True)
class Document:
    """A document's extracted text, its title ("" when it has none of its own), and its locations:
    `pages`, the offset in `text` where each page (PDF page, slide) starts, page n at pages[n - 1] (None when the
    format has no pages); `sections`, (offset, heading path) where each section starts, in order, a section running
    until the next (None when the format has no headings)."""

    text: str
    title: str = ""
    pages: list[int] | None = None
    sections: list[tuple[int, str]] | None = None
    extras: dict[str, str] = field(default_factory=dict)  # format-specific facts worth a log line (e.g. skipped attachments)


# A reader of a binary format: the file's bytes in, a Document out; a ReadError with the reason when it cannot.
BinaryReader = Callable[[bytes, ReadLimits], Document]


def page_of(pages: list[int] | None, offset: int) -> int | None:
    """The 1-based page holding text offset `offset`, or None for a format without pages."""
    if not pages:
        return None
    return max(bisect_right(pages, offset), 1)


def section_of(sections: list[tuple[int, str]] | None, offset: int) -> str | None:
    """The heading path of the section holding text offset `offset`, or None (no headings, or before the first)."""
    if not sections:
        return None
    index = bisect_right([start for start, _ in sections], offset) - 1
    return sections[index][1] if index >= 0 else None


class HeadingPath:
    """Builds section paths from headings met in order: a heading of level n replaces those of level >= n."""

    def __init__(self) -> None:
        self._levels: list[tuple[int, str]] = []

    def enter(self, level: int, title: str) -> str:
        """The path once a heading of `level` (1 = top) titled `title` is met."""
        self._levels = [(lv, t) for lv, t in self._levels if lv < level] + [(level, " ".join(title.split()))]
        return SECTION_SEPARATOR.join(t for _, t in self._levels)


def locate_sections(text: str, headings: list[tuple[int, str]]) -> list[tuple[int, str]] | None:
    """Sections of `text` from its headings (level, title), in order: each is found in the text after the one
    before it and starts a section named by its heading path; None when there are no headings."""
    if not headings:
        return None
    path, sections, cursor = HeadingPath(), [], 0
    for level, title in headings:
        title = " ".join(title.split())
        at = text.find(title, cursor) if title else -1
        if at >= 0:
            sections.append((at, path.enter(level, title)))
            cursor = at + len(title)
    return sections or None
