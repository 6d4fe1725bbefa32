"""Readers of Office Open XML (docx, pptx, xlsx), OpenDocument (odt, odp, ods) and EPUB files into Documents."""

import re
from collections.abc import Iterable, Iterator
from xml.etree import ElementTree as ET

from lodex.indexer.containers import (CONTAINERS_READER_VERSION, MalformedXml, SafeZip, iter_xml, local, parse_xml,
                                      resolve, unreadable)
from lodex.indexer.doc_builder import DOC_BUILDER_VERSION, LINE, PARAGRAPH, DocBuilder
from lodex.indexer.document import Document, ReadLimits
from lodex.indexer.errors import ReadError

# Bump the first number whenever a change here would change the text, title, pages or sections a reader gives; the
# versions of the container and builder code every reader here goes through are part of it.
OFFICE_READER_VERSION = f"1+{CONTAINERS_READER_VERSION}+{DOC_BUILDER_VERSION}"

MAX_REPEAT = 1_000  # an ODF spreadsheet row or cell repeated (table:number-*-repeated) is written out at most this often
CELL_SEPARATOR = " | "

_DC_TITLE = "{http://purl.org/dc/elements/1.1/}title"
_MC_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"  # a duplicate of mc:Choice


# ---------------------------------------------------------------------------------------------------------- shared

class _Tables:
    """Rows of the tables being read (nested ones too): each row becomes one line of its cells joined by " | "; a row
    of a table inside a cell becomes part of that cell."""

    def __init__(self, first_separator: str = PARAGRAPH) -> None:
        self.first_separator = first_separator  # before a table's first row (a spreadsheet's follows its sheet's name)
        self.rows: list[list[str]] = []  # the open rows' cells, innermost last
        self.cells: list[list[str]] = []  # the open cells' paragraphs, innermost last
        self.rows_out = 0  # rows written since the outermost table began (the first is a new paragraph)

    def in_cell(self) -> bool:
        return bool(self.cells)

    def start_table(self) -> None:
        if not self.rows:
            self.rows_out = 0

    def start_row(self) -> None:
        self.rows.append([])

    def start_cell(self) -> None:
        self.cells.append([])

    def add(self, text: str) -> None:
        """A paragraph of the innermost open cell."""
        self.cells[-1].append(" ".join(text.split()))

    def end_cell(self, repeat: int = 1) -> None:
        paragraphs = self.cells.pop() if self.cells else []
        text = " ".join(p for p in paragraphs if p)
        if self.rows and text:
            self.rows[-1].extend([text] * repeat)

    def end_row(self, doc: DocBuilder, repeat: int = 1) -> None:
        """Close the innermost row: written as a line, or into the enclosing cell when the table is nested."""
        cells = self.rows.pop() if self.rows else []
        line = CELL_SEPARATOR.join(cells)
        if not line:
            return
        if self.cells:
            self.cells[-1].append(line)
            return
        for _ in range(repeat):
            doc.block(line, LINE if self.rows_out else self.first_separator)
            self.rows_out += 1


def _drop_done(stack: list[ET.Element]) -> None:
    """Free what the parser built of the elements already handled: the children of the innermost open element."""
    if stack:
        del stack[-1][:]


def _events(chunks: Iterable[bytes], fmt: str, what: str) -> Iterator[tuple[str, ET.Element, list[ET.Element]]]:
    """XML events with the stack of open elements (the element itself excluded, on "end" too)."""
    stack: list[ET.Element] = []
    for event, element in iter_xml(chunks, fmt, what):
        if event == "start":
            yield event, element, stack
            stack.append(element)
        else:
            if stack:
                stack.pop()
            yield event, element, stack


def _namespace(tag: str) -> str:
    """"{urn:x}root" → "{urn:x}" (OOXML's transitional and strict namespaces differ; a part's root names its own)."""
    return tag[: tag.index("}") + 1] if tag.startswith("{") else ""


