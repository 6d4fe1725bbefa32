"""Passages that list where things are rather than say them: tables of contents and indexes (dotted leaders, lines
ending in page numbers), which a query's words match everywhere but which rarely answer it."""

import re

# Dotted leaders: ". . . . " or "......" between an entry and its page number.
_LEADER = re.compile(r"(?:\.\s?){4,}")
# A line that ends in page numbers: "sink 6, 27", "array package 25", "3.1 Options 12", "Index 36".
_ENDS_IN_PAGES = re.compile(r"(?:^|\s)(?:\d{1,4}|[ivxlc]{1,6})(?:[,–-]\s?\d{1,4})*\s*$")
# A passage is a listing with this many leaders, or when this share of its lines, and LISTING_LINES of them at least,
# hold a leader or end in page numbers (a passage may hold a few lines of a listing, cut where a chunk ends).
LISTING_LEADERS = 3
LISTING_SHARE = 0.5
LISTING_LINES = 2


def is_listing(text: str) -> bool:
    """Whether a passage reads as a table of contents or an index (see the module docstring)."""
    if len(_LEADER.findall(text)) >= LISTING_LEADERS:
        return True
    lines = [line for line in text.splitlines() if line.strip()]
    marked = sum(1 for line in lines if _LEADER.search(line) or _ENDS_IN_PAGES.search(line))
    return marked >= LISTING_LINES and marked >= LISTING_SHARE * len(lines)
