"""What the rest of lodex asks of its durable record, in its own terms: documents (one row per indexed file or pushed
text), their chunks (each tied to one version of its document: id and content hash), the table versions a reader
sees, the vector index, and the upkeep after writes. `lance_store.LanceStore` keeps it in Lance tables and FAISS;
nothing outside `store/` sees a table, a SQL predicate or an event loop."""

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lodex.store.chunk_owners import ChunkOwners
from lodex.store.fragments import FragmentTarget
from lodex.store.keyword_delta import KeywordDelta
from lodex.store.keyword_scheme import KeywordScheme
from lodex.store.schema import DOCUMENT_COLUMNS, vectors_of
from lodex.store.vector_index import VectorIndex

# Small updates (watch batches, API pushes) save the vector index at most this often (a watching or serving writer:
# watch.save_index_every_s); full runs and a stopping writer always save it. Between saves, readers catch the last
# file up from the chunks table.
PERSIST_EVERY_S = 30.0


@dataclass(frozen=True)
class DocRecord:
    """What the store knows of one indexed file (no vectors)."""

    id: str
    path: str
    content_hash: str
    size: int
    mtime: float
    format: str
    title: str
    chunk_count: int
    token_count: int
    indexed_at: float
    metadata: str = "{}"
    language: str | None = None  # ISO 639-1, detected from its text