def _count(value: str | None, default: int = 1, cap: int = MAX_REPEAT) -> int:
    """A count attribute (a repeat, a number of spaces), within 1..cap."""
    try:
        return max(1, min(int(value or default), cap))
    except ValueError:
        return default


# ----------------------------------------------------------------------------------------------------- OOXML parts

def _relationships(z: SafeZip, part: str) -> list[tuple[str, str, str]]:
    """(id, type, archive path of the target) of each relationship of `part` ("" for the package's own)."""
    folder, _, name = part.rpartition("/")
    rels = f"{folder}/_rels/{name}.rels" if folder else f"_rels/{name}.rels"
    if not z.has(rels):
        return []
    out = []
    for rel in parse_xml(z.read(rels), z.fmt, rels):
        if local(rel.tag) == "Relationship" and rel.get("TargetMode") != "External":
            out.append((rel.get("Id", ""), rel.get("Type", ""), resolve(part, rel.get("Target", ""))))
    return out


def _related(z: SafeZip, part: str, kind: str, default: str = "") -> str:
    """The first target of `part`'s relationships of type …/`kind` (e.g. "officeDocument"), else `default`."""
    for _, rel_type, target in _relationships(z, part):
        if rel_type.rsplit("/", 1)[-1] == kind and z.has(target):
            return target
    return default


def _rel_id(element: ET.Element) -> str:
    """An element's r:id attribute, in the transitional or the strict namespace."""
    return next((value for key, value in element.attrib.items() if key.endswith("}id")), "")


def _core_title(z: SafeZip) -> str:
    """dc:title from docProps/core.xml (OOXML) or meta.xml (ODF), "" when none."""
    for part in ("docProps/core.xml", "meta.xml"):
        if z.has(part):
            title = parse_xml(z.read(part), z.fmt, part).find(f".//{_DC_TITLE}")
            if title is not None and title.text and title.text.strip():
                return title.text
    return ""


# ------------------------------------------------------------------------------------------------------------ docx

_HEADING_NAME = re.compile(r"(?i)^heading\s*([1-9])$")
_TOC_NAME = re.compile(r"(?i)^(toc|contents)\s*\d$")
_SKIP_PARAGRAPH = -1  # a style level: table-of-contents entries (they repeat the headings) are left out


def read_docx(data: bytes, limits: ReadLimits) -> Document:
    """Word: paragraphs and table rows in order, headings (by style or outline level) as sections; title from the
    document's properties, else its first heading. Footnotes, comments, headers and footers are not read."""
    z = SafeZip(data, limits, "docx")
    main = _related(z, "", "officeDocument", "word/document.xml")
    levels = _docx_style_levels(z, main)
    doc = DocBuilder(limits, "docx")
    _docx_body(z.stream(main), levels, doc, main)
    return doc.build(title=_core_title(z))


def _docx_style_levels(z: SafeZip, main: str) -> dict[str, int]:
    """Paragraph style id → heading level (1–9) for heading styles (by outline level, name or the style they are
    based on), _SKIP_PARAGRAPH for table-of-contents styles."""
    part = _related(z, main, "styles", "word/styles.xml")
    if not z.has(part):
        return {}
    root = parse_xml(z.read(part), z.fmt, part)
    w = _namespace(root.tag)
    own: dict[str, int] = {}
    based: dict[str, str] = {}
    for style in root.iter(f"{w}style"):
        style_id = style.get(f"{w}styleId", "")
        level = _docx_level_of(style, w)
        if level is not None:
            own[style_id] = level
        parent = style.find(f"{w}basedOn")
        if parent is not None:
            based[style_id] = parent.get(f"{w}val", "")
    return {style_id: level for style_id in based.keys() | own.keys()
            if (level := _inherited(style_id, own, based)) is not None}


