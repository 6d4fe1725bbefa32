"""Large plain-text files: hashed, decoded and chunked block by block, so memory is bounded by the block, not the file."""

import codecs
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from indexer.chunker import Chunk, Chunker
from indexer.decoding import clean, sniff_encoding

BLOCK_BYTES = 1 << 20  # bytes read at a time
WINDOW_CHARS = 1 << 20  # text chunked at a time
TAIL_CHARS = 1 << 14  # chunks ending this close to a window's end are cut again with the next window


def file_digest(path: Path) -> str:
    """The same hash as `content_hash(path.read_bytes())`, read a block at a time."""
    digest = hashlib.blake2b(digest_size=16)
    with path.open("rb") as fh:
        while block := fh.read(BLOCK_BYTES):
            digest.update(block)
    return digest.hexdigest()


def text_blocks(path: Path, digest: Any = None) -> Iterator[str]:
    """The file's cleaned text, a block at a time (newlines normalized across block edges); `digest`, a
    hashlib object, is fed the raw bytes as they are read."""
    with path.open("rb") as fh:
        head = fh.read(BLOCK_BYTES)
        if digest is not None:
            digest.update(head)
        name, skip = sniff_encoding(head)
        decoder = codecs.getincrementaldecoder(name)(errors="replace")
        carry = ""
        block = head[skip:]
        while True:
            final = not block
            text = carry + decoder.decode(block, final=final)
            carry = "" if final or not text.endswith("\r") else "\r"  # a CRLF may straddle two blocks
            if carry:
                text = text[:-1]
            if text:
                yield clean(text)
            if final:
                return
            block = fh.read(BLOCK_BYTES)
            if digest is not None:
                digest.update(block)


def chunk_stream(chunker: Chunker, blocks: Iterator[str]) -> Iterator[Chunk]:
    """Chunks of the concatenated blocks with document offsets, cut one window of text at a time: the last
    chunks of a window are dropped and cut again from the next window, so no chunk sees a window's edge."""
    buffer, offset, ordinal = "", 0, 0
    pending = True
    while pending:
        try:
            while len(buffer) < WINDOW_CHARS:
                buffer += next(blocks)
        except StopIteration:
            pending = False
        chunks = chunker.chunk(buffer)
        keep = chunks if not pending else [c for c in chunks if c.char_end <= len(buffer) - TAIL_CHARS]
        if pending and len(keep) == len(chunks):
            keep = keep[:-1]  # always cut the window's last chunk again
        for c in keep:
            yield Chunk(ordinal, c.char_start + offset, c.char_end + offset, c.token_count, c.text)
            ordinal += 1
        if pending:
            restart = chunks[len(keep)].char_start if len(keep) < len(chunks) else len(buffer)
            buffer, offset = buffer[restart:], offset + restart
