"""PDF reader: each page's text layer in reading order (columns, joined hyphenation, no running headers), via pdfium."""

import re
import threading
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from statistics import median

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from lodex.indexer.decoding import clean
from lodex.indexer.document import Document, HeadingPath, ReadLimits
from lodex.indexer.errors import ReadError

# Bump whenever the text read from some file would change (layout rules, thresholds, cleaning, pdfium's own text).
PDF_READER_VERSION = "1"

# pdfium is not thread-safe: one call into it at a time, whichever thread reads.
_PDFIUM = threading.Lock()

# Layout thresholds, in units of the page's median line height (the height of pdfium's loose character boxes, about
# 1.1 em): a free vertical band at least this wide between text on both sides is a column gap (CSS's default column
# gap is 1 em, a word space about 0.25 em) ...
COLUMN_GAP = 0.6
# ... words whose middles lie closer than this share a line ...
SAME_LINE = 0.35
# ... and words closer than this (overlapping by less than OVERLAP) are one word that pdfium cut in two ...
TOUCHING = 0.08
OVERLAP = 0.2
# ... a blank band this high between two lines starts a paragraph; one this high under the first line(s) or above the
# last line(s) of a page sets them apart as a possible running header or footer.
PARAGRAPH_GAP = 0.5
RUNNING_GAP = 0.5
RUNNING_LINES = 2  # header or footer lines looked at, at most, at each end of a page
# A column block needs this many lines, and a column of at least this many lines this many words per line on average
# (a table of short cells is read row by row, as its rows are what belong together).
BLOCK_ROWS = 3
COLUMN_WORDS = 3.0
# A header or footer line is dropped when it recurs (digits aside) on at least this share of the pages, and on at
# least RUNNING_MIN_PAGES of them (less than half, so that a book's alternating left and right page headers go too).
RUNNING_SHARE = 0.4
RUNNING_MIN_PAGES = 3
# A page is read in pdfium's own order when this share of its letters are of a right-to-left script.
_RTL = re.compile(r"[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefc]")
RTL_SHARE = 0.2

# pdfium replaces a hyphen that ends a line by U+FFFE (U+0002 in older builds) and runs the two lines together.
_MARKERS = "\ufffe\x02"
_SOFT_HYPHENS = _MARKERS + "\u00ad"
_HYPHENS = "-\u2010" + _SOFT_HYPHENS
_TOKEN = re.compile(rf"[^\s{_MARKERS}]+[{_MARKERS}]?|[{_MARKERS}]")
_DIGITS = re.compile(r"\d+")
# Stands, until the whole text is read, where a word was broken by a hyphen at a line end (a noncharacter: never in
# text a PDF gives, and removed from it in case).
BROKEN = "\ufdd0"
_BROKEN_WORD = re.compile(rf"(\w+){BROKEN}(\w+)")
_WORD = re.compile(r"\w+(?:[-\u2010]\w+)*")  # a word, hyphenated or not
_LIGATURES = str.maketrans({"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl",
                            "\ufb05": "st", "\ufb06": "st"})

# A stream: its dictionary ends just before the keyword. Images and attached files are not inflated to read text;
# every other stream that zlib can inflate is checked against limits.max_inflated_bytes, a piece at a time.
_STREAM = re.compile(rb">>\s*stream\r?\n")
_NOT_INFLATED = re.compile(rb"/Subtype\s*/Image\b|/Type\s*/EmbeddedFile\b")
_PIECE = 1 << 20

# The outline (bookmarks) gives the sections: at most this many bookmarks, this deep; a heading is looked for in its
# page's text by its first words.
MAX_BOOKMARKS = 10_000
MAX_OUTLINE_DEPTH = 16
HEADING_WORDS = 12

# Metadata titles that name no document: producers' placeholders, and file names or paths.
_PLACEHOLDER_TITLES = frozenset({"untitled", "untitled document", "no title", "title", "document", "none", "unknown",
                                 "null", "default", "microsoft word", "presentation", "powerpoint presentation",
                                 "slide 1", "blank", "new document", "print", "about:blank"})
