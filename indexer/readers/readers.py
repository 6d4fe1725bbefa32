"""Format readers: turn a file's decoded text into plain text plus a title, by file extension."""

import importlib
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePath
from typing import cast

from lodex.indexer.errors import ReadError
from lodex.indexer.readers.decoding import OffsetMap, clean, clean_mapped, decode_source, looks_binary
from lodex.indexer.readers.document import BinaryReader, Document, ReadLimits
from lodex.indexer.readers.html_reader import MAX_HTML_DEPTH, html_depth, read_html  # noqa: F401 - named here too
from lodex.indexer.readers.sniffing import SNIFF_HEAD_BYTES, sniff_format
from lodex.indexer.readers.text_readers import read_csv, read_json, read_jsonl, read_markdown, read_plain, read_rst, read_tsv  # noqa: F401 - named here too


@dataclass(frozen=True)
class Extracted:
    """The text lodex indexes for one file, its title and the format it was read as; for plain text, `offsets` maps
    offsets in `text` (cleaned of invisible characters and CRs) back to the file's own decoded text."""

    text: str
    title: str
    format: str
    encoding: str
    offsets: OffsetMap | None = None
    pages: list[int] | None = None  # offset where each page (slide) starts; see indexer/readers/document.py
    sections: list[tuple[int, str]] | None = None  # (offset, heading path) where each section starts


Reader = Callable[[str], Document]  # a text format: decoded text in
READERS: dict[str, tuple[str, Reader]] = {
    ".txt": ("text", read_plain),
    ".text": ("text", read_plain),
    ".md": ("markdown", read_markdown),
    ".markdown": ("markdown", read_markdown),
    ".rst": ("rst", read_rst),
    ".html": ("html", read_html),
    ".htm": ("html", read_html),
    ".json": ("json", read_json),
    ".jsonl": ("jsonl", read_jsonl),
    ".csv": ("csv", read_csv),
    ".tsv": ("tsv", read_tsv),
}


# Binary formats: extension → (format, module, function) of a reader following indexer/readers/document.py, imported when
# first needed. Content decides where it disagrees with the extension (see extract).
_PDF, _OOXML, _ODF = "lodex.indexer.pdf.pdf_reader", "lodex.indexer.readers.ooxml_readers", "lodex.indexer.readers.odf_readers"
BINARY_READERS: dict[str, tuple[str, str, str]] = {
    ".pdf": ("pdf", _PDF, "read_pdf"),
    ".docx": ("docx", _OOXML, "read_docx"),
    ".pptx": ("pptx", _OOXML, "read_pptx"),
    ".xlsx": ("xlsx", "lodex.indexer.readers.xlsx_reader", "read_xlsx"),
    ".odt": ("odt", _ODF, "read_odt"),
    ".odp": ("odp", _ODF, "read_odp"),
    ".ods": ("ods", _ODF, "read_ods"),
    ".epub": ("epub", "lodex.indexer.readers.epub_reader", "read_epub"),
    ".rtf": ("rtf", "lodex.indexer.readers.rtf_reader", "read_rtf"),
    ".eml": ("eml", "lodex.indexer.readers.mail_reader", "read_eml"),
}
BY_FORMAT = {fmt: (fmt, module, name) for fmt, module, name in BINARY_READERS.values()}
# The version of each text format's extraction, recorded with the index (a binary reader's module <name>_reader(s)
# keeps its own as <NAME>_READER_VERSION): bump one whenever the text (or its pages and sections) extracted from the same file
# would change, so that an index holding the old extraction asks for a rebuild.
TEXT_READER_VERSIONS: dict[str, str] = {fmt: "1" for fmt in ("text", "markdown", "rst", "html", "json", "jsonl", "csv", "tsv")}


def reader_versions() -> dict[str, str]:
    """{format: version} of every reader, text and binary."""
    versions = dict(TEXT_READER_VERSIONS)
    for fmt, module, _ in BY_FORMAT.values():
        try:
            loaded = importlib.import_module(module)
        except ImportError:  # its library is not installed: files of that format fail with the reason when read
            continue
        versions[fmt] = str(getattr(loaded, f"{module.rsplit('.', 1)[-1].split('_')[0].upper()}_READER_VERSION"))
    return versions


