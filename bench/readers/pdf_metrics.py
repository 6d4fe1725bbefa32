"""What bench/readers/pdf_quality.py measures on a page of extracted text against a reference: running header and footer lines
kept, words out of their line (reading order), column interleaving, and words left split at a line-end hyphen."""

import difflib
import re
from collections import Counter

from bench.readers.pdf_set import words

FOLIO_WORDS = 12
_FOLIO = re.compile(r"^(\d{1,4})\b|\b(\d{1,4})$")
_LINE_END_HYPHEN = re.compile(r"(\w+)(?:[\ufffe\x02]\r?\n?|[\u2010-]\r?\n)([a-z]\w*)")
_RAW_BREAK = re.compile(r"[\ufffe\x02\u2010-]\r?\n|[\ufffe\x02]")


def raw_lines(text: str) -> list[str]:
    return [" ".join(line.split()) for line in re.split(r"\r\n|\n|\r", text) if line.strip()]


def _folio(line: str) -> int | None:
    match = _FOLIO.search(line) if len(line.split()) <= FOLIO_WORDS else None
    return int(match[1] or match[2]) if match else None


def _signature(line: str) -> str:
    return re.sub(r"\d+", "#", line).casefold()


def running_reference(raw_pages: list[str]) -> list[list[str]]:
    """Each page's running header and footer lines by pdfium's own lines (not lodex's geometry): its first or last
    line when that is short and either carries the page's folio (the document's commonest folio - page index offset)
    or reads like the same end's line two pages before or after, digits aside."""
    ends = []
    for text in raw_pages:
        lines = raw_lines(text)
        ends.append([line for line in (lines[:1] + lines[-1:]) if len(line.split()) <= FOLIO_WORDS] if len(lines) > 2 else [])
    offsets = Counter(f - i for i, page in enumerate(ends) for line in page if (f := _folio(line)) is not None)
    offset, count = offsets.most_common(1)[0] if offsets else (None, 0)
    if count < max(5, 0.2 * len(raw_pages)):
        offset = None
    out: list[list[str]] = []
    for i, page in enumerate(ends):
        found = []
        for end, line in zip(("head", "tail"), page):
            near = [ends[j][0 if end == "head" else -1] for j in (i - 2, i + 2, i - 1, i + 1) if 0 <= j < len(ends) and ends[j]]
            if (offset is not None and _folio(line) == i + offset) or _signature(line) in map(_signature, near):
                found.append(line)
        out.append(found)
    return out


def kept(running: list[str], page_text: str) -> bool:
    """Whether any of a page's running lines is still a line of its extracted text."""
    lines = {" ".join(line.split()) for line in page_text.splitlines()}
    return any(line in lines for line in running)


def moved_words(reference: str, page_text: str) -> tuple[int, int]:
    """(words of the extracted page, how many of them are out of the reference's order): the words outside the
    longest in-order matches of the two texts (words the extraction dropped, as running headers, count for neither)."""
    a, b = words(_RAW_BREAK.sub("", reference)), words(re.sub(r"-\n", "", page_text))
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return len(b), len(b) - sum(block.size for block in matcher.get_matching_blocks())


def line_end_hyphens(raw: str) -> list[tuple[str, str]]:
    """The words pdfium shows broken by a hyphen at a line end: (before, after), the part after in lower case."""
    return [(m[1], m[2]) for m in _LINE_END_HYPHEN.finditer(raw)]


def split_hyphens(breaks: list[tuple[str, str]], page_text: str) -> int:
    """How many of those words the extracted text leaves in two (the hyphen and a space, or a line end, between the
    parts)."""
    return sum(1 for a, b in breaks if re.search(rf"(?<!\w){re.escape(a)}(?:[-\u2010\ufffe\u00ad]\s+|\n\s*){re.escape(b)}(?!\w)", page_text))


def column_switches(columns: list[str], page_text: str) -> int:
    """How often consecutive lines of the extracted page come from different columns (each line goes to the column
    that holds most of its words); columns read one after the other switch once per column boundary."""
    bags = [Counter(words(column)) for column in columns]
    owners = []
    for line in page_text.splitlines():
        votes = [sum(min(n, bag[w]) for w, n in Counter(words(line)).items()) for bag in bags]
        if max(votes, default=0) >= 2:
            owners.append(votes.index(max(votes)))
    return sum(1 for x, y in zip(owners, owners[1:]) if x != y)