_APP_PREFIX = re.compile(r"^(?:microsoft\s+)?(?:word|excel|powerpoint|outlook)\s+-\s+", re.IGNORECASE)
_FILE_NAME = re.compile(r"^\S*\.(?:pdf|docx?|odt|rtf|txt|html?|xhtml|tex|dvi|e?ps|indd|pptx?|xlsx?|md|png|jpe?g|tiff?)$"
                        r"|^(?:[a-z][a-z0-9+.-]*://|file:|about:|[a-z]:[\\/]|[\\/~])\S*$"  # a URL or an absolute path
                        r"|^\S*[\\/]\S*[\\/]\S*$", re.IGNORECASE)  # a relative path (two separators)
MAX_TITLE_CHARS = 300


@dataclass(slots=True)
class _Word:
    """A run of non-space characters and its box (PDF units, y upwards)."""

    text: str
    x0: float
    x1: float
    y0: float
    y1: float

    @property
    def middle(self) -> float:
        return (self.y0 + self.y1) / 2


@dataclass
class _Row:
    """Words sharing a line across the whole page (several columns' lines when they are level), left to right."""

    words: list[_Word]
    x0: float = field(init=False)
    x1: float = field(init=False)
    y0: float = field(init=False)
    y1: float = field(init=False)

    def __post_init__(self) -> None:
        self.words.sort(key=lambda w: w.x0)
        self.x0, self.x1 = self.words[0].x0, max(w.x1 for w in self.words)
        self.y0, self.y1 = min(w.y0 for w in self.words), max(w.y1 for w in self.words)


@dataclass(frozen=True)
class _Line:
    """One line of a page's body in reading order; `paragraph`: a blank band lies above it."""

    text: str
    paragraph: bool


@dataclass(frozen=True)
class _Page:
    """A page's text before running headers and footers are known: its first and last lines set apart (candidates),
    and its body in reading order."""

    head: list[str]
    body: str
    tail: list[str]


def read_pdf(data: bytes, limits: ReadLimits) -> Document:
    """The text layer of a PDF page by page, in reading order, with where each page starts and the metadata title."""
    _check_inflation(data, limits.max_inflated_bytes)
    with _PDFIUM:
        pdf = _open(data)
        try:
            title = real_title(_metadata_title(pdf))
            outline = _outline(pdf)
            pages = _read_pages(pdf, limits)
        finally:
            pdf.close()
    return _document(pages, title, outline, limits)


def _check_inflation(data: bytes, limit: int) -> None:
    """ReadError when a zlib stream that reading text inflates (page contents, forms, fonts, object streams; not
    images nor attachments) would inflate past `limit` bytes: a decompression bomb, refused before pdfium holds it
    whole. Streams are found by their keyword and inflated a piece at a time, their output counted, not kept."""
    for match in _STREAM.finditer(data):
        head = data[max(0, match.start() - 2048):match.start()]
        if _NOT_INFLATED.search(head, head.rfind(b"obj") + 1):  # its dictionary (or the 2 kB before the keyword)
            continue
        if _inflated_size(memoryview(data)[match.end():], limit) > limit:
            raise ReadError(f"a compressed stream inflates past the limit of {limit / 1e6:,.1f} MB "
                            "(max_inflated_bytes)", "a decompression bomb, or raise the limit")


def _inflated_size(stream: memoryview, limit: int) -> int:
    """How many bytes the zlib data `stream` starts with inflates to, counted up to just past `limit` (fed in pieces
    that grow from 16 KB, as most streams are small and what follows one is copied aside when it ends)."""
    inflater = zlib.decompressobj()
    size, at, piece = 0, 0, 1 << 14
    while at < len(stream) and not inflater.eof and size <= limit:
        pending: bytes | memoryview = stream[at:at + piece]
        at, piece = at + piece, min(piece * 2, _PIECE)
        try:
            while pending and size <= limit and not inflater.eof:
                size += len(inflater.decompress(pending, _PIECE))
                pending = inflater.unconsumed_tail
        except zlib.error:
            break
    return size


def _open(data: bytes) -> pdfium.PdfDocument:
    """The parsed document; ReadError when it is encrypted or cannot be parsed."""
    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        if exc.err_code == pdfium_c.FPDF_ERR_PASSWORD:
            raise ReadError("encrypted (password-protected PDF)", "index an unprotected copy") from exc
        if exc.err_code == pdfium_c.FPDF_ERR_SECURITY:
            raise ReadError("encrypted (unsupported security handler)", "index an unprotected copy") from exc
        raise ReadError(f"unreadable PDF: {str(exc).rstrip('.')}", "the file is corrupt or truncated") from exc


