"""Chunk rows written as Lance data fragments by processes other than the writer (Ray actors), and the one commit that
makes many of them part of the chunks table: the parts of `lodex index --ray` with index.ray_writes = "fragments", small
enough for a bench to call. A fragment no commit names is a file no version refers to: invisible, and swept."""

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from lodex.store.compactor import KEEP_VERSIONS
from lodex.store.errors import StoreError
from lodex.store.lance_bridge import mapped_errors
from lodex.store.lance_sql import version_of
from lodex.store.schema import chunks_schema, vectors_of, with_keywords

CONFLICT_FIX = "no other process may write the index while `lodex index --ray` runs: stop it, then run again (committed work is kept)"
RETRIES = 20  # Lance's own: a commit that finds a newer version rebases onto it (appends and deletes do) this many times


@dataclass(frozen=True)
class FragmentTarget:
    """Where chunk fragments go, picklable for a worker: the chunks table's Lance URI (a local folder or object-store
    URI) with its storage options, the vector length, and the keyword terms version its full-text index holds."""

    uri: str
    options: dict[str, str] | None
    dim: int
    terms_version: int

    def dataset(self, version: int | None = None) -> Any:
        """The chunks table as a pylance dataset (the latest version, or this one)."""
        import lance  # pylance, at lancedb's Lance version

        return lance.dataset(self.uri, version=version, storage_options=self.options)


def write_chunk_fragments(target: FragmentTarget, rows: pa.Table) -> list[Any]:
    """Write chunk rows (the chunks schema; their `keywords` made here when missing) as new data files of the chunks
    table, visible to no reader until `commit_fragments` names them: their FragmentMetadata (picklable), none for no rows."""
    if not rows.num_rows:
        return []
    from lance.fragment import write_fragments

    table = with_keywords(rows, target.terms_version).select(chunks_schema(target.dim).names)
    with mapped_errors("write chunk fragments"):
        return list(write_fragments(table.cast(chunks_schema(target.dim)), target.uri, mode="append", storage_options=target.options))


def fragment_rows(fragments: Iterable[Any]) -> int:
    """The chunk rows these fragments hold."""
    return sum(int(fragment.physical_rows) for fragment in fragments)


def fragment_key(fragment: Any) -> str:
    """A fragment's identity before it is committed: its first data file's name (random, never reused)."""
    return str(fragment.files[0].path)


def commit_fragments(target: FragmentTarget, fragments: list[Any], read_version: int) -> int:
    """Append these fragments to the chunks table in one commit made on `read_version`; a version committed meanwhile by
    another writer is rebased onto when compatible (another append, a delete, a compaction), up to RETRIES times.
    Returns the new version; an incompatible one (the table overwritten or restored) is a StoreError in one line."""
    import lance
    from lance.commit import CommitConflictError

    try:
        with mapped_errors("commit chunk fragments"):
            dataset = lance.LanceDataset.commit(
                target.uri, lance.LanceOperation.Append(fragments), read_version=read_version, storage_options=target.options, max_retries=RETRIES
            )
    except StoreError as exc:
        if isinstance(exc.__cause__, CommitConflictError):
            first = str(exc.__cause__).split(",")[0].strip()[:200]
            raise StoreError(f"another writer changed the chunks table while this run wrote to it ({first})", CONFLICT_FIX) from exc.__cause__
        raise
    return int(dataset.version)


def sweep_fragments(target: FragmentTarget, keep: timedelta = KEEP_VERSIONS) -> int:
    """Delete the data files no version of the chunks table refers to (fragments of a run whose commit never came),
    with the versions older than `keep`, as an optimize does; the number of data files deleted. Only while no other
    process is writing the table (Lance cannot tell an unfinished write from an abandoned one): the writer, before it
    starts a run's workers or after its last commit."""
    with mapped_errors("remove unused chunk fragments"):
        stats = target.dataset().cleanup_old_versions(older_than=keep, delete_unverified=True)
    return int(stats.data_files_removed) + _remove_partial_files(target.uri)


def _remove_partial_files(uri: str) -> int:
    """Delete the data files a writer killed mid-write left under their temporary names (`data/.tmp*`: on a local
    disk Lance writes a file under such a name, then renames it; an object store has no such files); how many."""
    if "://" in uri and not uri.startswith("file://"):
        return 0
    removed = 0
    for partial in (Path(uri.removeprefix("file://")) / "data").glob(".tmp*"):
        with contextlib.suppress(FileNotFoundError, IsADirectoryError):
            partial.unlink()
            removed += 1
    return removed


@dataclass(frozen=True)
class StoredChunks:
    """A worker's read of the stored chunks (an edited file keeps the vectors of its unchanged chunks, as the writer's
    own preparer does): `chunk_vectors_of`, as `Store` answers it."""

    target: FragmentTarget

    def chunk_vectors_of(self, doc_id: str, content_hash: str) -> tuple[list[str], np.ndarray]:
        """The texts and vectors of one document version's chunks, at the table's latest version."""
        with mapped_errors("read stored chunks"):
            table = self.target.dataset().to_table(columns=["text", "vector"], filter=version_of(doc_id, content_hash))
        return table["text"].to_pylist(), vectors_of(table)
