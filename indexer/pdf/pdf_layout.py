"""PDF page layout: words with their boxes grouped into lines and ordered for reading (columns one after the other,
turned text along its lines, headers and footers set apart)."""

from collections.abc import Iterator
from dataclasses import dataclass, field

from lodex.indexer.pdf.pdf_text import SOFT_HYPHENS, Line
from lodex.indexer.pdf.pdf_words import Word

# Layout thresholds, in units of the page's median line height (the height of pdfium's loose character boxes, about
# 1.1 em): a free vertical band at least this wide between text on both sides is a column gap (CSS's default column
# gap is 1 em, a word space about 0.25 em) ...
COLUMN_GAP = 0.6
# ... words whose middles (or baselines: see rows) lie closer than this share a line ...
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
# (a table of short cells is read row by row, as its rows are what belong together), unless the content stream
# holds the columns one after the other.
BLOCK_ROWS = 3
COLUMN_WORDS = 3.0
# A page's boxes are its glyphs' own (its font gives no descent: see steady) when the median word reaches below its
# baseline by less than this share of the median box height (a real loose box reaches a descent, about 0.2 em) ...
NO_DESCENT = 0.05
# ... and then each word gets a line box from its baseline: up as high as this share of the words' tops reach, down
# as deep as the same share of their bottoms, and at least DESCENDER times the height up.
TALL = 0.9
DESCENDER = 0.3


@dataclass
class _Row:
    """Words sharing a line across the whole page (several columns' lines when they are level), left to right."""

    words: list[Word]
    x0: float = field(init=False)
    x1: float = field(init=False)
    y0: float = field(init=False)
    y1: float = field(init=False)

    def __post_init__(self) -> None:
        self.words.sort(key=lambda w: w.x0)
        self.x0, self.x1 = self.words[0].x0, max(w.x1 for w in self.words)
        self.y0, self.y1 = min(w.y0 for w in self.words), max(w.y1 for w in self.words)


def steady(words: list[Word]) -> None:
    """Where pdfium's loose boxes are the glyphs' own (a font descriptor that gives no descent and an x-height for its
    ascent: pdfium unites descent..ascent with the glyph's box), each word's box from its baseline instead, alike for
    all: up to the page's tall glyphs, down to its descenders. Else the blank band between two lines depends on
    their letters, and lines of plain x-height words read as paragraphs (a line-end hyphen before one is kept)."""
    if len(words) < 2 * BLOCK_ROWS:
        return
    below = sorted(w.base - w.y0 for w in words)
    middle = len(words) // 2
    if below[middle] >= NO_DESCENT * sorted(w.y1 - w.y0 for w in words)[middle]:
        return
    tall = int(TALL * (len(words) - 1))
    up = sorted(w.y1 - w.base for w in words)[tall]
    down = max(below[tall], DESCENDER * up)
    for word in words:
        word.y0, word.y1 = word.base - down, word.base + up


def rows(words: list[Word], height: float) -> list[_Row]:
    """Words grouped into rows, top to bottom: a word joins the row when its box's middle is close to the row's first
    (highest) word's, or its baseline to the lowest baseline of those words. Baselines keep a line whole where the
    boxes' middles vary with the glyphs: a font whose descriptor gives no descent and an x-height for its ascent (as
    pdfTeX writes for TeX Gyre fonts) leaves pdfium's loose boxes the glyphs' own, so "points" or "(no." sits lower
    than the rest of its line. Middles keep a raised footnote mark or superscript (in smaller type) with its line; a
    word that joins by its middle brings its baseline, so after a raised mark the line's own baseline takes in its
    words in other fonts (code in a typewriter face, whose boxes' middles differ)."""
    rows: list[_Row] = []
    current: list[Word] = []
    middle = low = 0.0
    near = SAME_LINE * height
    for word in sorted(words, key=lambda w: (-w.base, w.x0)):
        centre = (word.y0 + word.y1) / 2
        if current and abs(middle - centre) <= near:
            low = min(low, word.base)
        elif current and low - word.base > near:
            rows.append(_Row(current))
            current = []
        if not current:
            middle, low = centre, word.base
        current.append(word)
    if current:
        rows.append(_Row(current))
    return rows


def running_candidates(rows: list[_Row], height: float) -> tuple[list[_Row], list[_Row], list[_Row]]:
    """(head, body, tail): the first and last line(s) of a page when a blank band sets them apart from the rest."""
    head = _set_apart(rows, height)
    rest = rows[len(head) :]
    tail = _set_apart(rest[::-1], height)[::-1]
    return head, rest[: len(rest) - len(tail)], tail


def _set_apart(rows: list[_Row], height: float) -> list[_Row]:
    """The leading rows (at most RUNNING_LINES) followed by a gap of RUNNING_GAP, with rows left after them."""
    for count in range(1, min(RUNNING_LINES, len(rows) - 1) + 1):
        if _gap(rows[count - 1], rows[count]) > RUNNING_GAP * height:
            return rows[:count]
    return []