def _metadata_title(pdf: pdfium.PdfDocument) -> str:
    try:
        return str(pdf.get_metadata_value("Title") or "")
    except (pdfium.PdfiumError, UnicodeDecodeError):
        return ""


def _outline(pdf: pdfium.PdfDocument) -> list[tuple[int, int, str]]:
    """The document outline (bookmarks), in order: (page index, level from 1, title) of each bookmark that leads to
    a page of the document; as much of it as can be read."""
    marks: list[tuple[int, int, str]] = []
    try:
        for mark in pdf.get_toc(max_depth=MAX_OUTLINE_DEPTH):
            index = _bookmark_page(pdf, mark)
            title = " ".join(clean(mark.get_title() or "").split())
            if title and index is not None and 0 <= index < len(pdf):
                marks.append((index, mark.level + 1, title))
            if len(marks) >= MAX_BOOKMARKS:
                break
    except (pdfium.PdfiumError, UnicodeDecodeError, ValueError):
        pass
    return marks


def _bookmark_page(pdf: pdfium.PdfDocument, mark: pdfium.PdfBookmark) -> int | None:
    """The index of the page a bookmark leads to, through its destination or its go-to action."""
    dest = pdfium_c.FPDFBookmark_GetDest(pdf.raw, mark.raw)
    if not dest and (action := pdfium_c.FPDFBookmark_GetAction(mark.raw)):
        dest = pdfium_c.FPDFAction_GetDest(pdf.raw, action)
    index = pdfium_c.FPDFDest_GetDestPageIndex(pdf.raw, dest) if dest else -1
    return index if index >= 0 else None


def real_title(title: str) -> str:
    """`title` (a PDF's metadata title) when it names the document, else "": not a producer's placeholder, a file
    name, a path or a URL."""
    title = " ".join(clean(title).split())
    bare = _APP_PREFIX.sub("", title)
    if (not any(c.isalpha() for c in bare) or len(bare) > MAX_TITLE_CHARS or bare.casefold() in _PLACEHOLDER_TITLES
            or _FILE_NAME.match(bare)):
        return ""
    return title if bare == title else bare


def _read_pages(pdf: pdfium.PdfDocument, limits: ReadLimits) -> list[_Page]:
    """Every page's text, one page loaded at a time; ReadError past limits.max_text_chars (counting what the text
    surely keeps: bodies, less the marks of broken words)."""
    pages: list[_Page] = []
    body_chars = 0
    for index in range(len(pdf)):
        page = _read_page(pdf, index)
        body_chars += len(page.body) - page.body.count(BROKEN)
        if body_chars > limits.max_text_chars:
            raise _too_long(limits)
        pages.append(page)
    return pages


def _too_long(limits: ReadLimits) -> ReadError:
    return ReadError(f"text longer than the limit of {limits.max_text_chars:,} characters (max_text_chars)",
                     "split the PDF or raise the limit")


def _read_page(pdf: pdfium.PdfDocument, index: int) -> _Page:
    """One page's text; its pdfium objects are closed before the next page loads, so memory stays bounded."""
    try:
        page = pdf[index]
    except pdfium.PdfiumError as exc:
        raise ReadError(f"unreadable PDF: page {index + 1}: {str(exc).rstrip('.')}") from exc
    try:
        textpage = page.get_textpage()
        try:
            return _page_text(textpage)
        finally:
            textpage.close()
    except pdfium.PdfiumError as exc:
        raise ReadError(f"unreadable PDF: page {index + 1}: {str(exc).rstrip('.')}") from exc
    finally:
        page.close()


def _page_text(textpage: pdfium.PdfTextPage) -> _Page:
    """A page's lines in reading order from its words' boxes, or in pdfium's order when the boxes cannot say. Text
    running another way than most of the page's (a turned table, a margin stamp) follows the rest, laid out alike."""
    text = textpage.get_text_range()
    groups = _words(textpage, text)
    if groups is None:
        return _stream_page(text)
    if not groups:
        return _Page([], "", [])
    height = median(w.y1 - w.y0 for w in groups[0])
    head, body, tail = _running_candidates(_rows(groups[0], height), height)
    lines = _reading_order(body, height)
    for words in groups[1:]:
        turned_height = median(w.y1 - w.y0 for w in words)
        turned = _reading_order(_rows(words, turned_height), turned_height)
        lines += [_Line(turned[0].text, True), *turned[1:]]
    return _Page([_normal(_row_text(r, height)) for r in head], _normal(_join_lines(lines)),
                 [_normal(_row_text(r, height)) for r in tail])


