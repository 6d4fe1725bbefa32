"""The reader of Excel workbooks (xlsx) into Documents: sheets as sections, rows as lines."""

from collections.abc import Iterable
from xml.etree import ElementTree as ET

from lodex.indexer.errors import ReadError
from lodex.indexer.readers.containers import SafeZip, local, parse_xml
from lodex.indexer.readers.doc_builder import LINE, DocBuilder, refuse_long
from lodex.indexer.readers.document import Document, ReadLimits
from lodex.indexer.readers.office_common import CELL_SEPARATOR, OFFICE_READER_VERSION, core_title, drop_done, namespace, xml_events
from lodex.indexer.readers.ooxml_readers import rel_id, related, relationships

XLSX_READER_VERSION = OFFICE_READER_VERSION  # see office_common.py
XLSX_MAX_COLUMNS = 16_384  # cells of one row Excel allows (columns A to XFD)


def read_xlsx(data: bytes, limits: ReadLimits) -> Document:
    """Excel: each sheet begins with its name (a section), then one line per row, cells joined by " | " (shared and
    inline strings, numbers as stored, booleans; empty cells left out). Formulas give their cached values."""
    z = SafeZip(data, limits, "xlsx")
    main = related(z, "", "officeDocument", "xl/workbook.xml")
    strings = _xlsx_shared_strings(z, main)
    doc = DocBuilder(limits, "xlsx")
    for name, part in _xlsx_sheets(z, main):
        doc.heading(1, name)
        _xlsx_sheet(z.stream(part), strings, doc, part)
    return doc.build(title=core_title(z))


def _xlsx_sheets(z: SafeZip, main: str) -> list[tuple[str, str]]:
    """(name, part) of each worksheet, in the workbook's order."""
    targets = {rel_id: target for rel_id, _, target in relationships(z, main)}
    root = parse_xml(z.read(main), z.fmt, main)
    s = namespace(root.tag)
    sheets = [(sheet.get("name", ""), targets.get(rel_id(sheet), "")) for sheet in root.iter(f"{s}sheet")]
    return [(name, part) for name, part in sheets if part and z.has(part)]


def _xlsx_shared_strings(z: SafeZip, main: str) -> list[str]:
    """The shared strings table (rich text flattened, phonetic guides left out)."""
    part = related(z, main, "sharedStrings", "xl/sharedStrings.xml")
    if not z.has(part):
        return []
    strings = []
    for event, el, stack in xml_events(z.stream(part), "xlsx", part):
        if event == "end" and local(el.tag) == "si":
            strings.append(_xlsx_rich_text(el))
            drop_done(stack)
    return strings


def _xlsx_rich_text(item: ET.Element) -> str:
    """The text of a shared (si) or inline (is) string: its t, or its runs' t; phonetic runs (rPh) left out."""
    s = namespace(item.tag)
    parts = []
    for child in item:
        if child.tag == f"{s}t":
            parts.append(child.text or "")
        elif child.tag == f"{s}r":
            parts.extend(t.text or "" for t in child.iter(f"{s}t"))
    return "".join(parts)


def _xlsx_sheet(chunks: Iterable[bytes], strings: list[str], doc: DocBuilder, what: str) -> None:
    """Stream one worksheet into `doc`, a line per row: each cell's element freed once read, the row's text counted
    against the limit as it grows (one long shared string used by thousands of cells is refused before it is joined),
    and a row of more cells than Excel allows refused."""
    row: list[str] = []
    s = ""
    cells = chars = 0
    for event, el, stack in xml_events(chunks, "xlsx", what):
        if event == "start":
            s = s or namespace(el.tag)
            continue
        if el.tag == f"{s}c":
            cells += 1
            if cells > XLSX_MAX_COLUMNS:
                raise ReadError(
                    f"xlsx row of more than {XLSX_MAX_COLUMNS:,} cells (more than Excel allows); refused",
                    "the file is corrupt or hostile: exclude it",
                )
            value = _xlsx_cell(el, s, strings)
            drop_done(stack)  # the row's cells read so far: 12M empty ones would otherwise be held until the row ends
            if value:
                chars += len(value) + len(CELL_SEPARATOR)
                refuse_long(doc.length + chars, doc.limits, doc.fmt)
                row.append(value)
        elif el.tag == f"{s}row":
            doc.block(CELL_SEPARATOR.join(row), LINE)
            row, cells, chars = [], 0, 0
            drop_done(stack)


def _xlsx_cell(c: ET.Element, s: str, strings: list[str]) -> str:
    """A cell's value as text, by its type: shared string, inline string, boolean, error, formula string, number."""
    kind = c.get("t", "n")
    if kind == "inlineStr":
        inline = c.find(f"{s}is")
        return _xlsx_rich_text(inline).strip() if inline is not None else ""
    v = c.find(f"{s}v")
    value = (v.text or "").strip() if v is not None else ""
    if kind == "s":
        index = int(value) if value.isdigit() and len(value) <= 10 else -1  # Python refuses int() past 4,300 digits
        return strings[index].strip() if 0 <= index < len(strings) else ""
    if kind == "b":
        return {"1": "TRUE", "0": "FALSE"}.get(value, value)
    return value