def format_of(path: str) -> str | None:
    """The format name lodex reads `path` as by its extension, or None when no reader handles it."""
    suffix = PurePath(path).suffix.lower()
    entry = READERS.get(suffix) or BINARY_READERS.get(suffix)
    return entry[0] if entry else None


def _binary_reader(fmt: str) -> BinaryReader:
    _, module, name = BY_FORMAT[fmt]
    return cast(BinaryReader, getattr(importlib.import_module(module), name))


def fallback_title(text: str, path: str) -> str:
    """The first non-empty line (shortened), else the file name's stem."""
    for line in text.split("\n", 20)[:20]:
        line = line.strip()
        if line:
            return line if len(line) <= 120 else line[:117].rsplit(" ", 1)[0] + "…"
    return PurePath(path).stem


def _cleaned(doc: Document) -> Document:
    """`doc` with invisible characters removed from its text, its page and section offsets moved to match."""
    marks = sorted({0, *(doc.pages or ()), *(start for start, _ in doc.sections or ())})
    pieces = [clean(doc.text[a:b]) for a, b in zip(marks, [*marks[1:], len(doc.text)])]
    moved = dict(zip(marks, itertools.accumulate([0, *(len(p) for p in pieces[:-1])])))
    return Document(
        "".join(pieces),
        doc.title,
        [moved[p] for p in doc.pages] if doc.pages else doc.pages,
        [(moved[a], name) for a, name in doc.sections] if doc.sections else doc.sections,
        doc.extras,
    )


def binary_format_of(path: str, data: bytes) -> str | None:
    """The binary format `extract` reads `data` as, or None when it reads it as text (by its extension). The content
    decides a binary format (a PDF saved as .bin is read as a PDF), except that text formats (RTF, mail) never override
    a text extension: a .md that starts with `{\\rtf` is Markdown."""
    suffix = PurePath(path).suffix.lower()
    sniffed = sniff_format(data[:SNIFF_HEAD_BYTES], data)
    if sniffed in ("eml", "rtf") and suffix in READERS:
        sniffed = None  # mail headers or an RTF group at the top of a text file do not make it one: its extension says
    if sniffed is None and suffix in BINARY_READERS and looks_binary(data[:SNIFF_HEAD_BYTES]):
        sniffed = BINARY_READERS[suffix][0]  # not text, not recognised: its own reader says what is wrong with it
    return sniffed if sniffed in BY_FORMAT else None


def reads_in_process(path: str, data: bytes) -> bool:
    """True when `extract` reads this file as plain text: decoding and cleaning, linear in its size (bounded by
    index.max_parsed_mb), with no parser that could run away; every other read belongs in a budgeted worker."""
    suffix = PurePath(path).suffix.lower()
    return binary_format_of(path, data) is None and (READERS.get(suffix, ("text", read_plain))[1] is read_plain)


def extract(path: str, data: bytes, limits: ReadLimits = ReadLimits()) -> Extracted:
    """Read one file's bytes. The content decides a binary format (a PDF saved as .bin is read as a PDF; a text file
    named .pdf is read as plain text), the extension everything else; a file with a text extension whose content
    looked like a binary format but could not be read as one is read as text."""
    suffix = PurePath(path).suffix.lower()
    sniffed = binary_format_of(path, data)
    if sniffed is not None:
        try:
            doc = _cleaned(_binary_reader(sniffed)(data, limits))
        except ReadError:
            if suffix not in READERS:
                raise
        else:
            return Extracted(doc.text, doc.title.strip() or fallback_title(doc.text, path), sniffed, "binary", pages=doc.pages, sections=doc.sections)
    fmt, reader = READERS.get(suffix) or (("text", read_plain) if suffix in BINARY_READERS else (None, None))
    if fmt is None or reader is None:
        raise ReadError(f"no reader for '{PurePath(path).suffix}' files", "add a reader or exclude it")
    source, encoding = decode_source(data)
    offsets = OffsetMap() if reader is read_plain else None
    decoded = clean_mapped(source, offsets) if offsets is not None else clean(source)
    doc = reader(decoded)
    return Extracted(doc.text, doc.title.strip() or fallback_title(doc.text, path), fmt, encoding, offsets=offsets, sections=doc.sections)