def _normal(text: str) -> str:
    """Text without invisible characters, pdfium's hyphen marks made hyphens again, ligatures spelt out."""
    return clean(text.replace("\ufffe", "-").replace("\x02", "-")).translate(_LIGATURES)


def _words(textpage: pdfium.PdfTextPage, text: str) -> list[list[_Word]] | None:
    """The page's words with their boxes, in groups by the way their text runs (the largest group first), each group
    turned so that its text runs left to right; None when geometry cannot order them (characters and boxes out of
    step, right-to-left text, boxes without height)."""
    if len(text) != textpage.count_chars() or _is_rtl(text):
        return None
    words: list[_Word] = []
    directions: list[str | None] = []
    for match in _TOKEN.finditer(text):
        if not (token := match.group().replace(BROKEN, "")):
            continue
        first = textpage.get_charbox(match.start(), loose=True)
        last = textpage.get_charbox(match.end() - 1, loose=True) if match.end() - match.start() > 1 else first
        words.append(_Word(token, min(first[0], last[0]), max(first[2], last[2]), min(first[1], last[1]),
                           max(first[3], last[3])))
        directions.append(_direction(first, last) if last is not first else None)
    groups: dict[str, list[_Word]] = {}
    for word, direction in zip(words, _filled(words, directions)):
        groups.setdefault(direction, []).append(word)
    ordered = sorted(groups.items(), key=lambda item: -len(item[1]))  # stable: a tie keeps the first met first
    if ordered and median(w.y1 - w.y0 for w in ordered[0][1]) <= 0:
        return None
    return [words if direction == "right" else [_turn(w, direction) for w in words] for direction, words in ordered]


def _filled(words: list[_Word], directions: list[str | None]) -> list[str]:
    """Each one-character word's direction taken from the nearer (on the page) of the words before and after it in
    pdfium's order that have one."""
    known = [i for i, d in enumerate(directions) if d is not None]
    if not known:
        return ["right"] * len(words)
    out: list[str] = []
    at = 0  # index into `known` of the first known word at or after i
    for i, direction in enumerate(directions):
        while at < len(known) and known[at] < i:
            at += 1
        if direction is not None:
            out.append(direction)
            continue
        near = [known[k] for k in (at - 1, at) if 0 <= k < len(known)]
        nearest = min(near, key=lambda j: _distance(words[i], words[j]))
        out.append(directions[nearest] or "right")
    return out


def _distance(a: _Word, b: _Word) -> float:
    """How far apart two words' boxes are (0 when they touch or overlap)."""
    return max(a.x0 - b.x1, b.x0 - a.x1, 0) + max(a.y0 - b.y1, b.y0 - a.y1, 0)


def _is_rtl(text: str) -> bool:
    letters = sum(c.isalpha() for c in text)
    return bool(letters) and len(_RTL.findall(text)) > RTL_SHARE * letters


def _direction(first: tuple[float, ...], last: tuple[float, ...]) -> str:
    """Which way a word runs on the page, from its first character to its last: right, left, up or down."""
    dx = (last[0] + last[2] - first[0] - first[2]) / 2
    dy = (last[1] + last[3] - first[1] - first[3]) / 2
    if abs(dx) >= abs(dy):
        return "right" if dx >= 0 else "left"
    return "up" if dy > 0 else "down"


def _turn(word: _Word, direction: str) -> _Word:
    """A word's box in the frame where its text, running `direction` on the page, runs right (lines going down)."""
    if direction == "down":  # turned clockwise: lines go left
        return _Word(word.text, -word.y1, -word.y0, word.x0, word.x1)
    if direction == "up":  # turned counter-clockwise: lines go right
        return _Word(word.text, word.y0, word.y1, -word.x1, -word.x0)
    return _Word(word.text, -word.x1, -word.x0, -word.y1, -word.y0)  # upside down