def _docx_level_of(style: ET.Element, w: str) -> int | None:
    """A style's own heading level: its outline level, else a "heading N" name; _SKIP_PARAGRAPH for "toc N"."""
    name_el = style.find(f"{w}name")
    name = name_el.get(f"{w}val", "") if name_el is not None else ""
    if _TOC_NAME.match(name):
        return _SKIP_PARAGRAPH
    outline = style.find(f"{w}pPr/{w}outlineLvl")
    if outline is not None:
        value = outline.get(f"{w}val", "")
        return int(value) + 1 if value.isdigit() and int(value) < 9 else None
    match = _HEADING_NAME.match(name)
    return int(match.group(1)) if match else None


def _inherited(style_id: str, own: dict[str, int], based: dict[str, str]) -> int | None:
    """A style's level, or that of the nearest style it is based on that has one (10 steps at most)."""
    for _ in range(10):
        if style_id in own:
            return own[style_id]
        if style_id not in based:
            return None
        style_id = based[style_id]
    return None


def _docx_body(chunks: Iterable[bytes], levels: dict[str, int], doc: DocBuilder, what: str) -> None:
    """Stream word/document.xml into `doc`: paragraphs (headings as sections) and table rows, in order."""
    tables = _Tables()
    skip = 0  # inside mc:Fallback (the same content again, for older readers)
    w = ""
    for event, el, stack in _events(chunks, "docx", what):
        tag = el.tag
        if event == "start":
            w = w or _namespace(tag)
            skip += tag == _MC_FALLBACK
            if tag == f"{w}tbl":
                tables.start_table()
            elif tag == f"{w}tr":
                tables.start_row()
            elif tag == f"{w}tc":
                tables.start_cell()
            continue
        if tag == f"{w}p":
            if not skip:
                _docx_paragraph(el, w, levels, tables, doc)
            _drop_done(stack)
        elif tag == f"{w}tc":
            tables.end_cell()
        elif tag == f"{w}tr":
            tables.end_row(doc)
            _drop_done(stack)
        elif tag == _MC_FALLBACK:
            skip -= 1


def _docx_paragraph(p: ET.Element, w: str, levels: dict[str, int], tables: _Tables, doc: DocBuilder) -> None:
    """One w:p: into the open table cell, or the document as a heading or a paragraph."""
    text = _docx_text(p, w)
    level = _docx_paragraph_level(p, w, levels)
    if level == _SKIP_PARAGRAPH:
        return
    if tables.in_cell():
        tables.add(text)
    elif level:
        doc.heading(level, text)
    else:
        doc.block(text)


def _docx_text(p: ET.Element, w: str) -> str:
    """The text of a paragraph's runs (inserted text included, deleted text and field codes not)."""
    parts: list[str] = []
    t, tab, br, cr, hyphen = f"{w}t", f"{w}tab", f"{w}br", f"{w}cr", f"{w}noBreakHyphen"
    for run in p.iter(f"{w}r"):
        for child in run:
            tag = child.tag
            if tag == t:
                parts.append(child.text or "")
            elif tag == tab:
                parts.append("\t")
            elif tag == br or tag == cr:
                parts.append("\n")
            elif tag == hyphen:
                parts.append("-")
    return "".join(parts)


def _docx_paragraph_level(p: ET.Element, w: str, levels: dict[str, int]) -> int | None:
    """A paragraph's heading level: its own outline level, else its style's; None for body text."""
    props = p.find(f"{w}pPr")
    if props is None:
        return None
    outline = props.find(f"{w}outlineLvl")
    if outline is not None and (value := outline.get(f"{w}val", "9")).isdigit():
        return int(value) + 1 if int(value) < 9 else None
    style = props.find(f"{w}pStyle")
    if style is None:
        return None
    style_id = style.get(f"{w}val", "")
    if style_id in levels:
        return levels[style_id]
    match = _HEADING_NAME.match(style_id)
    return int(match.group(1)) if match else None


# ------------------------------------------------------------------------------------------------------------ pptx

