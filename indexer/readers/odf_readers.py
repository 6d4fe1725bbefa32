"""Readers of OpenDocument files (odt, odp, ods) into Documents."""

from xml.etree import ElementTree as ET

from lodex.indexer.errors import ReadError
from lodex.indexer.readers.containers import HOSTILE_FIX, SafeZip, unreadable
from lodex.indexer.readers.doc_builder import LINE, PARAGRAPH, DocBuilder
from lodex.indexer.readers.document import Document, ReadLimits
from lodex.indexer.readers.office_common import OFFICE_READER_VERSION, ParagraphBound, Tables, core_title, drop_done, repeat_count, xml_events

ODF_READER_VERSION = OFFICE_READER_VERSION  # see office_common.py


# ------------------------------------------------------------------------------------------------------- OpenDocument

_ODF_OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
_ODF_TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
_ODF_TABLE = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"
_ODF_DRAW = "{urn:oasis:names:tc:opendocument:xmlns:drawing:1.0}"
_ODF_PRESENTATION = "{urn:oasis:names:tc:opendocument:xmlns:presentation:1.0}"
_T_P, _T_H, _T_S = f"{_ODF_TEXT}p", f"{_ODF_TEXT}h", f"{_ODF_TEXT}s"
_ROW, _CELL, _COVERED = f"{_ODF_TABLE}table-row", f"{_ODF_TABLE}table-cell", f"{_ODF_TABLE}covered-table-cell"
# Subtrees whose paragraphs are not indexed: comments, tracked deletions, generated indexes (they repeat headings).
_ODF_SKIPPED = frozenset(
    [
        f"{_ODF_OFFICE}annotation",
        f"{_ODF_TEXT}tracked-changes",
        f"{_ODF_TEXT}table-of-content",
        f"{_ODF_TEXT}illustration-index",
        f"{_ODF_TEXT}table-index",
        f"{_ODF_TEXT}object-index",
        f"{_ODF_TEXT}user-index",
        f"{_ODF_TEXT}alphabetical-index",
        f"{_ODF_TEXT}bibliography",
    ]
)
# Inside a paragraph: what is left out of its text (notes' and frames' paragraphs are blocks of their own).
_ODF_INLINE_SKIPPED = _ODF_SKIPPED | {
    f"{_ODF_TEXT}note",
    f"{_ODF_DRAW}frame",
    f"{_ODF_DRAW}custom-shape",
    f"{_ODF_DRAW}a",
    f"{_ODF_TEXT}note-citation",
}
MAX_SLIDES = 10_000  # a presentation of more slides is refused as the parser opens them (3M empty ones took minutes)
_ODF_MIMETYPES = {
    "odt": "application/vnd.oasis.opendocument.text",
    "odp": "application/vnd.oasis.opendocument.presentation",
    "ods": "application/vnd.oasis.opendocument.spreadsheet",
}


def read_odt(data: bytes, limits: ReadLimits) -> Document:
    """OpenDocument text: paragraphs and table rows in order, text:h headings (by outline level) as sections; title
    from meta.xml, else the first heading. Notes' text follows the paragraph citing them; comments are left out."""
    z, doc = _odf_open(data, limits, "odt")
    _odf_content(z, doc)
    return doc.build(title=core_title(z))


def read_odp(data: bytes, limits: ReadLimits) -> Document:
    """OpenDocument presentation: each slide (draw:page) a page, its title a section, then its text and notes."""
    z, doc = _odf_open(data, limits, "odp")
    _odf_content(z, doc)
    return doc.build(title=core_title(z), pages=True)


def read_ods(data: bytes, limits: ReadLimits) -> Document:
    """OpenDocument spreadsheet: each sheet begins with its name (a section), then one line per row, cells joined by
    " | " (empty cells left out; repeated rows and cells written out up to MAX_REPEAT times)."""
    z, doc = _odf_open(data, limits, "ods")
    _odf_content(z, doc)
    return doc.build(title=core_title(z))


def _odf_open(data: bytes, limits: ReadLimits, fmt: str) -> tuple[SafeZip, DocBuilder]:
    """The archive (refused when its mimetype names another kind of document) and a builder for it."""
    z = SafeZip(data, limits, fmt)
    manifest = "META-INF/manifest.xml"
    if z.has(manifest) and b"encryption-data" in z.read(manifest):
        raise ReadError(f"password-protected {fmt}: its content is encrypted", "save it without a password")
    if z.has("mimetype"):
        mimetype = z.read("mimetype")[:200].decode("ascii", "replace").strip()
        if mimetype.startswith("application/vnd.oasis.opendocument.") and not mimetype.startswith(_ODF_MIMETYPES[fmt]):
            raise unreadable(fmt, f"the file is a {mimetype.rsplit('.', 1)[-1]} document, not {fmt}")
    return z, DocBuilder(limits, fmt)