def _rows(words: list[_Word], height: float) -> list[_Row]:
    """Words grouped into rows, top to bottom: a word joins the row whose first (highest) word's middle is close."""
    rows: list[_Row] = []
    current: list[_Word] = []
    anchor = 0.0
    for word in sorted(words, key=lambda w: (-w.middle, w.x0)):
        if current and anchor - word.middle > SAME_LINE * height:
            rows.append(_Row(current))
            current = []
        if not current:
            anchor = word.middle
        current.append(word)
    if current:
        rows.append(_Row(current))
    return rows


def _running_candidates(rows: list[_Row], height: float) -> tuple[list[_Row], list[_Row], list[_Row]]:
    """(head, body, tail): the first and last line(s) of a page when a blank band sets them apart from the rest."""
    head = _set_apart(rows, height)
    rest = rows[len(head):]
    tail = _set_apart(rest[::-1], height)[::-1]
    return head, rest[:len(rest) - len(tail)], tail


def _set_apart(rows: list[_Row], height: float) -> list[_Row]:
    """The leading rows (at most RUNNING_LINES) followed by a gap of RUNNING_GAP, with rows left after them."""
    for count in range(1, min(RUNNING_LINES, len(rows) - 1) + 1):
        if _gap(rows[count - 1], rows[count]) > RUNNING_GAP * height:
            return rows[:count]
    return []


def _gap(a: _Row, b: _Row) -> float:
    """The blank band between two rows, whichever is above."""
    return max(a.y0 - b.y1, b.y0 - a.y1)


def _row_text(row: _Row, height: float) -> str:
    """A row's words joined by spaces, except where one word touches the next (pdfium cut it: rotated text) or ends
    in a soft hyphen or pdfium's line-end hyphen (then the hyphen goes)."""
    out: list[str] = []
    previous: _Word | None = None
    for word in row.words:
        if previous is not None and out[-1][-1] in _SOFT_HYPHENS and word.text[0].isalpha():
            out[-1] = out[-1][:-1] + word.text
        elif previous is not None and -OVERLAP * height <= word.x0 - previous.x1 < TOUCHING * height:
            out[-1] += word.text
        else:
            out.append(word.text)
        previous = word
    return " ".join(out)


def _reading_order(rows: list[_Row], height: float) -> list[_Line]:
    """The body's lines in reading order: blocks of rows top to bottom, a block with column gaps column by column."""
    lines: list[_Line] = []
    above: _Row | None = None  # the lowest row of the block above
    for block, gutters in _blocks(rows, height):
        for number, column in enumerate(_columns(block, gutters) if gutters else [block]):
            previous = above if number == 0 else None  # a column goes on from the foot of the one before it
            for row in column:
                paragraph = previous is not None and _gap(previous, row) > PARAGRAPH_GAP * height
                lines.append(_Line(_row_text(row, height), paragraph))
                previous = row
        above = min(block, key=lambda r: r.y0)
    return lines


def _blocks(rows: list[_Row], height: float) -> Iterator[tuple[list[_Row], list[tuple[float, float]]]]:
    """Runs of consecutive rows sharing free vertical bands (column gaps), each with its gaps ([] for rows read
    whole: a single column, or a run too short or too table-like to be columns)."""
    if not rows:
        return
    page = (min(r.x0 for r in rows), max(r.x1 for r in rows))
    wide = COLUMN_GAP * height
    block, free, extent = [rows[0]], _free(rows[0], page, wide), (rows[0].x0, rows[0].x1)
    for row in rows[1:]:
        grown = (min(extent[0], row.x0), max(extent[1], row.x1))
        shared = [g for g in _intersect(free, _free(row, page, wide)) if g[1] - g[0] >= wide]
        if _inner(shared, grown):
            block.append(row)
            free, extent = shared, grown
            continue
        yield from _trimmed(block, _gutters(block, _inner(free, extent)), height)
        block, free, extent = [row], _free(row, page, wide), (row.x0, row.x1)
    yield from _trimmed(block, _gutters(block, _inner(free, extent)), height)


def _trimmed(block: list[_Row], gutters: list[tuple[float, float]],
             height: float) -> Iterator[tuple[list[_Row], list[tuple[float, float]]]]:
    """A column block less the lines that a blank band across it sets apart at its top or foot, when they are too
    few to be columns of their own (a line whose gap happens to fall in the gutter: "Name ... Page 3"): those are
    read whole, before or after the columns."""
    breaks = [i for i in range(1, len(block)) if _gap(block[i - 1], block[i]) > PARAGRAPH_GAP * height]
    start = breaks[0] if gutters and breaks and breaks[0] < BLOCK_ROWS else 0
    end = breaks[-1] if gutters and breaks and len(block) - breaks[-1] < BLOCK_ROWS else len(block)
    if start >= end:
        yield block, []
        return
    if start:
        yield block[:start], []
    yield block[start:end], _gutters(block[start:end], gutters) if (start, end) != (0, len(block)) else gutters
    if end < len(block):
        yield block[end:], []


