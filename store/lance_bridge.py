"""The way into lancedb, and lodex's one compatibility module with it (the only code that touches lancedb's own
attributes): its background event loop (where async queries run, several at once), the async table behind a sync
handle, opening the tables and their keyword index, and reads by predicate."""

import asyncio
from collections.abc import Coroutine, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any, TypeVar, cast

import numpy as np
import pyarrow as pa

from lodex.store.errors import StoreError
from lodex.store.keyword_scheme import KEYWORDS, LEGACY, KeywordScheme
from lodex.store.lance_sql import in_lists
from lodex.text.terms import TERMS_VERSION

T = TypeVar("T")

# Tables are created with stable row ids: a row keeps its id through compaction (optimize), so the searchers' next
# snapshot after one is the previous one's (without them, every row moves and the snapshot re-reads every chunk's
# owner: O(chunks) work on the query threads' CPU every optimize). Tables made by an earlier lodex keep their kind.
NEW_TABLE_OPTIONS = {"new_table_enable_stable_row_ids": "true"}


def async_of(table: Any) -> Any:
    """The async table behind a lancedb sync table handle (at the same checked-out version): queries through it
    skip the sync builder's schema look-ups, and several can be awaited together."""
    return table._table


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on lancedb's background event loop and wait for its result."""
    from lancedb.background_loop import LOOP

    return cast(T, LOOP.run(coroutine))  # type: ignore[no-untyped-call]  # lancedb's loop is untyped


def start(coroutine: Coroutine[Any, Any, T]) -> "Future[T]":
    """Start a coroutine on lancedb's background event loop; its result comes through the returned future."""
    from lancedb.background_loop import LOOP

    return asyncio.run_coroutine_threadsafe(coroutine, LOOP.loop)


def open_or_create(db: Any, name: str, schema: pa.Schema) -> Any:
    """The table `name` of a lancedb connection, created empty with `schema` (and stable row ids) when absent; columns `schema` has and
    the table lacks (an index made by an earlier lodex) are added, empty (null) for the rows it holds."""
    if name not in db.list_tables().tables:
        return db.create_table(name, schema=schema, storage_options=NEW_TABLE_OPTIONS)
    table = db.open_table(name)
    missing = [f for f in schema if f.name not in table.schema.names]
    if missing:
        try:
            table.add_columns(missing)
        except Exception:  # noqa: BLE001 — another process added them at the same moment
            table = db.open_table(name)
            if any(f.name not in table.schema.names for f in missing):
                raise
    return table


def _text_indexed(table: Any) -> str | None:
    """The column the table's full-text index is on, if it has one."""
    return next((ix.columns[0] for ix in table.list_indices() if ix.columns in ([KEYWORDS], [LEGACY]) and "FTS" in str(ix.index_type).upper()), None)


def ensure_text_index(table: Any, terms_version: int = TERMS_VERSION) -> KeywordScheme:
    """Give the chunks a BM25 full-text index unless they have one, and say how it tokenizes: over the `keywords`
    column (lodex's terms, split at spaces only) when the table has one, else over `text` with Lance's English
    tokenizer (stemmed, stop words out; an index made before that column). Rows added later are searched too (Lance
    scans what the index does not cover yet) until `optimize` folds them in."""
    from lancedb.index import FTS

    found = _text_indexed(table)
    if found is not None:
        return KeywordScheme(found, terms_version)
    column = KEYWORDS if KEYWORDS in table.schema.names else LEGACY
    config = (
        FTS(with_position=False, base_tokenizer="whitespace", lower_case=False, stem=False, remove_stop_words=False, ascii_folding=False)
        if column == KEYWORDS
        else FTS(with_position=False)
    )
    try:
        table.create_index(column, config=config)
    except Exception as exc:  # another process created it at the same moment
        if _text_indexed(table) is None:
            raise StoreError(f"cannot build the keyword index: {exc}", "check the data directory's free space and permissions") from exc
    return KeywordScheme(_text_indexed(table) or column, terms_version)


def ensure_scalar_indexes(table: Any, columns: list[str]) -> None:
    """Give these columns a scalar index (by-value lookups) unless they have one."""
    existing = {tuple(ix.columns) for ix in table.list_indices()}
    for column in columns:
        if (column,) not in existing:
            table.create_scalar_index(column)


def select(table: Any, predicate: str, columns: list[str]) -> pa.Table:
    """These columns of the rows matching a predicate (built by `lance_sql`), at the handle's version."""
    return run(async_of(table).query().where(predicate).select(columns).to_arrow())


def select_in(table: Any, column: str, values: Sequence[str | int], columns: list[str]) -> pa.Table:
    """These columns of the rows whose `column` is one of `values` (any order; values not found are left out)."""
    parts = [select(table, predicate, columns) for predicate in in_lists(column, values)]
    return pa.concat_tables(parts) if parts else pa.table({c: [] for c in columns})


@contextmanager
def mapped_errors(action: str) -> Iterator[None]:
    """Lance, Arrow and OS failures inside the block become one StoreError saying what lodex was doing (the vendor's
    exception kept as its cause): the one place where the store's vendor errors are translated."""
    try:
        yield
    except StoreError:
        raise
    except (OSError, RuntimeError, ValueError, pa.ArrowException) as exc:
        detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise StoreError(
            f"cannot {action}: {detail}", "check the data directory's free space and permissions, then run again (committed work is kept)"
        ) from exc


def row_ids(table: pa.Table) -> np.ndarray:
    """The Lance row ids of a query's answer (`with_row_id`)."""
    ids: np.ndarray = table["_rowid"].to_numpy()
    return ids