class Store(ABC):
    """Documents and their chunks, the vector index over chunk vectors, and their upkeep. Reads see the versions
    of the last `refresh`; writes come from one writer at a time."""

    dim: int  # the length of every vector
    data_dir: Path  # where it keeps its tables and vector index (the local cache of an object store's)
    keyword_scheme: KeywordScheme  # how the keyword index makes terms of text
    persist_every_s: float = PERSIST_EVERY_S  # small updates save the vector index at most this often

    @abstractmethod
    def close(self) -> None:
        """Let go of what it holds (its helper process, handles); a closed store is not used again."""

    # ---- reading -------------------------------------------------------------------------
    @abstractmethod
    def refresh(self) -> tuple[int, int]:
        """See the latest committed versions (written by this or another process): (documents, chunks)."""

    @abstractmethod
    def scan_documents(self, columns: list[str] = DOCUMENT_COLUMNS) -> pa.Table:
        """Every document's metadata (these columns; by default all but the vector)."""

    @abstractmethod
    def document_rows(self, doc_ids: list[str], columns: list[str]) -> pa.Table:
        """These documents' rows (any order; ids not found are left out)."""

    @abstractmethod
    def document_row(self, doc_id: str) -> dict[str, Any] | None:
        """One document's metadata by id, or None (also for a string that cannot be an id)."""

    def document_records(self) -> dict[str, DocRecord]:
        """Every document, keyed by its path."""
        return {row["path"]: DocRecord(**row) for row in self.scan_documents().to_pylist()}

    def counts(self) -> dict[str, int]:
        """Number of documents and of current chunks."""
        docs = self.scan_documents()
        return {"documents": docs.num_rows, "chunks": int(pc.sum(docs["chunk_count"]).as_py() or 0)}

    def language_mix(self) -> dict[str, int]:
        """Documents per language (ISO 639-1; "unknown" for those without one: no letters, or indexed before lodex
        recorded languages), most first."""
        counts = pc.value_counts(self.scan_documents(["language"])["language"].fill_null("unknown")).to_pylist()
        return {c["values"]: c["counts"] for c in sorted(counts, key=lambda c: (-c["counts"], c["values"]))}

    @abstractmethod
    def chunks_of(self, doc_id: str, content_hash: str, columns: list[str]) -> pa.Table:
        """The chunk rows of one document version (any order)."""

    def chunk_vectors_of(self, doc_id: str, content_hash: str) -> tuple[list[str], np.ndarray]:
        """The texts and vectors of one document version's chunks (any order, the same for both)."""
        chunks = self.chunks_of(doc_id, content_hash, ["text", "vector"])
        return chunks["text"].to_pylist(), vectors_of(chunks)

    @abstractmethod
    def chunk_batches_of(self, doc_id: str, content_hash: str, columns: list[str], batch_rows: int) -> Iterator[pa.RecordBatch]:
        """The chunk rows of one document version, streamed in batches of up to `batch_rows` (read as they are
        asked for)."""

    @abstractmethod
    def chunks_of_documents(self, doc_ids: list[str], columns: list[str]) -> pa.Table:
        """Chunk rows (current and not yet collected) of the given documents."""

    @abstractmethod
    def chunks_by_id(self, ids: list[int], columns: list[str]) -> pa.Table:
        """Chunk rows for the given chunk ids (any order)."""

    @abstractmethod
    def chunks_at_rows(self, row_ids: np.ndarray, columns: list[str]) -> pa.Table:
        """Chunk rows by row id of the refreshed version (`ChunkOwners.row_ids`), any order."""

    @abstractmethod
    def chunk_owners(self, version: int | None = None) -> ChunkOwners:
        """Which document version each chunk of this chunks version (default: the current one) belongs to."""

    @abstractmethod
    def chunk_rows_after(self, row_id: int, columns: list[str]) -> pa.Table:
        """These columns and `_rowid` of the chunk rows after this row id (all for -1), at the refreshed version;
        the rows a later version adds all come after those of an earlier one."""

    def chunk_rows_following(self, row_id: int, columns: list[str], at_least: int = 0) -> pa.Table | None:
        """Like `chunk_rows_after` by direct reads of the row ids after this one, in row id order, where new rows are
        numbered on from the last (rows past a wide gap may be missed); None where they are not (by default)."""
        return None

    @abstractmethod
    def chunk_row_ids(self) -> np.ndarray:
        """Every chunk's row id at the refreshed version."""

    @abstractmethod
    def existing_chunk_rows(self, row_ids: np.ndarray) -> np.ndarray:
        """Which of these row ids the refreshed version still has."""

    @abstractmethod
    def chunk_count(self) -> int:
        """Chunk rows at the refreshed version."""

    @abstractmethod
    def pin(self, versions: tuple[int, int]) -> None:
        """Read these (documents, chunks) versions until the next pin or refresh."""

    @abstractmethod
    def detached_vector_index(self, version: int, chunk_ids: np.ndarray) -> VectorIndex:
        """A vector index of this chunks version (`chunk_ids`: its ids) that the store does not keep in step."""

    @abstractmethod
    def vector_index(self, version: int | None = None, chunk_ids: np.ndarray | None = None) -> VectorIndex:
        """The vector index of this chunks version (default: the current one; `chunk_ids`: its chunk ids, when the
        caller has them)."""

    @abstractmethod
    def start_keyword_search(
        self,
        texts: list[str],
        limit: int | list[int],
        version: int | None = None,
        delta: "KeywordDelta | None" = None,
        languages: list[str | None] | None = None,
    ) -> Callable[[], list[tuple[np.ndarray, np.ndarray]]]:
        """Start BM25 over chunk text and return the function that waits for its answer: per text, the row ids
        and scores of its best `limit` chunks at this chunks version (`delta`: its rows the keyword index lacks;
        `languages`: each text's language, for its stems and stop words)."""

    @abstractmethod
    def start_keyword_ceilings(self, texts: list[str], version: int, languages: list[str | None]) -> Callable[[], list[float]]:
        """Start finding each text's keyword ceiling (the most BM25 can score a chunk for it: the sum over its terms
        of the best score of a chunk for that term alone, at this chunks version) and return the function that waits."""

    @abstractmethod
    def text_index_rows(self, version: int) -> tuple[int, int]:
        """(rows the keyword index holds, chunk rows it does not) at this chunks version."""

    @abstractmethod
    def chunk_texts_at_rows(self, row_ids: np.ndarray) -> dict[int, str]:
        """The text of the chunk rows at these row ids, by row id (ids not found left out)."""

    # ---- writing (one writer at a time) --------------------------------------------------
    @abstractmethod
    def commit(self, chunks: pa.Table | None, documents: list[dict[str, Any]], deleted_ids: list[str]) -> None:
        """Add chunk rows, then upsert document rows (the commit point), then drop deleted documents."""

    @abstractmethod
    def fragment_target(self) -> FragmentTarget:
        """Where other processes (Ray actors) write chunk fragments for `commit_fragments` (picklable)."""

    @abstractmethod
    def commit_fragments(
        self, fragments: list[Any], owners: list[str], documents: list[dict[str, Any]], deleted_ids: list[str], chunks: pa.Table | None = None
    ) -> None:
        """Add chunk fragments written elsewhere (`owners`: the documents they hold chunks of) and these `chunks` rows in
        one commit of the chunks table, then upsert document rows (the commit point), then drop deleted documents."""

    @abstractmethod
    def sweep_fragments(self) -> int:
        """Delete chunk fragments no version refers to (written, never committed): data files deleted; only while no
        other process writes."""

    @abstractmethod
    def set_document_fields(self, doc_id: str, *, title: str | None = None, metadata: str | None = None) -> None:
        """Change a document's title and metadata (those given) and nothing else: its chunks stay."""

    @abstractmethod
    def touch_documents(self, stats: Mapping[str, tuple[int, float]]) -> None:
        """Record the new (size, mtime) of documents whose file was touched but not changed, all in one write."""

    # ---- upkeep --------------------------------------------------------------------------
    @abstractmethod
    def collect_garbage(self) -> int:
        """Delete chunks that belong to no current document version (replaced, deleted, or left by a crash)."""

    @abstractmethod
    def maybe_optimize(self, force: bool = False, every: int = 50, min_interval_s: float = 0.0) -> None:
        """Compact and reindex when due (always with `force`, never within `min_interval_s` of the last time)."""

    @abstractmethod
    def persist_index(self, min_interval_s: float = 0.0) -> None:
        """Save the vector index for the current chunks version (not when saved less than `min_interval_s` ago)."""

    @abstractmethod
    def track_index(self) -> None:
        """Keep the in-memory vector index in step with the writes that follow (writer side)."""

    @abstractmethod
    def lend_index(self) -> None:
        """Keep no vector index in memory for this writer: the process's searchers keep the one index, and whenever
        this store would save it, it asks them to (`index_save_due`) instead."""

    @abstractmethod
    def index_save_due(self) -> int | None:
        """A lent index: the latest save asked for and not made yet (a ticket for `index_saved`), else None."""

    @abstractmethod
    def index_saved(self, ticket: int, seconds: float) -> None:
        """A lent index: its keeper saved the latest committed version (no older than the one `ticket` was asked at),
        taking `seconds` (routine saves of a slow-to-save index come less often)."""

    @abstractmethod
    def converted_vector_index(self, index: VectorIndex) -> VectorIndex | None:
        """An index of the kind wanted for this version in place of `index`, or None when it suits its size."""

    @abstractmethod
    def save_vector_index(self, index: VectorIndex, version: int) -> None:
        """Save `index` as the file of this chunks version."""

    def before_run(self) -> None:
        """Before an indexing run: collect what an interrupted one left, and follow the run's writes in memory."""
        self.collect_garbage()
        self.track_index()

    def after_commit(self, optimize_every_s: float) -> None:
        """After a commit inside a run: with `optimize_every_s` (a serving writer, whose readers want keyword search
        on the full-text index), optimize when due but not more often than that."""
        if optimize_every_s:
            self.maybe_optimize(min_interval_s=optimize_every_s)

    def after_run(self, full: bool) -> None:
        """After an indexing run that was not interrupted: collect, optimize (always after a full run) and save the
        vector index (a partial run's at most every `persist_every_s`)."""
        self.collect_garbage()
        self.maybe_optimize(force=full)
        self.persist_index(0 if full else self.persist_every_s)

    def after_small_change(self) -> None:
        """After one pushed document was indexed: collect, optimize when due, save the index at most every
        `persist_every_s`."""
        self.collect_garbage()
        self.maybe_optimize()
        self.persist_index(self.persist_every_s)

    def after_removal(self) -> None:
        """After documents were deleted by id: collect their chunks, save the index at most every `persist_every_s`."""
        self.collect_garbage()
        self.persist_index(self.persist_every_s)