def _gap(a: _Row, b: _Row) -> float:
    """The blank band between two rows, whichever is above."""
    return max(a.y0 - b.y1, b.y0 - a.y1)


def row_text(row: _Row, height: float) -> str:
    """A row's words joined by spaces, except where one word touches the next (pdfium cut it: rotated text) or ends
    in a soft hyphen or pdfium's line-end hyphen (then the hyphen goes)."""
    out: list[str] = []
    previous: Word | None = None
    for word in row.words:
        if previous is not None and out[-1][-1] in SOFT_HYPHENS and word.text[0].isalpha():
            out[-1] = out[-1][:-1] + word.text
        elif previous is not None and -OVERLAP * height <= word.x0 - previous.x1 < TOUCHING * height:
            out[-1] += word.text
        else:
            out.append(word.text)
        previous = word
    return " ".join(out)


def reading_order(rows: list[_Row], height: float) -> list[Line]:
    """The body's lines in reading order: blocks of rows top to bottom, a block with column gaps column by column."""
    lines: list[Line] = []
    above: _Row | None = None  # the lowest row of the block above
    for block, gutters in _blocks(rows, height):
        for number, column in enumerate(_columns(block, gutters) if gutters else [block]):
            previous = above if number == 0 else None  # a column goes on from the foot of the one before it
            for row in column:
                paragraph = previous is not None and _gap(previous, row) > PARAGRAPH_GAP * height
                lines.append(Line(row_text(row, height), paragraph))
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
        yield from _trimmed(block, _gutters(block, _inner(free, extent)), height, page)
        block, free, extent = [row], _free(row, page, wide), (row.x0, row.x1)
    yield from _trimmed(block, _gutters(block, _inner(free, extent)), height, page)


def _trimmed(
    block: list[_Row], gutters: list[tuple[float, float]], height: float, page: tuple[float, float]
) -> Iterator[tuple[list[_Row], list[tuple[float, float]]]]:
    """A column block less the lines that a blank band across it sets apart at its top or foot, when they are too
    few to be columns of their own (a line whose gap happens to fall in the gutter: "Name ... Page 3"): those are
    read whole, before or after the columns. The columns' gaps are then found again without them (a title across
    the page above seven narrow columns covers the gaps between some), and kept when each column they make holds
    BLOCK_ROWS rows (not a gap that a few lines of code happen to share)."""
    breaks = [i for i in range(1, len(block)) if _gap(block[i - 1], block[i]) > PARAGRAPH_GAP * height]
    start = breaks[0] if gutters and breaks and breaks[0] < BLOCK_ROWS else 0
    end = breaks[-1] if gutters and breaks and len(block) - breaks[-1] < BLOCK_ROWS else len(block)
    if start >= end:
        yield block, []
        return
    if start:
        yield block[:start], []
    rest = block[start:end]
    if (start, end) != (0, len(block)):
        found = _gutters(rest, _shared(rest, page, COLUMN_GAP * height))
        full = bool(found) and all(len(column) >= BLOCK_ROWS for column in _columns(rest, found))
        gutters = found if full else _gutters(rest, gutters)
    yield rest, gutters
    if end < len(block):
        yield block[end:], []


def _shared(rows: list[_Row], page: tuple[float, float], wide: float) -> list[tuple[float, float]]:
    """The free bands (see _free) that all of `rows` share, with their text on both sides."""
    free, extent = _free(rows[0], page, wide), (rows[0].x0, rows[0].x1)
    for row in rows[1:]:
        free = [g for g in _intersect(free, _free(row, page, wide)) if g[1] - g[0] >= wide]
        extent = (min(extent[0], row.x0), max(extent[1], row.x1))
    return _inner(free, extent)


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
            return gutters if _written_by_column(columns) else []
    return gutters


def _written_by_column(columns: list[list[_Row]]) -> bool:
    """Whether the content stream holds the columns one after the other (side-by-side code listings, a multi-column
    list of short entries), which a table written row by row does not: then short lines are still columns."""
    spans = [(min(w.order for r in column for w in r.words), max(w.order for r in column for w in r.words)) for column in columns]
    return all(left[1] < right[0] for left, right in zip(spans, spans[1:]))


def _columns(block: list[_Row], gutters: list[tuple[float, float]]) -> list[list[_Row]]:
    """A block's rows cut at its gutters: per column, top to bottom, the part of each row that lies in it."""
    columns: list[list[_Row]] = [[] for _ in range(len(gutters) + 1)]
    for row in block:
        parts: list[list[Word]] = [[] for _ in columns]
        for word in row.words:
            parts[sum(1 for g in gutters if (word.x0 + word.x1) / 2 > g[0])].append(word)
        for column, part in zip(columns, parts):
            if part:
                column.append(_Row(part))
    return columns
