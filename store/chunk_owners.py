"""Which document version each chunk belongs to, for one version of the chunks table: lookups without Lance."""

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_EMPTY_IDS = np.zeros(0, np.int64)
_EMPTY_ROWS = np.zeros(0, np.uint64)


def version_keys(doc_ids: Any, content_hashes: Any) -> Any:
    """The "id:hash" key of each document version (Arrow columns in, an Arrow array of strings out): it names one
    content of one document, so whatever is derived from it never changes."""
    return pc.binary_join_element_wise(doc_ids, content_hashes, ":")


def _find(sorted_keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each value sits in `sorted_keys` (clamped), and whether it is there."""
    if not len(sorted_keys):
        return np.zeros(len(values), np.int64), np.zeros(len(values), bool)
    pos = np.minimum(np.searchsorted(sorted_keys, values), len(sorted_keys) - 1)
    return pos, sorted_keys[pos] == values


def _member(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """Whether each value is in `sorted_set` (a binary search each: cheap for a small set in a large array and the
    other way round, unlike np.isin's sort of both)."""
    if not len(sorted_set) or not len(values):
        return np.zeros(len(values), bool)
    return _find(sorted_set, values)[1]


def _combined(column: Any) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


class _Lookups:
    """The sorted lookups of a set of chunk rows (ids, Lance row ids, key codes; in table order): by chunk id, by
    row id, and each code's chunk ids in table order. Built once, never changed."""

    def __init__(self, ids: np.ndarray, row_ids: np.ndarray, codes: np.ndarray, key_count: int) -> None:
        self.table = (ids, row_ids, codes)
        by_row = np.argsort(row_ids, kind="stable")  # runs of rising row ids: close to linear
        self.row_ids, self.ids_by_row = row_ids[by_row], ids[by_row]
        order = np.argsort(ids, kind="stable")
        self.ids, self.codes, self.rows_by_id = ids[order], codes[order], row_ids[order]
        by_code = np.argsort(codes, kind="stable")  # stable: a document's chunks stay in table (ordinal) order
        self.members = ids[by_code]
        self.starts = np.searchsorted(codes[by_code], np.arange(key_count + 1))

    def __len__(self) -> int:
        return len(self.ids)

    def segments(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The chunk ids of these codes (known here or not), concatenated, and how many each has."""
        top = len(self.starts) - 1
        known = (codes >= 0) & (codes < top)
        low = np.where(known, self.starts[np.where(known, codes, 0)], 0)
        lengths = np.where(known, self.starts[np.where(known, codes + 1, 0)] - low, 0)
        offsets = np.cumsum(lengths) - lengths
        return self.members[np.repeat(low - offsets, lengths) + np.arange(int(lengths.sum()))], lengths


_NONE = _Lookups(_EMPTY_IDS, _EMPTY_ROWS, _EMPTY_IDS, 0)


class ChunkOwners:
    """chunk id → the code of its document version (document id and content hash, `keys[code]` = "id:hash"), a
    code → its chunk ids, and a Lance row id → its chunk id: lookups without Lance, built with Arrow and numpy (no
    Python object per chunk) from one version's rows (id, document_id, content_hash, _rowid).

    A later version's (`updated`) shares the earlier one's sorted lookups (the base) and holds only what changed:
    the base rows gone, and lookups of the rows added since the base was built (the delta), so that a commit costs
    in proportion to what it changed, not to the size of the index; once the changes reach MERGE_SHARE of the base
    (at least MERGE_ROWS), they are merged into a new base."""

    MERGE_ROWS = 4096
    MERGE_SHARE = 1 / 16

    def __init__(self, table: pa.Table) -> None:
        keys = version_keys(table["document_id"], table["content_hash"])
        encoded = pc.dictionary_encode(_combined(keys))
        codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        self._set(
            _Lookups(table["id"].to_numpy().astype(np.int64), table["_rowid"].to_numpy(), codes, len(encoded.dictionary)),
            _NONE,
            _EMPTY_ROWS,
            _EMPTY_IDS,
            encoded.dictionary,
        )

    def _set(self, base: _Lookups, delta: _Lookups, gone_rows: np.ndarray, gone_ids: np.ndarray, keys: pa.Array) -> None:
        self._base, self._delta = base, delta
        self._gone_rows, self._gone_ids = gone_rows, gone_ids  # base rows no longer in this version (sorted)
        self.keys: pa.Array = keys
        self._merged: tuple[np.ndarray, np.ndarray] | None = None

    @classmethod
    def _of(cls, base: _Lookups, delta: _Lookups, gone_rows: np.ndarray, gone_ids: np.ndarray, keys: pa.Array) -> "ChunkOwners":
        out = cls.__new__(cls)
        out._set(base, delta, gone_rows, gone_ids, keys)
        return out

    def __len__(self) -> int:
        return len(self._base) - len(self._gone_ids) + len(self._delta)

    # ---- the whole version (O(chunks): for rebuilds and checks, not per commit) ------------------------------
    def _all(self) -> tuple[np.ndarray, np.ndarray]:
        """Every chunk id of the version, sorted, and each one's row id (made on first use)."""
        if self._merged is None:
            base, delta = self._base, self._delta
            live = ~_member(base.ids, self._gone_ids)
            ids, rows = np.concatenate([base.ids[live], delta.ids]), np.concatenate([base.rows_by_id[live], delta.rows_by_id])
            order = np.argsort(ids, kind="stable")
            self._merged = ids[order], rows[order]
        return self._merged

    @property
    def ids(self) -> np.ndarray:
        """Every chunk id of this version, sorted."""
        return self._all()[0]

    @property
    def row_ids(self) -> np.ndarray:
        """The Lance row id of each chunk of `ids`."""
        return self._all()[1]

    @property
    def sorted_row_ids(self) -> np.ndarray:
        """Every Lance row id of this version, sorted."""
        base = self._base.row_ids
        return np.sort(np.concatenate([base[~_member(base, self._gone_rows)], self._delta.row_ids]))

    @property
    def last_row_id(self) -> int:
        """The highest Lance row id of this version (rows a later version adds come after it); -1 when empty."""
        if len(self._delta):
            return int(self._delta.row_ids[-1])  # added after every base row
        base, gone = self._base.row_ids, self._gone_rows
        top = len(base)
        while top and len(gone) and _member(base[top - 1 : top], gone)[0]:
            top -= 1
        return int(base[top - 1]) if top else -1

    def newest_rows(self, n: int) -> np.ndarray:
        """The n highest Lance row ids of this version (the rows committed last), in ascending order."""
        delta = self._delta.row_ids
        if n <= 0:
            return _EMPTY_ROWS
        if len(delta) >= n:
            return delta[len(delta) - n :]
        base, take = self._base.row_ids, n - len(delta)
        tail = base[max(0, len(base) - take - len(self._gone_rows)) :]
        return np.concatenate([tail[~_member(tail, self._gone_rows)][-take:], delta])

    def sample_rows(self, n: int, seed: int = 0) -> np.ndarray:
        """Up to n Lance row ids of this version picked at random (the same ones for the same version and seed)."""
        base = self._base.row_ids
        if not len(base):
            return self._delta.row_ids[:n]
        picked = base[np.unique(np.random.default_rng(seed).integers(0, len(base), n + len(self._gone_rows)))]
        kept: np.ndarray = picked[~_member(picked, self._gone_rows)][:n]
        return kept

    # ---- lookups ------------------------------------------------------------------------------------------
    def _by_id(self, chunk_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For each chunk id: found in this version, its code and its row id (where found)."""
        chunk_ids = np.asarray(chunk_ids, dtype=np.int64)
        base, delta = self._base, self._delta
        pos, found = _find(base.ids, chunk_ids)
        found &= ~_member(chunk_ids, self._gone_ids)
        codes = np.where(found, base.codes[pos] if len(base) else 0, -1)
        rows = np.where(found, base.rows_by_id[pos] if len(base) else 0, 0).astype(np.uint64)
        if len(delta):
            dpos, dfound = _find(delta.ids, chunk_ids)
            codes = np.where(dfound, delta.codes[dpos], codes)
            rows = np.where(dfound, delta.rows_by_id[dpos], rows)
            found |= dfound
        return found, codes, rows

    def _by_row(self, row_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each Lance row id: found in this version, and its chunk id (where found)."""
        row_ids = np.asarray(row_ids, dtype=np.uint64)
        base, delta = self._base, self._delta
        pos, found = _find(base.row_ids, row_ids)
        found &= ~_member(row_ids, self._gone_rows)
        ids = np.where(found, base.ids_by_row[pos] if len(base) else 0, 0)
        if len(delta):
            dpos, dfound = _find(delta.row_ids, row_ids)
            ids = np.where(dfound, delta.ids_by_row[dpos], ids)
            found |= dfound
        return found, ids.astype(np.int64)

    def has(self, chunk_ids: np.ndarray) -> np.ndarray:
        """Whether each chunk id is in this version."""
        return self._by_id(chunk_ids)[0]

    def codes(self, chunk_ids: np.ndarray) -> np.ndarray:
        """The document-version code of each chunk id; -1 for ids not in this version."""
        return self._by_id(chunk_ids)[1]

    def row_ids_of(self, chunk_ids: np.ndarray) -> np.ndarray:
        """The Lance row id of each of these chunk ids (each must be of this version)."""
        return self._by_id(chunk_ids)[2]

    def ids_at_rows(self, row_ids: np.ndarray) -> np.ndarray:
        """The chunk ids at these Lance row ids of this version (each must be one)."""
        return self._by_row(row_ids)[1]

    def ranked(self, row_ids: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Hits given by Lance row id (of this version) as chunk ids and scores, best first (equal scores in id
        order, however Lance ran the query); row ids not in this version are left out."""
        if not len(row_ids):
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        known, ids = self._by_row(row_ids)
        ids, scores = ids[known], np.asarray(scores)[known]
        order = np.lexsort((ids, -scores))
        return ids[order], scores[order]

    def members(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The chunk ids of these document versions, concatenated (each one's in order), and how many each has
        (none for a code of -1)."""
        codes = np.asarray(codes, dtype=np.int64)
        ids, lengths = self._base.segments(codes)
        if len(self._gone_ids) and len(ids):
            live = ~_member(ids, self._gone_ids)
            lengths = np.bincount(np.repeat(np.arange(len(codes)), lengths)[live], minlength=len(codes)).astype(lengths.dtype)
            ids = ids[live]
        if not len(self._delta):
            return ids, lengths
        extra, more = self._delta.segments(codes)
        if not len(extra):
            return ids, lengths
        which = np.concatenate([np.repeat(np.arange(len(codes)), lengths), np.repeat(np.arange(len(codes)), more)])
        order = np.argsort(which, kind="stable")  # each code's base chunks, then its added ones (table order)
        return np.concatenate([ids, extra])[order], lengths + more

    def rows_of(self, code_mask: np.ndarray) -> np.ndarray:
        """The Lance row ids of the chunks whose code the mask (one bool per key) marks."""
        ids, _ = self.members(np.flatnonzero(code_mask))
        return self.row_ids_of(ids)

    # ---- the next version -------------------------------------------------------------------------------------
    def updated(self, gone_row_ids: np.ndarray, added: pa.Table) -> "ChunkOwners":
        """The owners of a later version of the table: these row ids removed and these rows (id, document_id,
        content_hash, _rowid; all after this version's last row id) added, in time proportional to them (and to the
        keys) until the changes are many enough to merge."""
        gone = np.unique(np.asarray(gone_row_ids, dtype=np.uint64))
        keys, new_codes = self._codes_of(added)
        base, delta = self._base, self._delta
        in_delta = _member(gone, delta.row_ids)
        gone_rows = np.union1d(self._gone_rows, gone[~in_delta]).astype(np.uint64)
        base_gone = gone[~in_delta]
        gone_ids = np.union1d(self._gone_ids, base.ids_by_row[np.searchsorted(base.row_ids, base_gone)] if len(base_gone) else _EMPTY_IDS)
        ids, row_ids, codes = delta.table
        keep = ~_member(row_ids, gone[in_delta])
        table = (
            np.concatenate([ids[keep], added["id"].to_numpy().astype(np.int64)]),
            np.concatenate([row_ids[keep], added["_rowid"].to_numpy().astype(np.uint64)]),
            np.concatenate([codes[keep], new_codes]),
        )
        changes = len(table[0]) + len(gone_ids)
        if changes >= max(self.MERGE_ROWS, len(base) * self.MERGE_SHARE):
            return self._merge(base, gone_rows, table, keys)
        return ChunkOwners._of(base, _Lookups(*table, len(keys)), gone_rows.astype(np.uint64), gone_ids.astype(np.int64), keys)

    @classmethod
    def _merge(cls, base: _Lookups, gone_rows: np.ndarray, added: tuple[np.ndarray, np.ndarray, np.ndarray], keys: pa.Array) -> "ChunkOwners":
        """One base of the base rows still here and the added ones (table order kept); keys no chunk uses any more
        are dropped once they are as many as those in use."""
        ids, row_ids, codes = base.table
        keep = ~_member(row_ids, gone_rows)
        ids, row_ids, codes = (
            np.concatenate([ids[keep], added[0]]),
            np.concatenate([row_ids[keep], added[1]]),
            np.concatenate([codes[keep], added[2]]),
        )
        lengths = np.bincount(codes, minlength=len(keys))
        if len(keys) > 2 * int(np.count_nonzero(lengths)) + 64:  # many replaced versions: renumber the keys still in use
            used = np.flatnonzero(lengths)
            codes, keys = np.searchsorted(used, codes), keys.take(pa.array(used))
        return cls._of(_Lookups(ids, row_ids, codes, len(keys)), _NONE, _EMPTY_ROWS, _EMPTY_IDS, keys)

    def _codes_of(self, added: pa.Table) -> tuple[pa.Array, np.ndarray]:
        """The keys with those of these rows added (new ones at the end), and each row's code."""
        keys = self.keys
        new_keys = _combined(version_keys(added["document_id"], added["content_hash"])) if added.num_rows else pa.array([], pa.string())
        codes = pc.index_in(new_keys, value_set=keys).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        unknown = codes < 0
        if unknown.any():
            extra = pc.unique(new_keys.filter(pa.array(unknown)))
            keys = pa.concat_arrays([keys, extra])
            codes[unknown] = len(self.keys) + pc.index_in(new_keys.filter(pa.array(unknown)), value_set=extra).to_numpy(zero_copy_only=False)
        return keys, codes
