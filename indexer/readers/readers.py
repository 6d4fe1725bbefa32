"""Format readers: turn a file's decoded text into plain text plus a title, by file extension."""

import csv
import importlib
import io
import itertools
import json
import re
import sys
from collections.abc import Callable, Iterator
from typing import cast
from dataclasses import dataclass
from pathlib import PurePath

from lodex.indexer.errors import ReadError
from lodex.indexer.readers.decoding import OffsetMap, clean, clean_mapped, decode_source, looks_binary
from lodex.indexer.readers.document import BinaryReader, Document, ReadLimits, locate_sections
from lodex.indexer.readers.html_reader import MAX_HTML_DEPTH, html_depth, read_html  # noqa: F401 - named here too
from lodex.indexer.readers.sniffing import SNIFF_HEAD_BYTES, sniff_format

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


def _inline_text(token) -> str:  # markdown-it Token
    parts: list[str] = []
    for child in token.children or []:
        if child.type in ("text", "code_inline", "html_inline"):
            parts.append(child.content if child.type != "html_inline" else "")
        elif child.type in ("softbreak", "hardbreak"):
            parts.append("\n")
        elif child.type == "image":
            parts.append(_inline_text(child))
    return "".join(parts)


# markdown-it holds ~500 bytes of tokens per byte of input: a long file is parsed a segment at a time, cut at a blank
# line (or, in a long run of lines without one, at a line end) outside code fences, so memory stays bounded.
_MD_SEGMENT_CHARS = 64 * 1024
_MD_FENCE = re.compile(r"^ {0,3}(```|~~~)")


def _markdown_segments(text: str) -> Iterator[str]:
    """`text` in pieces of about _MD_SEGMENT_CHARS, cut between blocks outside fenced code."""
    if len(text) <= _MD_SEGMENT_CHARS:
        yield text
        return
    start = size = 0
    fence = False
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if _MD_FENCE.match(line):
            fence = not fence
        size += len(line) + 1
        if not fence and (size >= _MD_SEGMENT_CHARS and not line.strip() or size >= 4 * _MD_SEGMENT_CHARS):
            yield "\n".join(lines[start : i + 1])
            start, size = i + 1, 0
    if start < len(lines):
        yield "\n".join(lines[start:])


def read_markdown(text: str) -> Document:
    """Markdown without markup; heading text is kept as its own paragraph, and headings make the sections."""
    blocks: list[str] = []
    headings: list[tuple[int, str]] = []
    for segment in _markdown_segments(text):
        _markdown_blocks(segment, blocks, headings)
    body = "\n\n".join(blocks)
    return Document(body, headings[0][1] if headings else "", sections=locate_sections(body, headings))


