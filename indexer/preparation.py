"""Preparing the files of a run: each one read and chunked, matched to stored vectors (a rename, move or copy, or
the unchanged chunks of an edit), or, when large, read and chunked in parts; on a reader thread, so that parsing
overlaps encoding. What comes out is encoded and committed by `pipeline`."""

import errno
import hashlib
import itertools
import queue
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lodex.indexer.chunking.chunker import Chunk, Chunker, token_spans_of
from lodex.indexer.errors import ReadError
from lodex.indexer.identity import content_hash, document_id
from lodex.indexer.paths import read_limited
from lodex.indexer.prepared import (
    CHANGED,
    VANISHED,
    ChunkVectors,
    Item,
    Outcome,
    Planner,
    Prepared,
    Skipped,
    Stream,
    WholePlanner,
    chunk_rows,
    parts_of,
    shifted,
    stored_vector,
    unchanged_chunks,
)
from lodex.indexer.readers.decoding import OffsetMap
from lodex.indexer.readers.document import ReadLimits
from lodex.indexer.readers.read_budget import ReadPool
from lodex.indexer.readers.readers import Extracted, extract, fallback_title, format_of, reads_in_process
from lodex.indexer.readers.sniffing import sniff_path
from lodex.indexer.scanner import FileEntry, ScanRules
from lodex.indexer.streaming import chunk_stream, file_digest, text_blocks
from lodex.store.base import DocRecord, Store
from lodex.store.errors import LodexError
from lodex.store.schema import LOCATION_COLUMNS, chunks_schema, vectors_of
from lodex.text.languages import detect_text

_CHUNK_COPY_COLUMNS = ["ordinal", "char_start", "char_end", "token_count", "text", "vector", *LOCATION_COLUMNS, "language", "keywords"]
_COPY_BATCH = 4_096  # chunk rows per part when copying a stored document's chunks
_NOTHING = object()
# A streamed file is committed in parts of this many flush_tokens: few, large Lance fragments (each commit
# adds a version whose manifest lists every fragment) at a few MB of memory per part.
STREAM_PART_FLUSHES = 2  # 262,144 tokens a part at the default flush_tokens
# OS errors worth another try: the file vanished, is locked, or its permissions are being changed.
_TRANSIENT = {errno.ENOENT, errno.EACCES, errno.EPERM, errno.EBUSY, errno.EAGAIN, errno.ETXTBSY}


def _lookahead(items: Iterable[Any], empty: Any) -> Iterator[tuple[Any, bool]]:
    """(item, is_last) for each item; a lone (empty, True) when there is none."""
    iterator = iter(items)
    previous = next(iterator, _NOTHING)
    if previous is _NOTHING:
        yield empty, True
        return
    for item in iterator:
        yield previous, False
        previous = item
    yield previous, True


def _batched(chunks: Iterable[Chunk], tokens: int) -> Iterator[list[Chunk]]:
    """Consecutive chunks grouped into lists of about `tokens` tokens."""
    batch, count = [], 0
    for chunk in chunks:
        batch.append(chunk)
        count += chunk.token_count
        if count >= tokens:
            yield batch
            batch, count = [], 0
    if batch:
        yield batch


