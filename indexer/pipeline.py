"""The indexing run: reconcile a folder with the store, encode what is new or changed, commit in order."""

import hashlib
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from indexer.chunker import Chunker
from indexer.encoder import Encoder
from indexer.readers import extract, format_of
from indexer.scanner import FileEntry, ScanRules, scan
from store.errors import LodexError, ReadError
from store.lance_store import DocRecord, Store
from store.schema import chunks_schema

_CHUNK_COPY_COLUMNS = ["ordinal", "char_start", "char_end", "token_count", "text", "vector"]


@dataclass
class Progress:
    """Where a run stands; handed to the progress callback after every commit."""

    files_total: int
    files_done: int = 0
    chunks: int = 0
    tokens: int = 0
    started: float = field(default_factory=time.monotonic)
    path: str = ""

    @property
    def tokens_per_s(self) -> float:
        """Encoded tokens per second since the run started."""
        return self.tokens / max(time.monotonic() - self.started, 1e-9)


@dataclass
class RunSummary:
    """What one run did, file by file counted by outcome."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    reused: int = 0
    deleted: int = 0
    failed: int = 0
    chunks: int = 0
    tokens: int = 0
    seconds: float = 0.0
    failures: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON output and run records."""
        return asdict(self)


@dataclass
class _Prepared:
    """A file read and chunked (or matched to stored vectors), waiting to be encoded and committed."""

    entry: FileEntry
    doc_id: str
    content_hash: str
    format: str
    title: str
    texts: list[str]
    rows: dict[str, list]  # chunk columns except id/document_id/content_hash/vector
    vectors: np.ndarray | None  # known when re-used from the store
    outcome: str  # "added" | "updated" | "reused"


def document_id(path: str) -> str:
    """Stable id of the document at a root-relative path."""
    return hashlib.blake2b(path.encode(), digest_size=8).hexdigest()


