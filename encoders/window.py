"""A stretch of a document encoded at once (late chunking): the chunker plans windows, an encoder pools one vector
per chunk from each."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Window:
    """A stretch of a document encoded at once: its text, the chunks pooled from it and their char spans in it."""

    text: str
    chunks: list[int]  # indices of the document's (or part's) chunks
    spans: list[tuple[int, int]]  # each chunk's (start, end) in `text`
    tokens: int  # content tokens, as the chunker counted them
