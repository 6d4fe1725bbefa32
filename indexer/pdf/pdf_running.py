"""Running headers and footers of a PDF: the first and last lines of pages that recur across pages (digits aside),
that carry the page's own number (its folio), or that repeat a neighbouring page's line whose title changes."""

import re
from collections import Counter
from dataclasses import dataclass, field

from lodex.indexer.pdf.pdf_text import Page

# A header or footer line is dropped when it recurs (digits aside) on at least this share of the pages, and on at
# least RUNNING_MIN_PAGES of them (less than half, so that a book's alternating left and right page headers go too).
RUNNING_SHARE = 0.4
RUNNING_MIN_PAGES = 3
# A folio: a number that starts or ends a short line ("3 INSTALLATION 17", "Chapter 5: Title 12", "12", "iv"). The
# document's folio offset (folio - page index) is the commonest among its candidate lines; it holds when it recurs
# on at least this share of the pages and on FOLIO_MIN_PAGES of them (fewer could be numbered headings that happen to
# match: "1 Introduction" on page 1, "2 Methods" on page 2). Front matter numbered in roman figures has its own offset.
FOLIO_SHARE = 0.2
FOLIO_MIN_PAGES = 5
FOLIO_WORDS = 12
_ARABIC = re.compile(r"^(\d{1,4})\b|\b(\d{1,4})$")
_ROMAN = re.compile(r"^([ivxlc]{1,7})\b|\b([ivxlc]{1,7})$")
_ROMAN_VALUES = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100}
# A candidate line whose signature is that of the same end's line on a page this near (a left page's chapter title
# two pages on) is a running one: a title that changes now and then (each chapter) still repeats on its neighbours.
NEIGHBOURS = (1, 2)
_DIGITS = re.compile(r"\d+")


def signature(line: str) -> str:
    """A header or footer line as compared across pages: digits (page numbers) and case aside."""
    return _DIGITS.sub("#", " ".join(line.split())).casefold()


def _roman(text: str) -> int | None:
    """The value of a lower-case roman numeral, None when `text` is not a well-formed one."""
    values = [_ROMAN_VALUES[c] for c in text]
    total = sum(-v if i + 1 < len(values) and v < values[i + 1] else v for i, v in enumerate(values))
    return total if total > 0 and _to_roman(total) == text else None


def _to_roman(number: int) -> str:
    out = ""
    for value, letters in ((100, "c"), (90, "xc"), (50, "l"), (40, "xl"), (10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i")):
        while number >= value:
            out, number = out + letters, number - value
    return out


def folios(line: str) -> list[tuple[str, int]]:
    """The numbers a short line starts or ends with, as (kind, value): ("arabic", 17), ("roman", 4)."""
    words = line.split()
    if not words or len(words) > FOLIO_WORDS:
        return []
    out = [("arabic", int(m[1] or m[2])) for m in _ARABIC.finditer(line.strip())]
    for match in _ROMAN.finditer(line.strip()):
        if (value := _roman(match[1] or match[2])) is not None:
            out.append(("roman", value))
    return out


@dataclass
class Running:
    """Which of the pages' header and footer candidates are running lines (see the module docstring)."""

    pages: list[Page]
    recurring: set[str] = field(init=False)
    offsets: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        counts: Counter[str] = Counter()
        offsets: Counter[tuple[str, int]] = Counter()
        for index, page in enumerate(self.pages):
            counts.update({signature(line) for line in page.head + page.tail})
            offsets.update({(kind, value - index) for line in page.head + page.tail for kind, value in folios(line)})
        needed = max(RUNNING_MIN_PAGES, RUNNING_SHARE * len(self.pages))
        self.recurring = {s for s, count in counts.items() if count >= needed}
        self.offsets = {}
        for (kind, offset), count in offsets.most_common():
            if kind not in self.offsets and count >= max(FOLIO_MIN_PAGES, FOLIO_SHARE * len(self.pages)):
                self.offsets[kind] = offset

    def is_running(self, index: int, line: str, head: bool) -> bool:
        """Whether `line`, a header (`head`) or footer candidate of page `index`, is a running line."""
        if signature(line) in self.recurring:
            return True
        if any(self.offsets.get(kind) == value - index for kind, value in folios(line)):
            return True
        mark = signature(line)
        for step in NEIGHBOURS:
            for near in (index - step, index + step):
                if 0 <= near < len(self.pages):
                    page = self.pages[near]
                    if any(signature(other) == mark for other in (page.head if head else page.tail)):
                        return True
        return False
