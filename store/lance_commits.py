"""The writes of `LanceStore` (a mixin; one writer at a time): chunk rows added, here or as fragments written elsewhere,
then the document rows that make them current (the commit point), deletions, and the small updates of document rows."""

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lodex.store import fragments as chunk_fragments
from lodex.store import lance_bridge
from lodex.store.faiss_lifecycle import FaissLifecycle
from lodex.store.keyword_scheme import KeywordScheme
from lodex.store.lance_sql import equals, in_lists
from lodex.store.object_store import ObjectStore
from lodex.store.schema import documents_schema, with_keywords
from lodex.store.version_marks import committed_here
from lodex.store.writer_memory import KeptRecords, StaleChunks


class LanceCommits:
    """Writes to the `documents` and `chunks` tables; the owning store sets the tables, `remote`, `dim`,
    `keyword_scheme`, `_faiss`, `_stale`, `_records` and `_unoptimized_rows`."""

    documents: Any
    chunks: Any
    remote: ObjectStore | None
    dim: int
    keyword_scheme: KeywordScheme
    _faiss: FaissLifecycle
    _stale: StaleChunks
    _records: KeptRecords
    _unoptimized_rows: int

    @contextmanager
    def _writing(self, action: str) -> Iterator[None]:
        """Vendor errors mapped (`action`: what lodex was doing); on object storage, this process's readers of the
        tables see the commit at their next refresh (another host's within `serve.refresh_s`)."""
        try:
            with lance_bridge.mapped_errors(action):
                yield
        finally:
            if self.remote is not None:
                committed_here(self.remote.uri)

    def commit(self, chunks: pa.Table | None, documents: list[dict[str, Any]], deleted_ids: list[str]) -> None:
        """Add chunk rows, then upsert document rows (the commit point), then drop deleted documents."""
        with self._writing("commit to the index"):
            self._stale.note([*deleted_ids, *(d["id"] for d in documents)])  # before writing: a commit that fails midway
            if chunks is not None:  # leaves its chunks to the next collection
                self._stale.note(pc.unique(chunks["document_id"]).to_pylist())
            if chunks is not None and chunks.num_rows:
                self.chunks.add(with_keywords(chunks, self.keyword_scheme.terms_version))
                self._unoptimized_rows += chunks.num_rows
                self._faiss.added(chunks)
            self._upsert_documents(documents, deleted_ids)

    def fragment_target(self) -> chunk_fragments.FragmentTarget:
        """Where other processes write chunk fragments for `commit_fragments` (picklable)."""
        return chunk_fragments.FragmentTarget(
            self.chunks.uri, self.remote.options if self.remote is not None else None, self.dim, self.keyword_scheme.terms_version
        )

    def commit_fragments(
        self, fragments: list[Any], owners: list[str], documents: list[dict[str, Any]], deleted_ids: list[str], chunks: pa.Table | None = None
    ) -> None:
        """Append chunk fragments written elsewhere (`write_chunk_fragments`; `owners`: the documents they hold chunks of),
        with `chunks` rows written here as one more, in one commit of the chunks table; then upsert document rows (the
        commit point), then drop deleted documents. The vector index catches the new rows up from Lance by chunk id."""
        with self._writing("commit to the index"):
            self._stale.note([*deleted_ids, *(d["id"] for d in documents), *owners])  # as `commit`: before writing
            target = self.fragment_target()
            if chunks is not None and chunks.num_rows:
                self._stale.note(pc.unique(chunks["document_id"]).to_pylist())
                fragments = [*fragments, *chunk_fragments.write_chunk_fragments(target, chunks)]
            if fragments:
                chunk_fragments.commit_fragments(target, fragments, self.chunks.version)
                self.chunks.checkout_latest()
                self._unoptimized_rows += chunk_fragments.fragment_rows(fragments)
                self._faiss.appended()
            self._upsert_documents(documents, deleted_ids)

    def sweep_fragments(self) -> int:
        """Delete chunk fragments no version refers to (a run's whose commit never came): data files deleted. The
        writer's, while no worker writes."""
        return chunk_fragments.sweep_fragments(self.fragment_target())

    def _upsert_documents(self, documents: list[dict[str, Any]], deleted_ids: list[str]) -> None:
        before = self.documents.version
        if documents:
            rows = pa.Table.from_pylist(documents, schema=documents_schema(self.dim))
            self.documents.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(rows)
        for predicate in in_lists("id", deleted_ids):
            self.documents.delete(predicate)
        if documents or deleted_ids:
            self._records.patch(self.documents, before, [d["id"] for d in documents], deleted_ids)

    def set_document_fields(self, doc_id: str, *, title: str | None = None, metadata: str | None = None) -> None:
        """Change a document's title and metadata (those given) and nothing else: its chunks stay."""
        values = {name: value for name, value in (("metadata", metadata), ("title", title)) if value is not None}
        if values:
            with self._writing("update a document"):
                self.documents.update(where=equals("id", doc_id), values=values)

    def touch_documents(self, stats: Mapping[str, tuple[int, float]]) -> None:
        """Record the new (size, mtime) of documents whose file was touched but not changed, all in one write
        (ids not in the table are left out)."""
        if not stats:
            return
        schema = documents_schema(self.dim)
        rows = pa.table(
            {
                "id": pa.array(list(stats), schema.field("id").type),
                "size": pa.array([size for size, _ in stats.values()], schema.field("size").type),
                "mtime": pa.array([mtime for _, mtime in stats.values()], schema.field("mtime").type),
            }
        )
        with self._writing("record touched files"):
            self.documents.merge_insert("id").when_matched_update_all().execute(rows)