_SLIDE_TITLE = ("title", "ctrTitle")
_BOILERPLATE = ("sldNum", "dt", "ftr", "hdr", "sldImg")  # slide number, date, footer, header, slide picture


def read_pptx(data: bytes, limits: ReadLimits) -> Document:
    """PowerPoint: each slide's text in slide order (its title first, a section), then its speaker notes; page n is
    slide n."""
    z = SafeZip(data, limits, "pptx")
    main = _related(z, "", "officeDocument", "ppt/presentation.xml")
    doc = DocBuilder(limits, "pptx")
    for slide in _pptx_slides(z, main):
        doc.page()
        _pptx_slide(z, slide, doc)
    return doc.build(title=_core_title(z), pages=True)


def _pptx_slides(z: SafeZip, main: str) -> list[str]:
    """The slides' parts in the presentation's order."""
    targets = {rel_id: target for rel_id, rel_type, target in _relationships(z, main) if rel_type.endswith("/slide")}
    root = parse_xml(z.read(main), z.fmt, main)
    p = _namespace(root.tag)
    ids = [_rel_id(slide) for slide in root.iter(f"{p}sldId")]
    return [targets[rel_id] for rel_id in ids if rel_id in targets and z.has(targets[rel_id])]


def _pptx_slide(z: SafeZip, part: str, doc: DocBuilder) -> None:
    """One slide: its title (a section), its other text, then the text of its notes."""
    root = parse_xml(z.read(part), z.fmt, part)
    shapes = _pptx_shapes(root)
    titles = [lines for kind, lines in shapes if kind in _SLIDE_TITLE]
    if titles:
        doc.heading(1, " ".join(line for lines in titles for line in lines))
    for kind, lines in shapes:
        if kind not in _SLIDE_TITLE and kind not in _BOILERPLATE:
            for line in lines:
                doc.block(line, LINE)
    notes = _related(z, part, "notesSlide")
    if notes:
        for kind, lines in _pptx_shapes(parse_xml(z.read(notes), z.fmt, notes)):
            if kind not in _BOILERPLATE:
                for line in lines:
                    doc.block(line, LINE)


def _pptx_shapes(root: ET.Element) -> list[tuple[str, list[str]]]:
    """(placeholder type, "" when none; lines of text) of each shape and table of a slide, in order."""
    a = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
    shapes = []
    for el in root.iter():
        if local(el.tag) == "sp":
            shapes.append((_placeholder(el), [_drawing_text(p, a) for p in el.iter(f"{a}p")]))
        elif el.tag == f"{a}tbl":
            rows = [CELL_SEPARATOR.join(text for tc in tr.iter(f"{a}tc") if (text := _cell_text(tc, a)))
                    for tr in el.iter(f"{a}tr")]
            shapes.append(("", rows))
    return shapes


def _placeholder(shape: ET.Element) -> str:
    """A shape's placeholder type ("title", "body", …; "body" when it names none), "" when it is no placeholder."""
    for el in shape.iter():
        if local(el.tag) == "ph":
            return el.get("type", "body")
        if local(el.tag) == "txBody":
            break
    return ""


def _cell_text(tc: ET.Element, a: str) -> str:
    return " ".join(_drawing_text(p, a) for p in tc.iter(f"{a}p")).strip()


def _drawing_text(p: ET.Element, a: str) -> str:
    """The text of a DrawingML paragraph (a:p): its runs and fields, line breaks kept."""
    parts = []
    for child in p:
        if child.tag == f"{a}br":
            parts.append("\n")
        elif child.tag in (f"{a}r", f"{a}fld"):
            parts.extend(t.text or "" for t in child.iter(f"{a}t"))
    return "".join(parts)


# ------------------------------------------------------------------------------------------------------------ xlsx

