"""PDF reader: each page's text layer in reading order (columns, joined hyphenation, no running headers), via pdfium."""

import ctypes
import re
import threading
from collections.abc import Callable
from functools import partial
from statistics import median

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from lodex.indexer.errors import ReadError
from lodex.indexer.pdf.pdf_guard import check_pdf
from lodex.indexer.pdf.pdf_layout import reading_order, row_text, rows, running_candidates, steady
from lodex.indexer.pdf.pdf_running import Running
from lodex.indexer.pdf.pdf_text import BROKEN, MARKERS, Line, Page, finish, hyphen_evidence, join_lines, normal, stream_page
from lodex.indexer.pdf.pdf_words import Word, filled, turn, word_direction
from lodex.indexer.readers.decoding import clean
from lodex.indexer.readers.document import Document, HeadingPath, ReadLimits
from lodex.indexer.readers.vendor_errors import pdfium_open_reason, pdfium_page_reason

# Bump whenever the text read from some file would change (layout rules, thresholds, cleaning, pdfium's own text).
PDF_READER_VERSION = "5"
# pdfium is not thread-safe: one call into it at a time, whichever thread reads.
_PDFIUM = threading.Lock()
# A page is read in pdfium's own order when this share of its letters are of a right-to-left script.
_RTL = re.compile(r"[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefc]")
RTL_SHARE = 0.2
_TOKEN = re.compile(rf"[^\s{MARKERS}]+[{MARKERS}]?|[{MARKERS}]")
# The outline (bookmarks) gives the sections: at most this many bookmarks, this deep; a heading is looked for in its
# page's text by its first words.
MAX_BOOKMARKS = 10_000
MAX_OUTLINE_DEPTH = 16
HEADING_WORDS = 12
# Metadata titles that name no document: producers' placeholders, and file names or paths.
_PLACEHOLDER_TITLES = frozenset(
    {
        "untitled",
        "untitled document",
        "no title",
        "title",
        "document",
        "none",
        "unknown",
        "null",
        "default",
        "microsoft word",
        "presentation",
        "powerpoint presentation",
        "slide 1",
        "blank",
        "new document",
        "print",
        "about:blank",
    }
)
_APP_PREFIX = re.compile(r"^(?:microsoft\s+)?(?:word|excel|powerpoint|outlook)\s+-\s+", re.IGNORECASE)
_FILE_NAME = re.compile(
    r"^\S*\.(?:pdf|docx?|odt|rtf|txt|html?|xhtml|tex|dvi|e?ps|indd|pptx?|xlsx?|md|png|jpe?g|tiff?)$"
    r"|^(?:[a-z][a-z0-9+.-]*://|file:|about:|[a-z]:[\\/]|[\\/~])\S*$"  # a URL or an absolute path
    r"|^\S*[\\/]\S*[\\/]\S*$",
    re.IGNORECASE,
)  # a relative path (two separators)
MAX_TITLE_CHARS = 300


def read_pdf(data: bytes, limits: ReadLimits) -> Document:
    """The text layer of a PDF page by page, in reading order, with where each page starts and the metadata title."""
    check_pdf(data, limits.max_inflated_bytes)
    with _PDFIUM:
        pdf = _open(data)
        try:
            title = real_title(_metadata_title(pdf))
            outline = _outline(pdf)
            pages = _read_pages(pdf, limits)
        finally:
            pdf.close()
    return _document(pages, title, outline, limits)


def _open(data: bytes) -> pdfium.PdfDocument:
    """The parsed document; ReadError when it is encrypted or cannot be parsed."""
    pdfium_c.FPDF_LoadMemDocument64(None, 0, None)  # fails, setting pdfium's last error: none is left from another file
    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        if exc.err_code == pdfium_c.FPDF_ERR_PASSWORD:
            raise ReadError("encrypted (password-protected PDF)", "index an unprotected copy") from exc
        if exc.err_code == pdfium_c.FPDF_ERR_SECURITY:
            raise ReadError("encrypted (unsupported security handler)", "index an unprotected copy") from exc
        raise ReadError(f"unreadable PDF: {pdfium_open_reason(exc.err_code)}", "the file is corrupt or truncated") from exc


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
    if not any(c.isalpha() for c in bare) or len(bare) > MAX_TITLE_CHARS or bare.casefold() in _PLACEHOLDER_TITLES or _FILE_NAME.match(bare):
        return ""
    return title if bare == title else bare


def _read_pages(pdf: pdfium.PdfDocument, limits: ReadLimits) -> list[Page]:
    """Every page's text, one page loaded at a time; ReadError past limits.max_text_chars (counting what the text
    surely keeps: bodies, less the marks of broken words)."""
    pages: list[Page] = []
    body_chars = 0
    for index in range(len(pdf)):
        page = _read_page(pdf, index)
        body_chars += len(page.body) - page.body.count(BROKEN)
        if body_chars > limits.max_text_chars:
            raise _too_long(limits)
        pages.append(page)
    return pages


def _too_long(limits: ReadLimits) -> ReadError:
    return ReadError(f"text longer than the limit of {limits.max_text_chars:,} characters (max_text_chars)", "split the PDF or raise the limit")


def _read_page(pdf: pdfium.PdfDocument, index: int) -> Page:
    """One page's text; its pdfium objects are closed before the next page loads, so memory stays bounded."""
    try:
        page = pdf[index]
    except pdfium.PdfiumError as exc:
        raise ReadError(f"unreadable PDF: {pdfium_page_reason(index + 1, str(exc))}") from exc
    try:
        textpage = page.get_textpage()
        try:
            return _page_text(textpage)
        finally:
            textpage.close()
    except pdfium.PdfiumError as exc:
        raise ReadError(f"unreadable PDF: {pdfium_page_reason(index + 1, str(exc))}") from exc
    finally:
        page.close()