def content_hash(data: bytes) -> str:
    """Hash of a file's bytes: what decides whether it must be encoded again."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _new_ids(n: int) -> np.ndarray:
    return np.frombuffer(os.urandom(8 * n), dtype=np.uint64).astype(np.int64) & np.int64(0x7FFF_FFFF_FFFF_FFFF)


class Indexer:
    """Brings the store in line with a folder; the only writer of the store while it runs."""

    def __init__(self, store: Store, encoder: Encoder, chunker: Chunker, rules: ScanRules, flush_tokens: int = 32_768) -> None:
        self.store = store
        self.encoder = encoder
        self.chunker = chunker
        self.rules = rules
        self.flush_tokens = flush_tokens

    def run(self, root: Path, progress: Callable[[Progress], None] | None = None) -> RunSummary:
        """Index new and changed files under `root`, drop deleted ones, and re-use vectors of moved ones."""
        started = time.monotonic()
        summary = RunSummary()
        self.store.collect_garbage()  # leftovers of an interrupted run
        self.store.track_index()
        entries, refused = scan(root, self.rules)
        known = self.store.document_records()
        summary.failures.update(refused)
        todo = [e for e in entries if not _unchanged(known.get(e.path), e)]
        summary.unchanged = len(entries) - len(todo)
        state = Progress(files_total=len(todo))
        by_content = {(r.content_hash, r.format): r for r in known.values()}
        self._process(todo, known, by_content, summary, state, progress)
        scanned = {e.path for e in entries}
        gone = [r.id for p, r in known.items() if p not in scanned or p in summary.failures]
        summary.deleted = sum(1 for p in known if p not in scanned and p not in summary.failures)
        self.store.commit(None, [], gone)
        self.store.collect_garbage()
        self.store.optimize()
        self.store.persist_index()
        summary.failed = len(summary.failures)
        summary.seconds = round(time.monotonic() - started, 3)
        return summary

    def _process(self, todo: list[FileEntry], known: dict[str, DocRecord], by_content: dict, summary: RunSummary,
                 state: Progress, progress: Callable[[Progress], None] | None) -> None:
        pending: list[_Prepared] = []
        pending_tokens = 0
        touched: list[FileEntry] = []
        for entry, item in self._prepared(todo, known, by_content):
            state.files_done += 1
            state.path = entry.path
            if isinstance(item, str):
                summary.failures[entry.path] = item
            elif item is None:
                summary.unchanged += 1
                touched.append(entry)
            else:
                pending.append(item)
                pending_tokens += sum(item.rows["token_count"]) if item.vectors is None else 0
            if pending and pending_tokens >= self.flush_tokens:
                self._flush(pending, summary, state)
                pending, pending_tokens = [], 0
            if progress:
                progress(state)
        if pending:
            self._flush(pending, summary, state)
            if progress:
                progress(state)
        for entry in touched:
            self.store.documents.update(where=f"id = '{document_id(entry.path)}'", values={"size": entry.size, "mtime": entry.mtime})

    def _prepared(self, todo: list[FileEntry], known: dict[str, DocRecord], by_content: dict) -> Iterator[tuple[FileEntry, Any]]:
        """Read and chunk files on a worker thread, so that parsing overlaps encoding."""
        out: queue.Queue = queue.Queue(maxsize=16)
        stop = threading.Event()

        def work() -> None:
            for entry in todo:
                if stop.is_set():
                    return
                try:
                    item: Any = self._prepare(entry, known.get(entry.path), by_content)
                except ReadError as exc:
                    item = exc.message
                except OSError as exc:
                    item = f"cannot read: {exc.strerror or exc}"
                except LodexError as exc:
                    item = exc.one_line()
                except Exception as exc:  # a reader bug must not stop the run: record it with the file
                    item = f"{type(exc).__name__}: {exc}"
                out.put((entry, item))
            out.put(None)

        worker = threading.Thread(target=work, name="lodex-reader", daemon=True)
        worker.start()
        try:
            while (got := out.get()) is not None:
                yield got
        finally:
            stop.set()
            while worker.is_alive():
                try:
                    out.get(timeout=0.1)
                except queue.Empty:
                    pass

    def _prepare(self, entry: FileEntry, record: DocRecord | None, by_content: dict) -> "_Prepared | None":
        data = entry.abspath.read_bytes()
        if len(data) > self.rules.max_file_bytes:
            raise ReadError(f"too large ({len(data) / 1e6:.1f} MB)")
        digest = content_hash(data)
        fmt = format_of(entry.path) or "text"
        if record is not None and record.content_hash == digest:
            return None  # touched, not changed: the caller records the new size and mtime
        outcome = "updated" if record is not None else "added"
        source = by_content.get((digest, fmt))
        if source is not None:
            return self._reuse(entry, digest, source, outcome)
        doc = extract(entry.path, data)
        chunks = self.chunker.chunk(doc.text)
        rows = {
            "ordinal": [c.ordinal for c in chunks],
            "char_start": [c.char_start for c in chunks],
            "char_end": [c.char_end for c in chunks],
            "token_count": [c.token_count for c in chunks],
            "text": [c.text for c in chunks],
        }
        return _Prepared(entry, document_id(entry.path), digest, doc.format, doc.title, rows["text"], rows, None, outcome)

    def _reuse(self, entry: FileEntry, digest: str, source: DocRecord, outcome: str) -> _Prepared:
        """Copy the chunks and vectors of stored identical content (a rename, move or copy)."""
        table = self.store.chunks_where(
            f"document_id = '{source.id}' AND content_hash = '{source.content_hash}'", _CHUNK_COPY_COLUMNS
        ).sort_by("ordinal")
        rows = {c: table[c].to_pylist() for c in _CHUNK_COPY_COLUMNS if c != "vector"}
        vectors = np.stack(table["vector"].to_numpy(zero_copy_only=False)).astype(np.float32) if table.num_rows else np.zeros((0, self.store.dim), np.float32)
        return _Prepared(entry, document_id(entry.path), digest, source.format, source.title, rows["text"], rows, vectors, "reused" if outcome == "added" else outcome)

    def _flush(self, pending: list[_Prepared], summary: RunSummary, state: Progress) -> None:
        """Encode the pending files' chunks in one call, then commit chunks and documents."""
        fresh = [p for p in pending if p.vectors is None]
        texts = [t for p in fresh for t in p.texts]
        lengths = [min(n + self.encoder.special_tokens, self.encoder.max_length) for p in fresh for n in p.rows["token_count"]]
        encoded = self.encoder.embed(texts, lengths=lengths)
        offset = 0
        for p in fresh:
            p.vectors = encoded[offset : offset + len(p.texts)]
            offset += len(p.texts)
        chunk_tables, documents = [], []
        stamp = time.time()
        for p in pending:
            n = len(p.texts)
            chunk_tables.append(pa.Table.from_pydict({
                "id": _new_ids(n), "document_id": [p.doc_id] * n, "content_hash": [p.content_hash] * n, **p.rows,
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(p.vectors.reshape(-1), pa.float32()), self.store.dim),
            }, schema=chunks_schema(self.store.dim)))
            mean = p.vectors.mean(axis=0) if n else np.zeros(self.store.dim, np.float32)
            norm = float(np.linalg.norm(mean))
            tokens = int(sum(p.rows["token_count"]))
            documents.append({
                "id": p.doc_id, "path": p.entry.path, "content_hash": p.content_hash, "size": p.entry.size,
                "mtime": p.entry.mtime, "format": p.format, "title": p.title, "chunk_count": n, "token_count": tokens,
                "vector": (mean / norm if norm > 0 else mean).astype(np.float32).tolist(), "indexed_at": stamp,
            })
            setattr(summary, p.outcome, getattr(summary, p.outcome) + 1)
            summary.chunks += n
            if p in fresh:
                summary.tokens += tokens
                state.tokens += tokens
            state.chunks += n
        self.store.commit(pa.concat_tables(chunk_tables), documents, [])


def _unchanged(record: DocRecord | None, entry: FileEntry) -> bool:
    return record is not None and record.size == entry.size and record.mtime == entry.mtime