def read_xlsx(data: bytes, limits: ReadLimits) -> Document:
    """Excel: each sheet begins with its name (a section), then one line per row, cells joined by " | " (shared and
    inline strings, numbers as stored, booleans; empty cells left out). Formulas give their cached values."""
    z = SafeZip(data, limits, "xlsx")
    main = _related(z, "", "officeDocument", "xl/workbook.xml")
    strings = _xlsx_shared_strings(z, main)
    doc = DocBuilder(limits, "xlsx")
    for name, part in _xlsx_sheets(z, main):
        doc.heading(1, name)
        _xlsx_sheet(z.stream(part), strings, doc, part)
    return doc.build(title=_core_title(z))


def _xlsx_sheets(z: SafeZip, main: str) -> list[tuple[str, str]]:
    """(name, part) of each worksheet, in the workbook's order."""
    targets = {rel_id: target for rel_id, _, target in _relationships(z, main)}
    root = parse_xml(z.read(main), z.fmt, main)
    s = _namespace(root.tag)
    sheets = [(sheet.get("name", ""), targets.get(_rel_id(sheet), "")) for sheet in root.iter(f"{s}sheet")]
    return [(name, part) for name, part in sheets if part and z.has(part)]


def _xlsx_shared_strings(z: SafeZip, main: str) -> list[str]:
    """The shared strings table (rich text flattened, phonetic guides left out)."""
    part = _related(z, main, "sharedStrings", "xl/sharedStrings.xml")
    if not z.has(part):
        return []
    strings = []
    for event, el, stack in _events(z.stream(part), "xlsx", part):
        if event == "end" and local(el.tag) == "si":
            strings.append(_xlsx_rich_text(el))
            _drop_done(stack)
    return strings


def _xlsx_rich_text(item: ET.Element) -> str:
    """The text of a shared (si) or inline (is) string: its t, or its runs' t; phonetic runs (rPh) left out."""
    s = _namespace(item.tag)
    parts = []
    for child in item:
        if child.tag == f"{s}t":
            parts.append(child.text or "")
        elif child.tag == f"{s}r":
            parts.extend(t.text or "" for t in child.iter(f"{s}t"))
    return "".join(parts)


def _xlsx_sheet(chunks: Iterable[bytes], strings: list[str], doc: DocBuilder, what: str) -> None:
    """Stream one worksheet into `doc`, a line per row."""
    row: list[str] = []
    s = ""
    for event, el, stack in _events(chunks, "xlsx", what):
        if event == "start":
            s = s or _namespace(el.tag)
            continue
        if el.tag == f"{s}c":
            value = _xlsx_cell(el, s, strings)
            if value:
                row.append(value)
        elif el.tag == f"{s}row":
            doc.block(CELL_SEPARATOR.join(row), LINE)
            row = []
            _drop_done(stack)


def _xlsx_cell(c: ET.Element, s: str, strings: list[str]) -> str:
    """A cell's value as text, by its type: shared string, inline string, boolean, error, formula string, number."""
    kind = c.get("t", "n")
    if kind == "inlineStr":
        inline = c.find(f"{s}is")
        return _xlsx_rich_text(inline).strip() if inline is not None else ""
    v = c.find(f"{s}v")
    value = (v.text or "").strip() if v is not None else ""
    if kind == "s":
        index = int(value) if value.isdigit() else -1
        return strings[index].strip() if 0 <= index < len(strings) else ""
    if kind == "b":
        return {"1": "TRUE", "0": "FALSE"}.get(value, value)
    return value


# ------------------------------------------------------------------------------------------------------- OpenDocument

_ODF_OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
_ODF_TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
_ODF_TABLE = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"
_ODF_DRAW = "{urn:oasis:names:tc:opendocument:xmlns:drawing:1.0}"
_ODF_PRESENTATION = "{urn:oasis:names:tc:opendocument:xmlns:presentation:1.0}"
_T_P, _T_H = f"{_ODF_TEXT}p", f"{_ODF_TEXT}h"
_ROW, _CELL, _COVERED = f"{_ODF_TABLE}table-row", f"{_ODF_TABLE}table-cell", f"{_ODF_TABLE}covered-table-cell"
# Subtrees whose paragraphs are not indexed: comments, tracked deletions, generated indexes (they repeat headings).
_ODF_SKIPPED = frozenset(
    [f"{_ODF_OFFICE}annotation", f"{_ODF_TEXT}tracked-changes", f"{_ODF_TEXT}table-of-content",
     f"{_ODF_TEXT}illustration-index", f"{_ODF_TEXT}table-index", f"{_ODF_TEXT}object-index",
     f"{_ODF_TEXT}user-index", f"{_ODF_TEXT}alphabetical-index", f"{_ODF_TEXT}bibliography"])