class _OdfState:
    """Where the reader of content.xml is: tables open, subtrees skipped, the slide title being read."""

    def __init__(self, doc: DocBuilder) -> None:
        self.tables = Tables(doc, LINE if doc.fmt == "ods" else PARAGRAPH)
        self.bound = ParagraphBound(doc)
        self.skip = 0
        self.title_frame = 0  # inside a slide's title frame
        self.slides = 0
        self.title: list[str] = []


def _odf_content(z: SafeZip, doc: DocBuilder) -> None:
    """Stream content.xml into `doc`."""
    state = _OdfState(doc)
    for event, el, stack in xml_events(z.stream("content.xml"), z.fmt, "content.xml"):
        if event == "start":
            _odf_start(el, state, doc)
        else:
            _odf_end(el, state, doc, stack)


def _odf_start(el: ET.Element, state: _OdfState, doc: DocBuilder) -> None:
    tag = el.tag
    state.bound.start(tag in (_T_P, _T_H))
    if tag == _T_S:
        state.bound.repeat_spaces(_spaces(el))
    elif tag in _ODF_SKIPPED:
        state.skip += 1
    elif tag == f"{_ODF_TABLE}table":
        state.tables.begin()
        name = el.get(f"{_ODF_TABLE}name")
        if name and doc.fmt == "ods" and not state.tables.rows:
            doc.heading(1, name)
    elif tag == _ROW:
        state.tables.start_row()
    elif tag in (_CELL, _COVERED):
        state.tables.start_cell()
    elif tag == f"{_ODF_DRAW}page":
        state.slides += 1
        if state.slides > MAX_SLIDES:
            raise ReadError(f"{doc.fmt} presentation of more than {MAX_SLIDES:,} slides (no real one has so many); refused", HOSTILE_FIX)
        doc.page()
    elif tag == f"{_ODF_DRAW}frame" and el.get(f"{_ODF_PRESENTATION}class") == "title":
        state.title_frame += 1


def _odf_end(el: ET.Element, state: _OdfState, doc: DocBuilder, stack: list[ET.Element]) -> None:
    tag = el.tag
    if tag in _ODF_SKIPPED:
        state.skip -= 1
    elif tag in (_T_P, _T_H):
        state.bound.end(True)
        if not state.skip:
            _odf_paragraph(el, state, doc)
        drop_done(stack)
    elif tag in (_CELL, _COVERED):
        state.tables.end_cell(repeat_count(el.get(f"{_ODF_TABLE}number-columns-repeated")))
    elif tag == _ROW:
        state.tables.end_row(doc, repeat_count(el.get(f"{_ODF_TABLE}number-rows-repeated")))
        drop_done(stack)
    elif tag == f"{_ODF_DRAW}frame" and el.get(f"{_ODF_PRESENTATION}class") == "title":
        state.title_frame -= 1
        doc.heading(1, " ".join(state.title))
        state.title = []


def _odf_paragraph(el: ET.Element, state: _OdfState, doc: DocBuilder) -> None:
    """One text:p or text:h: into the open table cell, the slide title, or the document."""
    text = _odf_text(el)
    if state.tables.in_cell():
        state.tables.add(text)
    elif state.title_frame:
        state.title.append(text)
    elif el.tag == _T_H:
        doc.heading(repeat_count(el.get(f"{_ODF_TEXT}outline-level"), cap=10), text)
    else:
        doc.block(text, LINE if doc.fmt == "odp" else PARAGRAPH)


def _odf_text(paragraph: ET.Element) -> str:
    """The text of an ODF paragraph: spans and links flattened, text:s/tab/line-break written out, notes, frames
    and comments left out (walked without recursion: spans may nest deep)."""
    parts: list[str] = []
    todo: list[ET.Element | str] = [paragraph]  # elements to enter, and tails to write
    while todo:
        item = todo.pop()
        if isinstance(item, str):
            parts.append(item)
            continue
        tag = item.tag
        if item is not paragraph and tag in _ODF_INLINE_SKIPPED:
            continue
        if tag == _T_S:
            parts.append(" " * _spaces(item))
        elif tag == f"{_ODF_TEXT}tab":
            parts.append("\t")
        elif tag == f"{_ODF_TEXT}line-break":
            parts.append("\n")
        elif item.text:
            parts.append(item.text)
        for child in reversed(item):
            if child.tail:
                todo.append(child.tail)
            todo.append(child)
    return "".join(parts)


def _spaces(el: ET.Element) -> int:
    """How many spaces a text:s stands for."""
    return repeat_count(el.get(f"{_ODF_TEXT}c"))
