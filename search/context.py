"""A window of a document's extracted text, to read a passage in context: a plain-text file's own text read again
(offsets index it; the caller reads it, indexer/source_text.py), otherwise the text rebuilt from the document's stored
chunks (which overlap, so they cover it)."""

from typing import Any

from lodex.store.base import Store

MAX_WINDOW_CHARS = 20_000


def text_window(store: Store, row: dict[str, Any], own: str | None, start: int, end: int) -> tuple[str, int, int]:
    """(text, start, end) of document `row` between offsets `start` and `end` (clamped to what exists, at most
    MAX_WINDOW_CHARS): from `own`, the document's own text when its file still holds it, else from its stored chunks."""
    end = min(end, start + MAX_WINDOW_CHARS)
    if own is not None:
        start, end = max(0, min(start, len(own))), max(0, min(end, len(own)))
        return own[start:end], start, end
    chunks = store.chunks_of(row["id"], row["content_hash"], ["char_start", "char_end", "text"]).sort_by("char_start").to_pylist()
    if not chunks:
        return "", 0, 0
    last = max(c["char_end"] for c in chunks)
    start, end = max(0, min(start, last)), max(0, min(end, last))
    window = [" "] * (end - start)
    for chunk in chunks:
        if chunk["char_end"] <= start or chunk["char_start"] >= end:
            continue
        for offset, char in enumerate(chunk["text"][: chunk["char_end"] - chunk["char_start"]], start=chunk["char_start"]):
            if start <= offset < end:
                window[offset - start] = char
    return "".join(window), start, end