# Inside a paragraph: what is left out of its text (notes' and frames' paragraphs are blocks of their own).
_ODF_INLINE_SKIPPED = _ODF_SKIPPED | {f"{_ODF_TEXT}note", f"{_ODF_DRAW}frame", f"{_ODF_DRAW}custom-shape",
                                      f"{_ODF_DRAW}a", f"{_ODF_TEXT}note-citation"}
_ODF_MIMETYPES = {"odt": "application/vnd.oasis.opendocument.text",
                  "odp": "application/vnd.oasis.opendocument.presentation",
                  "ods": "application/vnd.oasis.opendocument.spreadsheet"}


def read_odt(data: bytes, limits: ReadLimits) -> Document:
    """OpenDocument text: paragraphs and table rows in order, text:h headings (by outline level) as sections; title
    from meta.xml, else the first heading. Notes' text follows the paragraph citing them; comments are left out."""
    z, doc = _odf_open(data, limits, "odt")
    _odf_content(z, doc)
    return doc.build(title=_core_title(z))


def read_odp(data: bytes, limits: ReadLimits) -> Document:
    """OpenDocument presentation: each slide (draw:page) a page, its title a section, then its text and notes."""
    z, doc = _odf_open(data, limits, "odp")
    _odf_content(z, doc)
    return doc.build(title=_core_title(z), pages=True)


def read_ods(data: bytes, limits: ReadLimits) -> Document:
    """OpenDocument spreadsheet: each sheet begins with its name (a section), then one line per row, cells joined by
    " | " (empty cells left out; repeated rows and cells written out up to MAX_REPEAT times)."""
    z, doc = _odf_open(data, limits, "ods")
    _odf_content(z, doc)
    return doc.build(title=_core_title(z))


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

    def __init__(self, fmt: str) -> None:
        self.tables = _Tables(LINE if fmt == "ods" else PARAGRAPH)
        self.skip = 0
        self.title_frame = 0  # inside a slide's title frame
        self.title: list[str] = []


def _odf_content(z: SafeZip, doc: DocBuilder) -> None:
    """Stream content.xml into `doc`."""
    state = _OdfState(z.fmt)
    for event, el, stack in _events(z.stream("content.xml"), z.fmt, "content.xml"):
        if event == "start":
            _odf_start(el, state, doc)
        else:
            _odf_end(el, state, doc, stack)


def _odf_start(el: ET.Element, state: _OdfState, doc: DocBuilder) -> None:
    tag = el.tag
    if tag in _ODF_SKIPPED:
        state.skip += 1
    elif tag == f"{_ODF_TABLE}table":
        state.tables.start_table()
        name = el.get(f"{_ODF_TABLE}name")
        if name and doc.fmt == "ods" and not state.tables.rows:
            doc.heading(1, name)
    elif tag == _ROW:
        state.tables.start_row()
    elif tag in (_CELL, _COVERED):
        state.tables.start_cell()
    elif tag == f"{_ODF_DRAW}page":
        doc.page()
    elif tag == f"{_ODF_DRAW}frame" and el.get(f"{_ODF_PRESENTATION}class") == "title":
        state.title_frame += 1