def _free(row: _Row, page: tuple[float, float], wide: float) -> list[tuple[float, float]]:
    """The bands across the page's text (`page`: left, right) that none of a row's words covers (gaps narrower than
    `wide` ignored)."""
    bands: list[tuple[float, float]] = []
    edge, right = page
    for word in row.words:
        if word.x0 - edge >= wide:
            bands.append((edge, word.x0))
        edge = max(edge, word.x1)
    if right - edge >= wide:
        bands.append((edge, right))
    return bands


def _intersect(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The overlaps of two sorted lists of disjoint bands."""
    out: list[tuple[float, float]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        low, high = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if low < high:
            out.append((low, high))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def _inner(bands: list[tuple[float, float]], extent: tuple[float, float]) -> list[tuple[float, float]]:
    """The bands with text on both sides within `extent` (left, right)."""
    return [b for b in bands if extent[0] < b[0] and b[1] < extent[1]]


def _gutters(block: list[_Row], gutters: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """A block's column gaps when it reads as columns, else []."""
    if len(block) < BLOCK_ROWS or not gutters:
        return []
    columns = _columns(block, gutters)
    if any(not column for column in columns) or max(len(column) for column in columns) < BLOCK_ROWS:
        return []
    for column in columns:
        if len(column) >= BLOCK_ROWS and sum(len(r.words) for r in column) < COLUMN_WORDS * len(column):
            return []
    return gutters


def _columns(block: list[_Row], gutters: list[tuple[float, float]]) -> list[list[_Row]]:
    """A block's rows cut at its gutters: per column, top to bottom, the part of each row that lies in it."""
    columns: list[list[_Row]] = [[] for _ in range(len(gutters) + 1)]
    for row in block:
        parts: list[list[_Word]] = [[] for _ in columns]
        for word in row.words:
            parts[sum(1 for g in gutters if (word.x0 + word.x1) / 2 > g[0])].append(word)
        for column, part in zip(columns, parts):
            if part:
                column.append(_Row(part))
    return columns


def _join_lines(lines: list[_Line]) -> str:
    """Lines joined by newlines (a blank line before a paragraph), and a word broken after a hyphen at a line end
    made one again (see _line_break)."""
    parts: list[str] = []
    for line in lines:
        if not parts:
            parts.append(line.text)
        elif line.paragraph:
            parts += ["\n\n", line.text]
        else:
            between = _line_break(parts[-1], line.text)
            if between != "\n":
                parts[-1] = parts[-1][:-1]
            parts += [between, line.text]
    return "".join(parts)


def _line_break(line: str, following: str) -> str:
    """What stands between `line` and the `following` line: a newline, or, when a hyphen ends `line` right after a
    word character and a word character starts `following`, what replaces that hyphen: nothing (a soft hyphen),
    BROKEN (one word hyphenated: "hyphen-" + "ation", decided once the whole text is known: see _mend), or "-" (a
    compound or a range: "out-of-" + "date", "out-" + "of-date", "Anglo-" + "Saxon", "10-" + "12")."""
    if len(line) < 2 or line[-1] not in _HYPHENS or not line[-2].isalnum() or not following[:1].isalnum():
        return "\n"
    if line[-1] == "\u00ad":
        return ""
    compound = line.rsplit(None, 1)[-1][:-1] + following.split(None, 1)[0]
    if following[0].islower() and line[-2].isalpha() and not any(c in _HYPHENS for c in compound):
        return BROKEN
    return "-"


def _stream_page(text: str) -> _Page:
    """A page in pdfium's own order, one line per pdfium line (line-end hyphens made line ends again), its first and
    last lines the header and footer candidates."""
    text = re.sub(f"([{_MARKERS}])", "\\1\n", text.replace(BROKEN, ""))
    lines = [" ".join(line.split()) for line in re.split(r"\r\n|\r|\n", text)]
    lines = [line for line in lines if line]
    head, tail = (lines[:1], lines[-1:]) if len(lines) >= 3 else ([], [])
    body = lines[len(head):len(lines) - len(tail)]
    return _Page([_normal(line) for line in head], _normal(_join_lines([_Line(line, False) for line in body])),
                 [_normal(line) for line in tail])


def _signature(line: str) -> str:
    """A header or footer line as compared across pages: digits (page numbers) and case aside."""
    return _DIGITS.sub("#", " ".join(line.split())).casefold()


def _running(pages: list[_Page]) -> set[str]:
    """The signatures of the header and footer lines that recur on enough pages to be running ones."""
    counts: Counter[str] = Counter()
    for page in pages:
        counts.update({_signature(line) for line in page.head + page.tail})
    needed = max(RUNNING_MIN_PAGES, RUNNING_SHARE * len(pages))
    return {signature for signature, count in counts.items() if count >= needed}


def _compounds(pages: list[_Page]) -> Counter[str]:
    """How often the text writes each word that a line end broke, joined ("hyphenation") and hyphenated
    ("two-dimensional"), outside line ends: the evidence _mend weighs."""
    wanted: set[str] = set()
    for page in pages:
        for match in _BROKEN_WORD.finditer(page.body):
            wanted |= {(match[1] + match[2]).casefold(), f"{match[1]}-{match[2]}".casefold()}
    counts: Counter[str] = Counter()
    if wanted:
        for page in pages:
            found = (m[0].replace("\u2010", "-").casefold() for m in _WORD.finditer(page.body))
            counts.update(word for word in found if word in wanted)
    return counts


def _mend(text: str, compounds: Counter[str]) -> str:
    """Each word a line end broke made one ("hyphen-" + "ation"), unless the text writes it with its hyphen more
    often than without ("two-" + "dimensional")."""
    def mend(match: re.Match[str]) -> str:
        joined, hyphenated = match[1] + match[2], f"{match[1]}-{match[2]}"
        return hyphenated if compounds[hyphenated.casefold()] > compounds[joined.casefold()] else joined

    return _BROKEN_WORD.sub(mend, text) if BROKEN in text else text


def _finish(page: _Page, running: set[str], compounds: Counter[str]) -> str:
    """A page's final text: the body between the header and footer lines that are not running ones."""
    head = [line for line in page.head if _signature(line) not in running]
    tail = [line for line in page.tail if _signature(line) not in running]
    text = _mend("\n".join(part for part in (*head, page.body, *tail) if part), compounds)
    return text.replace(BROKEN, "").strip()


def _sections(outline: list[tuple[int, int, str]], texts: list[str], starts: list[int]) -> list[tuple[int, str]] | None:
    """Where each bookmarked section starts (its heading in its page's text, else the page's start), with its heading
    path, in text order; None without an outline."""
    if not outline:
        return None
    path = HeadingPath()
    sections = [(starts[index] + _heading_at(texts[index], title), path.enter(level, title))
                for index, level, title in outline]
    return sorted(sections, key=lambda section: section[0])  # stable: a chapter stays before a section at its offset


def _heading_at(text: str, title: str) -> int:
    """Where a heading's words first stand in a page's text (any spacing, any case), else 0."""
    words = title.split()[:HEADING_WORDS]
    match = re.search(r"\s+".join(map(re.escape, words)), text, re.IGNORECASE)
    return match.start() if match else 0


def _document(pages: list[_Page], title: str, outline: list[tuple[int, int, str]], limits: ReadLimits) -> Document:
    """The Document: pages' texts joined by blank lines, where each starts; ReadError when no page has text."""
    if not pages:
        raise ReadError("unreadable PDF: it has no pages")
    running, compounds = _running(pages), _compounds(pages)
    texts = [_finish(page, running, compounds) for page in pages]
    starts: list[int] = []
    offset = 0
    for text in texts:
        starts.append(offset)
        offset += len(text) + 2
    if not any(texts):
        raise ReadError("no text layer (scanned PDF)", "run OCR on it (e.g. ocrmypdf) and index the result")
    text = "\n\n".join(texts)
    if len(text) > limits.max_text_chars:
        raise _too_long(limits)
    extras = {"pages": str(len(pages))}
    if empty := sum(1 for t in texts if not t):
        extras["pages_without_text"] = str(empty)
    return Document(text=text, title=title, pages=starts, sections=_sections(outline, texts, starts), extras=extras)
