"""What the Office, OpenDocument and EPUB readers share: the reader version, streamed XML events, table rows."""

from collections.abc import Iterable, Iterator
from xml.etree import ElementTree as ET

from lodex.indexer.errors import ReadError
from lodex.indexer.readers.containers import CONTAINERS_READER_VERSION, HOSTILE_FIX, SafeZip, iter_xml, parse_xml
from lodex.indexer.readers.doc_builder import DOC_BUILDER_VERSION, LINE, PARAGRAPH, DocBuilder, refuse_long

# Bump the first number whenever a change here would change the text, title, pages or sections a reader gives; the
# versions of the container and builder code every reader here goes through are part of it.
OFFICE_READER_VERSION = f"1+{CONTAINERS_READER_VERSION}+{DOC_BUILDER_VERSION}"

MAX_REPEAT = 1_000  # an ODF spreadsheet row or cell repeated (table:number-*-repeated) is written out at most this often
CELL_SEPARATOR = " | "
# XML nested deeper than this is refused as the parser opens it (tables in tables in tables, a million deep, took minutes
# and GBs); a real document nests a few dozen elements (a table in a cell is three).
MAX_XML_DEPTH = 1_000
# A paragraph holding more elements than this (runs, spans, spaces, notes, paragraphs nested in it) is refused as the
# parser opens them: its elements are held until it ends, and a real paragraph has hundreds.
MAX_PARAGRAPH_ELEMENTS = 100_000

DC_TITLE = "{http://purl.org/dc/elements/1.1/}title"
MC_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"  # a duplicate of mc:Choice


class Tables:
    """Rows of the tables being read (nested ones too): each row becomes one line of its cells joined by " | "; a row
    of a table inside a cell becomes part of that cell."""

    def __init__(self, doc: DocBuilder, first_separator: str = PARAGRAPH) -> None:
        self.doc = doc  # where rows are written; its limit on text also counts the rows still open
        self.first_separator = first_separator  # before a table's first row (a spreadsheet's follows its sheet's name)
        self.rows: list[list[str]] = []  # the open rows' cells, innermost last
        self.cells: list[list[str]] = []  # the open cells' paragraphs, innermost last
        self.rows_out = 0  # rows written since the outermost table began (the first is a new paragraph)
        self.open_chars = 0  # characters held in open rows and cells, not yet written

    def in_cell(self) -> bool:
        return bool(self.cells)

    def begin(self) -> None:
        """A table begins (one nested in a cell goes on counting its outermost table's rows)."""
        if not self.rows:
            self.rows_out = 0

    def start_row(self) -> None:
        self.rows.append([])

    def start_cell(self) -> None:
        self.cells.append([])

    def _hold(self, chars: int) -> None:
        """Count `chars` more characters held open: refused as soon as the text, written and open, passes the limit
        (a cell repeated a thousand times, or a row of a thousand long cells, is never built to be measured)."""
        self.open_chars += chars
        refuse_long(self.doc.length + self.open_chars, self.doc.limits, self.doc.fmt)

    def add(self, text: str) -> None:
        """A paragraph of the innermost open cell."""
        paragraph = " ".join(text.split())
        self._hold(len(paragraph) + 1)
        self.cells[-1].append(paragraph)

    def end_cell(self, repeat: int = 1) -> None:
        paragraphs = self.cells.pop() if self.cells else []
        text = " ".join(p for p in paragraphs if p)
        if self.rows and text:
            self._hold((len(text) + len(CELL_SEPARATOR)) * repeat)
            self.rows[-1].extend([text] * repeat)

    def end_row(self, doc: DocBuilder, repeat: int = 1) -> None:
        """Close the innermost row: written as a line, or into the enclosing cell when the table is nested."""
        cells = self.rows.pop() if self.rows else []
        line = CELL_SEPARATOR.join(cells)
        if not self.rows and not self.cells:
            self.open_chars = 0  # all written below (or nothing to write)
        if not line:
            return
        if self.cells:
            self.cells[-1].append(line)
            return
        for _ in range(repeat):
            doc.block(line, LINE if self.rows_out else self.first_separator)
            self.rows_out += 1


def drop_done(stack: list[ET.Element]) -> None:
    """Free what the parser built of the elements already handled: the children of the innermost open element."""
    if stack:
        del stack[-1][:]


class ParagraphBound:
    """What the open paragraph holds, counted as the parser opens it: refused past MAX_PARAGRAPH_ELEMENTS elements, or
    when the spaces it repeats (ODF's text:s) take the document's text past its limit, before the paragraph is built."""

    def __init__(self, doc: DocBuilder) -> None:
        self.doc = doc
        self.open = 0  # paragraphs open (a note's, a text box's paragraphs open inside another)
        self.elements = 0  # elements opened inside the outermost open paragraph
        self.spaces = 0  # spaces its text:s elements repeat

    def start(self, paragraph: bool) -> None:
        """An element opens (`paragraph`: it is one)."""
        if self.open:
            self.elements += 1
            if self.elements > MAX_PARAGRAPH_ELEMENTS:
                raise ReadError(
                    f"{self.doc.fmt} paragraph of more than {MAX_PARAGRAPH_ELEMENTS:,} elements (no real document has one); refused", HOSTILE_FIX
                )
        self.open += paragraph

    def repeat_spaces(self, count: int) -> None:
        """The open paragraph repeats `count` spaces."""
        self.spaces += count
        if self.doc.length + self.spaces > self.doc.limits.max_text_chars:
            raise ReadError(
                f"{self.doc.fmt} paragraph whose repeated spaces (text:s) add up to more than {self.doc.limits.max_text_chars:,} characters; refused",
                HOSTILE_FIX,
            )

    def end(self, paragraph: bool) -> None:
        """An element ends (`paragraph`: it is one)."""
        if paragraph and self.open:
            self.open -= 1
            if not self.open:
                self.elements = self.spaces = 0


def xml_events(chunks: Iterable[bytes], fmt: str, what: str) -> Iterator[tuple[str, ET.Element, list[ET.Element]]]:
    """XML events with the stack of open elements (the element itself excluded, on "end" too); XML nested deeper than
    MAX_XML_DEPTH is refused."""
    stack: list[ET.Element] = []
    for event, element in iter_xml(chunks, fmt, what):
        if event == "start":
            if len(stack) >= MAX_XML_DEPTH:
                raise ReadError(
                    f"{fmt} {what} nests elements deeper than {MAX_XML_DEPTH:,} levels (tables in tables, "
                    f"lists in lists; no real document does); refused",
                    HOSTILE_FIX,
                )
            yield event, element, stack
            stack.append(element)
        else:
            if stack:
                stack.pop()
            yield event, element, stack


def namespace(tag: str) -> str:
    """ "{urn:x}root" → "{urn:x}" (OOXML's transitional and strict namespaces differ; a part's root names its own)."""
    return tag[: tag.index("}") + 1] if tag.startswith("{") else ""


def repeat_count(value: str | None, default: int = 1, cap: int = MAX_REPEAT) -> int:
    """A count attribute (a repeat, a number of spaces), within 1..cap."""
    try:
        return max(1, min(int(value or default), cap))
    except ValueError:
        return default


def core_title(z: SafeZip) -> str:
    """dc:title from docProps/core.xml (OOXML) or meta.xml (ODF), "" when none."""
    for part in ("docProps/core.xml", "meta.xml"):
        if z.has(part):
            title = parse_xml(z.read(part), z.fmt, part).find(f".//{DC_TITLE}")
            if title is not None and title.text and title.text.strip():
                return title.text
    return ""
