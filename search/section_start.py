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


def title_terms(section: str | None) -> set[str]:
    """The keyword terms of a heading path's last title, its numbering left out ("2 Options › 2.4 Margins" → margin)."""
    if not section:
        return set()
    return set(keyword_terms(_NUMBERING.sub("", section.rsplit(" › ", 1)[-1])))


def names_section(section: str | None, query_terms: set[str]) -> bool:
    """Whether the query holds every word of the section's title (stop words aside)."""
    terms = title_terms(section)
    return bool(terms) and terms <= query_terms


def section_starts(members: dict[K, np.ndarray], sections: dict[K, str],
                   read: Callable[[np.ndarray], pa.Table]) -> dict[K, int]:
    """For each document whose passage lies in `sections[key]`: the id of that section's first chunk among the
    document's chunk ids `members[key]`, from one read of their ordinals and sections (`read(chunk ids)`)."""
    if not sections:
        return {}
    table = read(np.unique(np.concatenate([members[key] for key in sections])))
    order = np.argsort(np.asarray(table["ordinal"]), kind="stable")
    ids, found = np.asarray(table["id"])[order], np.asarray(table["section"].to_pylist(), dtype=object)[order]
    starts: dict[K, int] = {}
    for key, section in sections.items():
        mine = np.isin(ids, members[key]) & (found == section)
        if mine.any():
            starts[key] = int(ids[np.argmax(mine)])
    return starts