def _markdown_blocks(text: str, blocks: list[str], headings: list[tuple[int, str]]) -> None:
    """Append the text blocks of one Markdown segment to `blocks`, and its headings (level, text) to `headings`."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    for i, token in enumerate(tokens):
        if token.type == "inline":
            content = _inline_text(token).strip()
            if content:
                blocks.append(content)
                if i > 0 and tokens[i - 1].type == "heading_open":
                    headings.append((int(tokens[i - 1].tag[1:]), content))
        elif token.type in ("fence", "code_block"):
            blocks.append(token.content.rstrip("\n"))
        elif token.type == "html_block":
            html_text = read_html(token.content).text
            if html_text:
                blocks.append(html_text)


_RST_ADORNMENT = re.compile(r"^([=\-`:'\"~^_*+#<>.])\1{2,}\s*$")
_RST_DIRECTIVE = re.compile(r"^\.\.\s+(\S+::.*|_[^:]+:.*|\|[^|]+\|.*|\[[^\]]+\].*)?$")
# Inline markup spans are bounded (300 characters of text, 2,000 of target): an unbounded lazy match retried from every
# unmatched `*` or backtick of a long line costs time that grows with the square of the line (and holds the GIL).
_RST_ROLE = re.compile(r":[\w-]{1,50}:`([^`<]{0,300}?)(?:\s{0,20}<[^>]{0,2000}>)?`")
_RST_LINK = re.compile(r"`([^`<]{1,300}?)\s{0,20}<[^>]{1,2000}>`_{1,2}")
_RST_INLINE = re.compile(r"(\*\*|\*|``|`)(\S(?:.{0,300}?\S)?)\1_{0,2}")


def read_rst(text: str) -> Document:
    """reStructuredText without adornments, directives' markers and inline markup; section titles (a line underlined
    by an adornment; levels in the order adornment characters first appear) make the sections."""
    lines: list[str] = []
    headings: list[tuple[int, str]] = []
    levels: dict[str, int] = {}
    raw = text.split("\n")
    for i, line in enumerate(raw):
        if _RST_ADORNMENT.match(line):
            if i > 0 and raw[i - 1].strip() and not _RST_ADORNMENT.match(raw[i - 1]):
                level = levels.setdefault(line.strip()[0], len(levels) + 1)
                headings.append((level, _RST_INLINE.sub(r"\2", raw[i - 1].strip())))
            continue
        if _RST_DIRECTIVE.match(line.strip()) and line.strip().startswith(".."):
            continue
        line = _RST_LINK.sub(r"\1", line)
        line = _RST_ROLE.sub(r"\1", line)
        line = _RST_INLINE.sub(r"\2", line)
        lines.append(line.rstrip())
    body = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return Document(body, headings[0][1] if headings else "", sections=locate_sections(body, headings))


def _json_strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        if value.strip():
            yield value.strip()
    elif isinstance(value, dict):
        for item in value.values():
            yield from _json_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _json_strings(item)


def read_json(text: str) -> Document:
    """The string values of a JSON document, one per paragraph."""
    try:
        value = json.loads(text)
        strings = list(_json_strings(value))
    except json.JSONDecodeError as exc:
        raise ReadError(f"invalid JSON at line {exc.lineno}: {exc.msg}") from exc
    except RecursionError as exc:
        raise ReadError("JSON nested too deeply to read", "exclude the file") from exc
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise ReadError(f"unreadable JSON value: {str(exc).split(';')[0]}", "exclude the file") from exc
    title = value.get("title", "") if isinstance(value, dict) else ""
    return Document("\n\n".join(strings), title if isinstance(title, str) else "")


def read_jsonl(text: str) -> Document:
    """The string values of each JSON line; one line's strings form one paragraph."""
    paragraphs: list[str] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            paragraphs.append("\n".join(_json_strings(json.loads(line))))
        except json.JSONDecodeError as exc:
            raise ReadError(f"invalid JSON on line {number}: {exc.msg}") from exc
        except RecursionError as exc:
            raise ReadError(f"JSON on line {number} nested too deeply to read", "exclude the file") from exc
        except ValueError as exc:
            raise ReadError(f"unreadable JSON value on line {number}: {str(exc).split(';')[0]}", "exclude the file") from exc
    return Document("\n\n".join(p for p in paragraphs if p))


def _read_delimited(text: str, delimiter: str) -> Document:
    csv.field_size_limit(sys.maxsize)  # a cell may be as long as the file (which index.max_parsed_mb bounds)
    rows = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    lines = [" | ".join(" ".join(cell.split()) for cell in row) for row in rows if any(row)]
    return Document("\n".join(lines))


def read_csv(text: str) -> Document:
    """CSV rows as lines of text, cells joined by ' | '; quoted multi-line cells become one line."""
    return _read_delimited(text, ",")


def read_tsv(text: str) -> Document:
    """TSV rows as lines of text, cells joined by ' | '."""
    return _read_delimited(text, "\t")


def read_plain(text: str) -> Document:
    """Plain text as it is."""
    return Document(text)


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
    return Document("".join(pieces), doc.title, [moved[p] for p in doc.pages] if doc.pages else doc.pages,
                    [(moved[a], name) for a, name in doc.sections] if doc.sections else doc.sections, doc.extras)


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
            return Extracted(doc.text, doc.title.strip() or fallback_title(doc.text, path), sniffed, "binary", pages=doc.pages,
                             sections=doc.sections)
    fmt, reader = READERS.get(suffix) or (("text", read_plain) if suffix in BINARY_READERS else (None, None))
    if fmt is None or reader is None:
        raise ReadError(f"no reader for '{PurePath(path).suffix}' files", "add a reader or exclude it")
    source, encoding = decode_source(data)
    offsets = OffsetMap() if reader is read_plain else None
    decoded = clean_mapped(source, offsets) if offsets is not None else clean(source)
    doc = reader(decoded)
    return Extracted(doc.text, doc.title.strip() or fallback_title(doc.text, path), fmt, encoding, offsets=offsets, sections=doc.sections)