def _page_text(textpage: pdfium.PdfTextPage) -> Page:
    """A page's lines in reading order from its words' boxes, or in pdfium's order when the boxes cannot say. Text
    running another way than most of the page's (a turned table, a margin stamp) follows the rest, laid out alike."""
    text = textpage.get_text_range()
    groups = _words(textpage, text)
    if groups is None:
        return stream_page(text)
    if not groups:
        return Page([], "", [])
    height = median(w.y1 - w.y0 for w in groups[0])
    head, body, tail = running_candidates(rows(groups[0], height), height)
    lines = reading_order(body, height)
    for words in groups[1:]:
        turned_height = median(w.y1 - w.y0 for w in words)
        turned = reading_order(rows(words, turned_height), turned_height)
        lines += [Line(turned[0].text, True), *turned[1:]]
    return Page([normal(row_text(r, height)) for r in head], normal(join_lines(lines)), [normal(row_text(r, height)) for r in tail])


def _words(textpage: pdfium.PdfTextPage, text: str) -> list[list[Word]] | None:
    """The page's words with their boxes, in groups by the way their text runs (the largest group first), each group
    turned so that its text runs left to right; None when geometry cannot order them (characters and boxes out of
    step, right-to-left text, boxes without height)."""
    if len(text) != textpage.count_chars() or _is_rtl(text):
        return None
    words: list[Word] = []
    directions: list[str | None] = []
    origins_x: list[float] = []
    box, x, y = _char_box(textpage), ctypes.c_double(), ctypes.c_double()
    origin, raw = pdfium_c.FPDFText_GetCharOrigin, textpage.raw
    for match in _TOKEN.finditer(text):
        token = match.group()
        if BROKEN in token and not (token := token.replace(BROKEN, "")):
            continue
        start, end = match.span()
        first = box(start)
        if not origin(raw, start, x, y):
            raise pdfium.PdfiumError("Failed to get the character's origin.")
        if end - start > 1:  # the box of the first and last characters (conditionals: ~4% of a read, over min/max)
            last = box(end - 1)
            words.append(
                Word(
                    token,
                    first[0] if first[0] < last[0] else last[0],
                    first[2] if first[2] > last[2] else last[2],
                    first[1] if first[1] < last[1] else last[1],
                    first[3] if first[3] > last[3] else last[3],
                    y.value,
                    len(words),
                )
            )
            directions.append(word_direction(first, last))
        else:
            words.append(Word(token, first[0], first[2], first[1], first[3], y.value, len(words)))
            directions.append(None)
        origins_x.append(x.value)
    groups: dict[str, list[Word]] = {}
    for word, direction in zip(words, filled(words, directions)):
        groups.setdefault(direction, []).append(word)
    ordered = sorted(groups.items(), key=lambda item: -len(item[1]))  # stable: a tie keeps the first met first
    if ordered and median(w.y1 - w.y0 for w in ordered[0][1]) <= 0:
        return None
    if "right" in groups:
        steady(groups["right"])
    return [words if direction == "right" else [turn(w, direction, origins_x[w.order]) for w in words] for direction, words in ordered]


def _char_box(textpage: pdfium.PdfTextPage) -> Callable[[int], tuple[float, float, float, float]]:
    """A character's loose box (left, bottom, right, top), by pdfium's own call into one reused rectangle (unlike
    pypdfium2's get_charbox, nothing allocated per call: that pays for the extra call per word for its baseline)."""
    rect, raw = pdfium_c.FS_RECTF(), textpage.raw

    def box(index: int) -> tuple[float, float, float, float]:
        if not pdfium_c.FPDFText_GetLooseCharBox(raw, index, rect):
            raise pdfium.PdfiumError("Failed to get charbox.")
        return rect.left, rect.bottom, rect.right, rect.top

    return box


def _is_rtl(text: str) -> bool:
    if not _RTL.search(text):  # most pages: no right-to-left letter at all, and no letters to count
        return False
    letters = sum(c.isalpha() for c in text)
    return bool(letters) and len(_RTL.findall(text)) > RTL_SHARE * letters


def _sections(outline: list[tuple[int, int, str]], texts: list[str], starts: list[int]) -> list[tuple[int, str]] | None:
    """Where each bookmarked section starts (its heading in its page's text, else the page's start), with its heading
    path, in text order; None without an outline."""
    if not outline:
        return None
    path = HeadingPath()
    sections = [(starts[index] + _heading_at(texts[index], title), path.enter(level, title)) for index, level, title in outline]
    return sorted(sections, key=lambda section: section[0])  # stable: a chapter stays before a section at its offset


def _heading_at(text: str, title: str) -> int:
    """Where a heading's words first stand in a page's text (any spacing, any case), else 0."""
    words = title.split()[:HEADING_WORDS]
    match = re.search(r"\s+".join(map(re.escape, words)), text, re.IGNORECASE)
    return match.start() if match else 0


def _document(pages: list[Page], title: str, outline: list[tuple[int, int, str]], limits: ReadLimits) -> Document:
    """The Document: pages' texts joined by blank lines, where each starts; ReadError when no page has text."""
    if not pages:
        raise ReadError("unreadable PDF: it has no pages")
    running, compounds = Running(pages), hyphen_evidence(pages)
    texts = [finish(page, partial(running.is_running, i), compounds) for i, page in enumerate(pages)]
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
