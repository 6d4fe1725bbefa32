"""Readers of the text formats — Markdown, reStructuredText, JSON and JSON Lines, CSV and TSV, plain text — from a
file's decoded text into a Document (readers.py picks one by extension)."""

import csv
import io
import json
import re
import sys
from collections.abc import Iterator
from typing import Any

from lodex.indexer.errors import ReadError
from lodex.indexer.readers.document import Document, locate_sections
from lodex.indexer.readers.html_reader import read_html


def _inline_text(token: Any) -> str:  # markdown-it Token
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