@dataclass
class Preparer:
    """Prepares the files of one run with the indexer's settings of that moment; `cancel` is the indexer's stop signal."""

    store: Store | None  # None: off the writer's process (a Ray task), where copies and kept vectors are left to the writer
    chunker: Chunker
    rules: ScanRules
    cancel: threading.Event
    flush_tokens: int  # a streamed file comes in parts of STREAM_PART_FLUSHES times this many tokens
    retries: int  # further tries after a transient OS error
    retry_backoff_s: float  # the wait before the first of them, doubled for each next one
    plan: Planner | None = None  # late chunking on: how a document read whole is cut into encoder windows
    pool: ReadPool | None = None  # the budgeted reading processes files read whole go to (None: read here, as tests may)
    language: str | None = None  # every document's language (index.language); None: each detected from its text
    whole_text: WholePlanner | None = None  # chunking.document_vector "whole": which documents get a vector of their own
    stored: ChunkVectors | None = None  # off the writer: where an edited file finds the vectors it keeps (None: the writer finds them)

    def language_of(self, text: str) -> str | None:
        """A document's language: the one set for the index, else detected from its text."""
        return self.language or detect_text(text)

    def prepared(
        self, todo: list[FileEntry], known: dict[str, DocRecord], by_content: dict[tuple[str, str], DocRecord]
    ) -> Iterator[Prepared | Skipped]:
        """Read and chunk files on a worker thread, so that parsing overlaps encoding."""
        out: queue.Queue[Any] = queue.Queue(maxsize=16)
        stop = threading.Event()

        def work() -> None:
            for entry in todo:
                if stop.is_set():
                    return
                item = self.prepare_with_retries(entry, known.get(entry.path), by_content)
                for part in parts_of(item, entry):
                    if stop.is_set():
                        return
                    out.put(part)
            out.put(None)

        worker = threading.Thread(target=work, name="lodex-reader", daemon=True)
        worker.start()
        try:
            while (got := out.get()) is not None:
                yield got
        finally:
            stop.set()
            deadline = time.monotonic() + 2.0
            while worker.is_alive() and (not self.cancel.is_set() or time.monotonic() < deadline):
                try:  # a stopping process does not wait long for a file being parsed (the thread is a daemon)
                    out.get(timeout=0.1)
                except queue.Empty:
                    pass

    def prepare_with_retries(self, entry: FileEntry, record: DocRecord | None, by_content: dict[tuple[str, str], DocRecord]) -> Item:
        """Prepare one file; retry transient OS errors with backoff; turn any failure into a recorded reason."""
        started = time.monotonic()
        for attempt in range(1, self.retries + 2):
            try:
                item = self.prepare(entry, record, by_content, started)
                if isinstance(item, Prepared):
                    item.attempts = attempt
                return item
            except ReadError as exc:
                return Skipped(entry, exc.message, attempt)
            except OSError as exc:
                # a missing file may be mid-save (editors replace files by renaming): worth one retry while its folder
                # is there; a deleted folder's files are not waited for (thousands of them would take hours)
                missing = exc.errno == errno.ENOENT
                if missing and (attempt > 1 or not entry.abspath.parent.is_dir()) or exc.errno not in _TRANSIENT or attempt > self.retries:
                    reason = VANISHED if missing else f"cannot read: {exc.strerror or exc}"
                    return Skipped(entry, reason, attempt)
                if self.cancel.wait(self.retry_backoff_s * 2 ** (attempt - 1)):
                    return Skipped(entry, "not read: the run was stopping", attempt)
            except LodexError as exc:
                return Skipped(entry, exc.one_line(), attempt)
            except Exception as exc:  # a reader bug must not stop the run: record it with the file
                return Skipped(entry, f"{type(exc).__name__}: {exc}", attempt)
        raise AssertionError("unreachable")

    def prepare(self, entry: FileEntry, record: DocRecord | None, by_content: dict[tuple[str, str], DocRecord], started: float) -> Item:
        """One file as a Prepared (read and chunked), as its parts (copied from stored identical content, or
        streamed), or as a Skipped (its content is the stored one); raises what reading it raised."""
        fmt = format_of(entry.path) or "text"
        # a large plain-text file is streamed here, in blocks of bounded size (decoding, cleaning and chunking are linear
        # in them): no parser runs on it, so it needs no reading process (see extract)
        streamed = fmt == "text" and entry.size > self.rules.stream_bytes and sniff_path(entry.abspath) is None
        if not streamed and entry.size > self.rules.max_parsed_bytes:
            raise ReadError(
                f"too large to read whole ({entry.size / 1e6:.1f} MB > index.max_parsed_mb "
                f"{self.rules.max_parsed_bytes / 1e6:.1f} MB); only plain-text files are streamed",
                "raise index.max_parsed_mb, or exclude the file",
            )
        follow = self.rules.follow_symlinks
        data = None if streamed else read_limited(entry.abspath, self.rules.max_parsed_bytes, follow)
        digest = file_digest(entry.abspath, self.rules.max_file_bytes, follow) if data is None else content_hash(data)
        if record is not None and record.content_hash == digest:
            return Skipped(entry)  # touched, not changed: the caller records the new size and mtime
        outcome: Outcome = "updated" if record is not None else "added"
        source = by_content.get((digest, fmt))
        if source is not None:
            return self.reuse(entry, digest, source, outcome, started)
        if data is None:
            return self._streamed(entry, digest, outcome, started)
        doc = self.extract(entry.path, data)
        # tokenized once for chunking and late chunking's windows (the chunker tokenizes as the encoder does); a paged
        # document is chunked a page at a time, so its windows tokenize the whole text again
        spans = token_spans_of(doc.text, self.chunker.tokenize) if self.plan and not doc.pages else None
        clean = self.chunker.chunk_parts(doc.text, doc.pages, spans)
        rows = chunk_rows(shifted(clean, doc.offsets), doc.pages, doc.sections, self.language_of(doc.text))
        prepared = Prepared(
            entry,
            document_id(entry.path),
            digest,
            doc.format,
            doc.title,
            rows["text"],
            rows,
            None,
            outcome,
            started,
            windows=self.plan(doc.text, clean, doc.title, spans) if self.plan else None,
        )
        self.plan_whole(prepared, doc.text, clean)
        stored = self.store if self.store is not None else self.stored
        if record is not None and stored is not None:
            prepared.known = unchanged_chunks(stored, record, rows["text"])
        return prepared

    def plan_whole(self, prepared: Prepared, text: str, chunks: list[Chunk]) -> None:
        """Mark a document read whole whose own vector is its text encoded whole (chunking.document_vector)."""
        language = (prepared.rows.get("language") or [None])[0]
        whole = self.whole_text(text, chunks, prepared.title, language) if self.whole_text else None
        if whole is not None:
            prepared.whole, prepared.whole_tokens = whole

    def extract(self, path: str, data: bytes) -> Extracted:
        """A file's bytes read: in a reading process of the pool, under the per-file budget, unless they are plain
        text (decoded and cleaned in one linear pass over at most index.max_parsed_mb; larger ones are streamed)."""
        limits = ReadLimits(self.rules.max_parsed_bytes, self.rules.max_parsed_bytes)
        if self.pool is None or reads_in_process(path, data):
            return extract(path, data, limits)
        return self.pool.extract(path, data, limits)

    def reuse(self, entry: FileEntry, digest: str, source: DocRecord, outcome: Outcome, started: float) -> Iterator[Prepared]:
        """Copy the chunks and vectors of stored identical content (a rename, move or copy), a batch at a time; off the
        writer (no store), a placeholder naming the copy to make."""
        if self.store is None:
            yield Prepared(entry, document_id(entry.path), digest, source.format, source.title, [], {}, None, outcome, started, copy_of=source)
            return
        batches = self.store.chunk_batches_of(source.id, source.content_hash, _CHUNK_COPY_COLUMNS, _COPY_BATCH)
        schema = chunks_schema(self.store.dim)
        empty = pa.RecordBatch.from_pylist([], schema=pa.schema([schema.field(c) for c in _CHUNK_COPY_COLUMNS]))
        stream = Stream()
        outcome = "reused" if outcome == "added" else outcome
        for batch, last in _lookahead(batches, empty):
            table = pa.Table.from_batches([batch])
            rows = {c: table[c].to_pylist() for c in _CHUNK_COPY_COLUMNS if c != "vector"}
            yield Prepared(
                entry,
                document_id(entry.path),
                digest,
                source.format,
                source.title,
                rows["text"],
                rows,
                vectors_of(table),
                outcome,
                started,
                stream=stream,
                final=last,
                doc_vector=stored_vector(self.store, source.id) if last else None,
            )

    def _streamed(self, entry: FileEntry, digest: str, outcome: Outcome, started: float) -> Iterator[Prepared | Skipped]:
        """A large plain-text file read, chunked and handed on in parts of about flush_tokens tokens."""
        check = hashlib.blake2b(digest_size=16)
        offsets = OffsetMap()
        blocks = text_blocks(entry.abspath, check, offsets, self.rules.max_file_bytes, self.rules.follow_symlinks)
        first = next(blocks, "")
        title = fallback_title(first, entry.path)
        stream = Stream()
        part_tokens = self.flush_tokens * STREAM_PART_FLUSHES
        chunks = chunk_stream(self.chunker, itertools.chain([first], blocks), offsets)
        language = self.language_of(first)
        for batch, last in _lookahead(_batched(chunks, part_tokens), []):
            if last and check.hexdigest() != digest:
                yield Skipped(entry, CHANGED)
                return
            rows = chunk_rows(batch, language=language)
            yield Prepared(
                entry, document_id(entry.path), digest, "text", title, rows["text"], rows, None, outcome, started, stream=stream, final=last
            )
