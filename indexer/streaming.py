"""Large plain-text files: hashed, decoded and chunked block by block, so memory is bounded by the block, not the file."""

import codecs
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lodex.indexer.chunking.chunker import Chunk, Chunker
from lodex.indexer.paths import check_read, open_regular
from lodex.indexer.readers.decoding import OffsetMap, clean_mapped, sniff_encoding

BLOCK_BYTES = 1 << 20  # bytes read at a time
WINDOW_CHARS = 1 << 20  # text chunked at a time
TAIL_CHARS = 1 << 14  # chunks ending this close to a window's end are cut again with the next window


def file_digest(path: Path, limit: int | None = None, follow_symlinks: bool = True) -> str:
    """The same hash as `content_hash(path.read_bytes())`, read a block at a time (a regular file only; ReadError
    past `limit` bytes)."""
    digest = hashlib.blake2b(digest_size=16)
    seen = 0
    with open_regular(path, follow_symlinks) as fh:
        while block := fh.read(BLOCK_BYTES):
            seen += len(block)
            check_read(seen, limit)
            digest.update(block)
    return digest.hexdigest()


def text_blocks(
    path: Path, digest: Any = None, offsets: OffsetMap | None = None, limit: int | None = None, follow_symlinks: bool = True
) -> Iterator[str]:
    """The file's cleaned text, a block at a time (newlines normalized across block edges); `digest`, a hashlib
    object, is fed the raw bytes as they are read; `offsets` learns where cleaning removed characters (offsets in the
    whole clean text). A regular file only; ReadError once more than `limit` bytes were read."""
    with open_regular(path, follow_symlinks) as fh:
        head = fh.read(BLOCK_BYTES)
        seen = len(head)
        if digest is not None:
            digest.update(head)
        name, skip = sniff_encoding(head)
        decoder = codecs.getincrementaldecoder(name)(errors="replace")
        carry = ""
        block = head[skip:]
        produced = 0  # clean characters yielded so far
        while True:
            final = not block
            text = carry + decoder.decode(block, final=final)
            carry = "" if final or not text.endswith("\r") else "\r"  # a CRLF may straddle two blocks
            if carry:
                text = text[:-1]
            if text:
                cleaned = clean_mapped(text, offsets if offsets is not None else OffsetMap(), produced)
                produced += len(cleaned)
                yield cleaned
            if final:
                return
            block = fh.read(BLOCK_BYTES)
            seen += len(block)
            check_read(seen, limit)
            if digest is not None:
                digest.update(block)


def chunk_stream(chunker: Chunker, blocks: Iterator[str], offsets: OffsetMap | None = None) -> Iterator[Chunk]:
    """Chunks of the concatenated blocks with document offsets, cut one window of text at a time: the last
    chunks of a window are dropped and cut again from the next window, so no chunk sees a window's edge; a
    window always moves on by at least its first chunk, so a text that is one huge chunk still ends. With
    `offsets` (filled by text_blocks), offsets index the source text instead of the clean one."""
    buffer, offset, ordinal = "", 0, 0
    pending = True
    while pending:
        try:
            while len(buffer) < WINDOW_CHARS:
                buffer += next(blocks)
        except StopIteration:
            pending = False
        chunks = chunker.chunk(buffer, whole_text=False)  # a window of a long text, its last one included
        keep = chunks if not pending else [c for c in chunks if c.char_end <= len(buffer) - TAIL_CHARS]
        if pending and len(keep) == len(chunks):
            keep = keep[:-1]  # always cut the window's last chunk again
        if pending and not keep and chunks:
            keep = chunks[:1]  # one chunk spans (nearly) the whole window: take it, or the window never moves
        for c in keep:
            start, end = c.char_start + offset, c.char_end + offset
            if offsets is not None:
                start, end = offsets.start(start), offsets.end(end)
            yield Chunk(ordinal, start, end, c.token_count, c.text)
            ordinal += 1
        if pending:
            restart = chunks[len(keep)].char_start if len(keep) < len(chunks) else len(buffer)
            buffer, offset = buffer[restart:], offset + restart
            if offsets is not None:
                offsets.trim(offset)
