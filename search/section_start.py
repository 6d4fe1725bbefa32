"""The passage a question that names a section opens with: the section's first chunk (a question asking for "Export
to text files" wants the page the section starts on, not the one its best-matching paragraph happens to be on). A
chunk's section is the one it starts in: the first is the first chunk to start after the title (the title itself
may end the chunk before, on the page before when the title ends a page; measured, that chunk opened the wrong page
more often than the right one)."""

import re
from collections.abc import Callable, Hashable
from typing import TypeVar

import numpy as np
import pyarrow as pa

from lodex.store.fts_terms import keyword_terms

# A heading's numbering: "2.8 ", "C.1 ", "IV ", "1. " before the title's words.
_NUMBERING = re.compile(r"^(?:[A-Z]|[IVX]+|\d+)(?:\.\d+)*\.?\s+(?=\S)")
K = TypeVar("K", bound=Hashable)
WINDOW = 32  # chunks read at a time going back from a passage to its section's start (a section rarely spans more)


def title_terms(section: str | None) -> set[str]:
    """The keyword terms of a heading path's last title, its numbering left out ("2 Options › 2.4 Margins" → margin)."""
    if not section:
        return set()
    return set(keyword_terms(_NUMBERING.sub("", section.rsplit(" › ", 1)[-1])))


def names_section(section: str | None, query_terms: set[str]) -> bool:
    """Whether the query holds every word of the section's title (stop words aside)."""
    terms = title_terms(section)
    return bool(terms) and terms <= query_terms


def section_starts(members: dict[K, np.ndarray], named: dict[K, tuple[int, str]],
                   read: Callable[[np.ndarray], pa.Table]) -> dict[K, int]:
    """For each document whose first passage (chunk id) lies in a section (`named[key]`): the id of that section's
    first chunk, among the document's chunk ids `members[key]` (table order, which is chunk order)."""
    found = {key: section_start(members[key], passage, section, read) for key, (passage, section) in named.items()}
    return {key: start for key, start in found.items() if start is not None}


def section_start(ids: np.ndarray, passage: int, section: str, read: Callable[[np.ndarray], pa.Table]) -> int | None:
    """The first chunk of `section`, walking back from the `passage` chunk through the document's chunk ids `ids`
    WINDOW at a time (`read(ids)`: their ids, ordinals and sections), so that a long document costs a few rows, not
    all of them; where the ids are not in chunk order, from all of them."""
    at = np.flatnonzero(ids == passage)
    if not len(at):
        return None
    start, end = passage, int(at[0]) + 1
    while end > 0:
        begin = max(end - WINDOW, 0)
        table = read(ids[begin:end])
        order = np.argsort(np.asarray(table["ordinal"]), kind="stable")
        ordinals, got = np.asarray(table["ordinal"])[order], np.asarray(table["id"])[order]
        if len(got) != end - begin or np.any(np.diff(ordinals) != 1) or not np.array_equal(got, ids[begin:end]):
            return _first_of(ids, section, read)
        sections = table["section"].take(pa.array(order)).to_pylist()
        for i in range(len(got) - 1, -1, -1):
            if sections[i] != section:
                return start
            start = int(got[i])
        end = begin
    return start


def _first_of(ids: np.ndarray, section: str, read: Callable[[np.ndarray], pa.Table]) -> int | None:
    """The section's first chunk among all of the document's chunks, by ordinal."""
    table = read(ids)
    order = np.argsort(np.asarray(table["ordinal"]), kind="stable")
    mine = np.asarray(table["section"].take(pa.array(order)).to_pylist(), dtype=object) == section
    return int(np.asarray(table["id"])[order][np.argmax(mine)]) if mine.any() else None