def _odf_end(el: ET.Element, state: _OdfState, doc: DocBuilder, stack: list[ET.Element]) -> None:
    tag = el.tag
    if tag in _ODF_SKIPPED:
        state.skip -= 1
    elif tag in (_T_P, _T_H):
        if not state.skip:
            _odf_paragraph(el, state, doc)
        _drop_done(stack)
    elif tag in (_CELL, _COVERED):
        state.tables.end_cell(_count(el.get(f"{_ODF_TABLE}number-columns-repeated")))
    elif tag == _ROW:
        state.tables.end_row(doc, _count(el.get(f"{_ODF_TABLE}number-rows-repeated")))
        _drop_done(stack)
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
        doc.heading(_count(el.get(f"{_ODF_TEXT}outline-level"), cap=10), text)
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
        if tag == f"{_ODF_TEXT}s":
            parts.append(" " * _count(item.get(f"{_ODF_TEXT}c")))
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


# ------------------------------------------------------------------------------------------------------------ EPUB

_OPF = "{http://www.idpf.org/2007/opf}"
_NCX = "{http://www.daisy.org/z3986/2005/ncx/}"
_CONTAINER = "{urn:oasis:names:tc:opendocument:xmlns:container}"
_XHTML_TYPES = ("application/xhtml+xml", "text/html")


def read_epub(data: bytes, limits: ReadLimits) -> Document:
    """EPUB: the spine's chapters in order as text; each chapter a section named by the table of contents (EPUB 3 nav
    or EPUB 2 NCX, nesting giving the path), else by its first heading; title from the package metadata."""
    z = SafeZip(data, limits, "epub")
    opf = _epub_package_path(z)
    package = parse_xml(z.read(opf), z.fmt, opf)
    manifest = _epub_manifest(package, opf)
    spine = _epub_spine(package, manifest)
    _epub_refuse_encrypted(z, [path for path, _ in spine])
    toc = _epub_toc(z, package, manifest)
    doc = DocBuilder(limits, "epub")
    for path, media_type in spine:
        if media_type in _XHTML_TYPES and z.has(path):
            _epub_chapter(z.read(path), toc.get(path), doc)
    title = package.find(f"{_OPF}metadata/{_DC_TITLE}")
    return doc.build(title=(title.text or "") if title is not None else "")


def _epub_package_path(z: SafeZip) -> str:
    """The package document (OPF) named by META-INF/container.xml."""
    part = "META-INF/container.xml"
    if not z.has(part):
        raise unreadable("epub", f"no {part} in the archive")
    rootfile = parse_xml(z.read(part), z.fmt, part).find(f".//{_CONTAINER}rootfile")
    path = rootfile.get("full-path", "") if rootfile is not None else ""
    if not z.has(path):
        raise unreadable("epub", f"the package document {path or '(none named)'} is missing")
    return path


def _epub_manifest(package: ET.Element, opf: str) -> dict[str, tuple[str, str, str]]:
    """Manifest id → (archive path, media type, properties)."""
    return {item.get("id", ""): (resolve(opf, item.get("href", "")), item.get("media-type", ""),
                                 item.get("properties", ""))
            for item in package.iter(f"{_OPF}item")}


def _epub_spine(package: ET.Element, manifest: dict[str, tuple[str, str, str]]) -> list[tuple[str, str]]:
    """(archive path, media type) of the spine's items, in reading order."""
    items = [manifest.get(ref.get("idref", "")) for ref in package.iter(f"{_OPF}itemref")]
    return [(item[0], item[1]) for item in items if item]


def _epub_refuse_encrypted(z: SafeZip, chapters: list[str]) -> None:
    """ReadError when META-INF/encryption.xml lists a chapter (DRM); obfuscated fonts alone are fine."""
    part = "META-INF/encryption.xml"
    if not z.has(part):
        return
    root = parse_xml(z.read(part), z.fmt, part)
    encrypted = {resolve("", ref.get("URI", "")) for ref in root.iter() if local(ref.tag) == "CipherReference"}
    if encrypted & set(chapters):
        raise ReadError("encrypted epub (DRM): its chapters cannot be read", "exclude the file")


