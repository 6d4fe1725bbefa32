"""What preparing a file gives the writer — a Prepared file (or one part of a large one), a Skipped one, a Stream's
running totals — and the helpers that turn chunks into rows and find vectors a changed file can keep."""

import errno
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from lodex.encoders.window import Window
from lodex.indexer.chunking.chunker import Chunk
from lodex.indexer.readers.decoding import OffsetMap
from lodex.indexer.readers.document import page_of, section_of
from lodex.indexer.scanner import FileEntry
from lodex.store.base import DocRecord, Store
from lodex.store.errors import LodexError
from lodex.text.terms import keyword_text

CHANGED = "changed while being read; it is indexed again on its next change or run"
VANISHED = "vanished while being read"


Outcome = Literal["added", "updated", "reused"]  # what a prepared file is to the index (RunSummary counts them)


@dataclass
class Prepared:
    """A file read and chunked (or matched to stored vectors), waiting to be encoded and committed."""

    entry: FileEntry
    doc_id: str
    content_hash: str
    format: str
    title: str
    texts: list[str]
    rows: dict[str, list[Any]]  # chunk columns except id/document_id/content_hash/vector
    vectors: np.ndarray | None  # known when re-used from the store
    outcome: Outcome
    started: float
    attempts: int = 1
    metadata: str = "{}"
    known: dict[int, np.ndarray] = field(default_factory=dict)  # chunk index → vector kept from the previous version
    stream: "Stream | None" = None  # set when the document comes in several parts (a large file)
    final: bool = True  # the last (or only) part: its commit writes the document row
    windows: list[Window] | None = None  # late chunking: the windows its chunks are pooled from (None: each chunk alone)
    encoded: list[int] | None = None  # encoded off the writer (a Ray actor): the chunks that needed the encoder, in `vectors`
    copy_of: DocRecord | None = None  # prepared off the writer: a placeholder for a copy of this stored document's chunks
    whole: str | None = None  # chunking.document_vector "whole": the text encoded for its own vector (None: its chunks' mean)
    whole_tokens: int = 0  # the tokens of `whole`
    doc_vector: np.ndarray | None = None  # its own vector once encoded (or copied with stored content); None: its chunks' mean
    written: "Written | None" = None  # its chunk rows written as fragments off the writer (index.ray_writes "fragments")

    def to_encode(self) -> list[int]:
        """Indexes of the chunks that need the encoder (or needed it, when encoded off the writer)."""
        if self.encoded is not None:
            return self.encoded
        return [] if self.vectors is not None else [i for i in range(len(self.texts)) if i not in self.known]


@dataclass
class Written:
    """A part's chunk rows written off the writer as fragments of the chunks table (a Ray actor's; committed by the
    writer with the part): what the writer needs of them to commit them and write the document row."""

    fragments: list[Any]  # the store's fragment descriptions (`store.fragments.write_chunk_fragments`), shared by the parts
    owners: list[str]  # written in one call: the documents they hold chunks of; the first of the parts to be committed commits them
    chunks: int  # its own chunk rows
    vector_sum: np.ndarray  # the sum of its chunk vectors (a document's vector is their normalized mean)


@dataclass
class Stream:
    """Running totals of a document committed in parts; its row is written with the last part."""

    vector_sum: np.ndarray | None = None
    chunks: int = 0
    tokens: int = 0
    encoded: int = 0


@dataclass
class Skipped:
    """A file that needs no encoding: unchanged content (maybe touched), or a failure."""

    entry: FileEntry
    error: str = ""
    attempts: int = 1


Item = Prepared | Skipped | Iterator[Prepared | Skipped]  # what preparing one file gives
# Late chunking's planner: (clean text, its chunks, title, its token spans or None) → the windows to encode them in
# (None: each chunk alone).
Planner = Callable[[str, list[Chunk], str, np.ndarray | None], list[Window] | None]
# chunking.document_vector "whole": (clean text, its chunks, title, language) → the text a document is encoded whole as for its
# own vector, and its tokens (None: its chunks' mean).
WholePlanner = Callable[[str, list[Chunk], str, str | None], tuple[str, int] | None]


def chunk_rows(
    chunks: list[Chunk], pages: list[int] | None = None, sections: list[tuple[int, str]] | None = None, language: str | None = None
) -> dict[str, list[Any]]:
    """Chunk columns (but ids, owner and vector) as lists, ready for an Arrow table; each chunk's location (the page
    it starts and ends on, the section it starts in) from the document's `pages` and `sections`; its terms for
    keyword search, made here (on the reader thread, while others are encoded) by its document's `language`, with its
    section heading's."""
    return {
        "ordinal": [c.ordinal for c in chunks],
        "char_start": [c.char_start for c in chunks],
        "char_end": [c.char_end for c in chunks],
        "token_count": [c.token_count for c in chunks],
        "text": [c.text for c in chunks],
        "page": [page_of(pages, c.char_start) for c in chunks],
        "page_end": [page_of(pages, max(c.char_end - 1, c.char_start)) for c in chunks],
        "section": [section_of(sections, c.char_start) for c in chunks],
        "language": [language] * len(chunks),
        "keywords": [keyword_text(c.text, language, section_of(sections, c.char_start)) for c in chunks],
    }


def parts_of(item: Item, entry: FileEntry) -> Iterator[Prepared | Skipped]:
    """A prepared file as the parts it is committed in; a failure midway ends it as a Skipped."""
    if isinstance(item, (Prepared, Skipped)):
        yield item
        return
    try:
        yield from item
    except OSError as exc:
        yield Skipped(entry, VANISHED if exc.errno == errno.ENOENT else f"cannot read: {exc.strerror or exc}")
    except LodexError as exc:
        yield Skipped(entry, exc.one_line())
    except Exception as exc:  # a reader bug must not stop the run: record it with the file
        yield Skipped(entry, f"{type(exc).__name__}: {exc}")


def shifted(chunks: list[Chunk], offsets: OffsetMap | None) -> list[Chunk]:
    """Chunks of a cleaned text with their offsets moved back to the source text's."""
    if offsets is None:
        return chunks
    return [Chunk(c.ordinal, offsets.start(c.char_start), offsets.end(c.char_end), c.token_count, c.text) for c in chunks]


class ChunkVectors(Protocol):
    """What finds the stored chunks of a document version: the store, or a worker's read of it (`StoredChunks`)."""

    def chunk_vectors_of(self, doc_id: str, content_hash: str) -> tuple[list[str], np.ndarray]: ...


def unchanged_chunks(store: ChunkVectors, record: DocRecord, texts: list[str]) -> dict[int, np.ndarray]:
    """Vectors of the previous version's chunks whose text an edited file still holds, by new chunk index."""
    old_texts, old_vectors = store.chunk_vectors_of(record.id, record.content_hash)
    if not old_texts:
        return {}
    by_text = dict(zip(old_texts, old_vectors))
    return {i: by_text[t] for i, t in enumerate(texts) if t in by_text}


def stored_vector(store: Store, doc_id: str) -> np.ndarray | None:
    """A stored document's own vector (a copy of its content keeps it, whichever rule made it)."""
    table = store.document_rows([doc_id], ["vector"])
    return np.asarray(table["vector"][0].as_py(), np.float32) if table.num_rows else None
