"""Assembles a Document from blocks of text met in order (paragraphs, rows, headings, page starts), within the limits."""

from lodex.indexer.errors import ReadError
from lodex.indexer.readers.decoding import clean
from lodex.indexer.readers.document import SECTION_SEPARATOR, Document, HeadingPath, ReadLimits

# Bump whenever a change here would change the text, pages or sections of the Documents built.
DOC_BUILDER_VERSION = "1"

PARAGRAPH = "\n\n"  # between paragraphs, slides' blocks, sheets
LINE = "\n"  # between a sheet's rows, a slide's lines


def refuse_long(length: int, limits: ReadLimits, fmt: str) -> None:
    """ReadError when `length` characters of text are more than a document may give."""
    if length > limits.max_text_chars:
        raise ReadError(
            f"{fmt} text too long: over {limits.max_text_chars:,} characters once extracted; refused", "split the document, or exclude it"
        )


class DocBuilder:
    """Text built block by block, with the offsets where pages and sections start; refuses text over the limit as
    soon as it passes it (not once it is all in memory)."""

    def __init__(self, limits: ReadLimits, fmt: str) -> None:
        self.limits, self.fmt = limits, fmt
        self.parts: list[str] = []
        self.length = 0
        self.pages: list[int] = []
        self.sections: list[tuple[int, str]] = []
        self.first_heading = ""
        self._pending_pages = 0  # pages begun whose first block has not come yet
        self._pending_sections: list[str] = []  # paths of sections begun whose first block has not come yet
        self._path = HeadingPath()

    def block(self, text: str, separator: str = PARAGRAPH) -> int | None:
        """Append `text` (cleaned, stripped; nothing when empty) after `separator`; its start offset, or None."""
        text = clean(text).strip()
        if not text:
            return None
        if self.parts:
            separator = PARAGRAPH if self._pending_pages else separator  # a page's first block begins a paragraph
            self.parts.append(separator)
            self.length += len(separator)
        start = self.length
        self.parts.append(text)
        self.length += len(text)
        refuse_long(self.length, self.limits, self.fmt)
        self.pages.extend([start] * self._pending_pages)
        self.sections.extend((start, path) for path in self._pending_sections)
        self._pending_pages, self._pending_sections = 0, []
        return start

    def heading(self, level: int, text: str, separator: str = PARAGRAPH) -> None:
        """Append a heading of `level` (1 = top): a block that starts a section."""
        start = self.block(text, separator)
        if start is not None:
            path = self._path.enter(level, clean(text))
            self.sections.append((start, path))
            self.first_heading = self.first_heading or path.rsplit(SECTION_SEPARATOR, 1)[-1]

    def section(self, level: int, title: str) -> None:
        """Start a section titled `title` (of `level`) at the next block, without adding the title to the text (EPUB
        chapters named by their table of contents, slides by their title)."""
        self._pending_sections.append(self._path.enter(level, title))

    def page(self) -> None:
        """Start a page (slide): it begins with the next block."""
        self._pending_pages += 1

    def build(self, title: str = "", pages: bool = False, extras: dict[str, str] | None = None) -> Document:
        """The Document: `pages` when the format has them; pages and sections begun with no text after them start at
        the text's end."""
        text = "".join(self.parts)
        page_starts = self.pages + [len(text)] * self._pending_pages if pages else None
        sections = self.sections + [(len(text), path) for path in self._pending_sections]
        return Document(
            text=text, title=" ".join(title.split()) or self.first_heading, pages=page_starts, sections=sections or None, extras=extras or {}
        )