def _epub_toc(z: SafeZip, package: ET.Element, manifest: dict[str, tuple[str, str, str]]) -> dict[str, list[tuple[int, str]]]:
    """Chapter path → [(level, title), …] of the table-of-contents entries pointing at the chapter (its start; an
    entry for a fragment inside the chapter counts as the chapter's when it is the first), from the EPUB 3 nav
    document, else the EPUB 2 NCX."""
    nav = next((path for path, _, props in manifest.values() if "nav" in props.split()), "")
    entries = _nav_entries(z.read(nav), nav) if nav and z.has(nav) else []
    if not entries:
        spine = package.find(f"{_OPF}spine")
        ncx = manifest.get(spine.get("toc", "") if spine is not None else "", ("", "", ""))[0]
        try:
            entries = _ncx_entries(z, ncx) if ncx and z.has(ncx) else []
        except MalformedXml:
            entries = []  # chapters are then named by their first heading
    toc: dict[str, list[tuple[int, str]]] = {}
    for level, title, target in entries:
        path, _, fragment = target.partition("#")
        if title and (path not in toc or not fragment):
            toc.setdefault(path, []).append((level, title))
    return toc


def _nav_entries(data: bytes, nav: str) -> list[tuple[int, str, str]]:
    """(level, title, target) of the EPUB 3 nav document's toc links; level = how deep its list nests."""
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(data.decode("utf-8", "replace"))
    navs = tree.css("nav")
    toc = next((n for n in navs if "toc" in (n.attributes.get("epub:type") or "").split()), navs[0] if navs else None)
    if toc is None:
        return []
    entries = []
    for link in toc.css("a"):
        level, node = 0, link.parent
        while node is not None and node.tag != "nav":
            level += node.tag == "ol"
            node = node.parent
        target = resolve(nav, link.attributes.get("href") or "") + _fragment(link.attributes.get("href") or "")
        entries.append((max(level, 1), " ".join(link.text(strip=False).split()), target))
    return entries


def _ncx_entries(z: SafeZip, ncx: str) -> list[tuple[int, str, str]]:
    """(level, title, target) of the EPUB 2 NCX's navPoints; level = how deep they nest."""
    root = parse_xml(z.read(ncx), z.fmt, ncx)
    entries: list[tuple[int, str, str]] = []
    todo = [(point, 1) for point in reversed(root.findall(f"{_NCX}navMap/{_NCX}navPoint"))]
    while todo:
        point, level = todo.pop()
        label = point.find(f"{_NCX}navLabel/{_NCX}text")
        content = point.find(f"{_NCX}content")
        src = content.get("src", "") if content is not None else ""
        title = " ".join((label.text or "").split()) if label is not None else ""
        entries.append((level, title, resolve(ncx, src) + _fragment(src)))
        todo.extend((child, level + 1) for child in reversed(point.findall(f"{_NCX}navPoint")))
    return entries


def _fragment(href: str) -> str:
    return "#" + href.partition("#")[2] if "#" in href else ""


def _epub_chapter(data: bytes, toc: list[tuple[int, str]] | None, doc: DocBuilder) -> None:
    """One spine chapter: its sections (from the table of contents, else its first heading), then its text."""
    from lodex.indexer.decoding import decode
    from lodex.indexer.readers import read_html

    markup, _ = decode(data)
    for level, title in toc or _first_heading(markup):
        doc.section(level, title)
    text = read_html(markup).text
    doc.block(text)


def _first_heading(markup: str) -> list[tuple[int, str]]:
    """[(level, text)] of a chapter's first h1–h6, [] when it has none."""
    from selectolax.lexbor import LexborHTMLParser

    heading = LexborHTMLParser(markup).css_first("h1, h2, h3, h4, h5, h6")
    text = " ".join(heading.text(strip=False).split()) if heading is not None else ""
    return [(int((heading.tag or "h1")[1]), text)] if heading is not None and text else []
