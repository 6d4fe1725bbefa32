"""Readers of Office Open XML files (docx and pptx) into Documents, and the package parts xlsx_reader.py shares."""

import re
from collections.abc import Iterable
from xml.etree import ElementTree as ET

from lodex.indexer.readers.containers import SafeZip, local, parse_xml, resolve
from lodex.indexer.readers.doc_builder import LINE, DocBuilder
from lodex.indexer.readers.document import Document, ReadLimits
from lodex.indexer.readers.office_common import (
    CELL_SEPARATOR,
    MC_FALLBACK,
    OFFICE_READER_VERSION,
    ParagraphBound,
    Tables,
    core_title,
    drop_done,
    namespace,
    xml_events,
)

OOXML_READER_VERSION = OFFICE_READER_VERSION  # see office_common.py


# ----------------------------------------------------------------------------------------------------- OOXML parts


def relationships(z: SafeZip, part: str) -> list[tuple[str, str, str]]:
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


def related(z: SafeZip, part: str, kind: str, default: str = "") -> str:
    """The first target of `part`'s relationships of type …/`kind` (e.g. "officeDocument"), else `default`."""
    for _, rel_type, target in relationships(z, part):
        if rel_type.rsplit("/", 1)[-1] == kind and z.has(target):
            return target
    return default


def rel_id(element: ET.Element) -> str:
    """An element's r:id attribute, in the transitional or the strict namespace."""
    return next((value for key, value in element.attrib.items() if key.endswith("}id")), "")


# ------------------------------------------------------------------------------------------------------------ docx

_HEADING_NAME = re.compile(r"(?i)^heading\s*([1-9])$")
_TOC_NAME = re.compile(r"(?i)^(toc|contents)\s*\d$")
_SKIP_PARAGRAPH = -1  # a style level: table-of-contents entries (they repeat the headings) are left out


def read_docx(data: bytes, limits: ReadLimits) -> Document:
    """Word: paragraphs and table rows in order, headings (by style or outline level) as sections; title from the
    document's properties, else its first heading. Footnotes, comments, headers and footers are not read."""
    z = SafeZip(data, limits, "docx")
    main = related(z, "", "officeDocument", "word/document.xml")
    levels = _docx_style_levels(z, main)
    doc = DocBuilder(limits, "docx")
    _docx_body(z.stream(main), levels, doc, main)
    return doc.build(title=core_title(z))


def _docx_style_levels(z: SafeZip, main: str) -> dict[str, int]:
    """Paragraph style id → heading level (1–9) for heading styles (by outline level, name or the style they are
    based on), _SKIP_PARAGRAPH for table-of-contents styles."""
    part = related(z, main, "styles", "word/styles.xml")
    if not z.has(part):
        return {}
    root = parse_xml(z.read(part), z.fmt, part)
    w = namespace(root.tag)
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
    return {style_id: level for style_id in based.keys() | own.keys() if (level := _inherited(style_id, own, based)) is not None}


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
    tables, bound = Tables(doc), ParagraphBound(doc)
    skip = 0  # inside mc:Fallback (the same content again, for older readers)
    w = ""
    for event, el, stack in xml_events(chunks, "docx", what):
        tag = el.tag
        if event == "start":
            w = w or namespace(tag)
            bound.start(tag == f"{w}p")
            skip += tag == MC_FALLBACK
            if tag == f"{w}tbl":
                tables.begin()
            elif tag == f"{w}tr":
                tables.start_row()
            elif tag == f"{w}tc":
                tables.start_cell()
            continue
        if tag == f"{w}p":
            bound.end(True)
            if not skip:
                _docx_paragraph(el, w, levels, tables, doc)
            drop_done(stack)
        elif tag == f"{w}tc":
            tables.end_cell()
        elif tag == f"{w}tr":
            tables.end_row(doc)
            drop_done(stack)
        elif tag == MC_FALLBACK:
            skip -= 1


def _docx_paragraph(p: ET.Element, w: str, levels: dict[str, int], tables: Tables, doc: DocBuilder) -> None:
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
    main = related(z, "", "officeDocument", "ppt/presentation.xml")
    doc = DocBuilder(limits, "pptx")
    for slide in _pptx_slides(z, main):
        doc.page()
        _pptx_slide(z, slide, doc)
    return doc.build(title=core_title(z), pages=True)


def _pptx_slides(z: SafeZip, main: str) -> list[str]:
    """The slides' parts in the presentation's order."""
    targets = {rel_id: target for rel_id, rel_type, target in relationships(z, main) if rel_type.endswith("/slide")}
    root = parse_xml(z.read(main), z.fmt, main)
    p = namespace(root.tag)
    ids = [rel_id(slide) for slide in root.iter(f"{p}sldId")]
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
    notes = related(z, part, "notesSlide")
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
            rows = [CELL_SEPARATOR.join(text for tc in tr.iter(f"{a}tc") if (text := _cell_text(tc, a))) for tr in el.iter(f"{a}tr")]
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
