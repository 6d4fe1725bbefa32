"""Which document version each chunk belongs to, for one version of the chunks table: lookups without Lance."""

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def version_keys(doc_ids: Any, content_hashes: Any) -> Any:
    """The "id:hash" key of each document version (Arrow columns in, an Arrow array of strings out): it names one
    content of one document, so whatever is derived from it never changes."""
    return pc.binary_join_element_wise(doc_ids, content_hashes, ":")


def _find(sorted_keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each value sits in `sorted_keys` (clamped), and whether it is there."""
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


class ChunkOwners:
    """chunk id → the code of its document version (document id and content hash, `keys[code]` = "id:hash"), a
    code → its chunk ids, and a Lance row id → its chunk id: lookups without Lance, built with Arrow and numpy (no
    Python object per chunk) from one version's rows (id, document_id, content_hash, _rowid), so that a new table
    version costs little; `updated` derives the next version's from the rows it added and removed."""

    def __init__(self, table: pa.Table) -> None:
        keys = version_keys(table["document_id"], table["content_hash"])
        encoded = pc.dictionary_encode(_combined(keys))
        self._set(table["id"].to_numpy(), table["_rowid"].to_numpy(), encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64),
                  encoded.dictionary)

    @classmethod
    def _of(cls, ids: np.ndarray, row_ids: np.ndarray, codes: np.ndarray, keys: pa.Array) -> "ChunkOwners":
        out = cls.__new__(cls)
        out._set(ids, row_ids, codes, keys)
        return out

    def _set(self, ids: np.ndarray, row_ids: np.ndarray, codes: np.ndarray, keys: pa.Array) -> None:
        self._table = (ids, row_ids, codes)  # in table order (later versions' rows appended)
        by_row = np.argsort(row_ids, kind="stable")  # runs of rising row ids: close to linear
        self._row_ids, self._ids_by_row = row_ids[by_row], ids[by_row]
        self.keys: pa.Array = keys
        order = np.argsort(ids, kind="stable")
        self.ids, self._codes = ids[order], codes[order]  # ids: every chunk id of the version, sorted
        self.row_ids = row_ids[order]  # each one's Lance row id
        by_code = np.argsort(codes, kind="stable")  # stable: a document's chunks stay in table (ordinal) order
        self._members = ids[by_code]
        self._starts = np.searchsorted(codes[by_code], np.arange(len(self.keys) + 1))

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def sorted_row_ids(self) -> np.ndarray:
        """Every Lance row id of this version, sorted."""
        return self._row_ids

    @property
    def last_row_id(self) -> int:
        """The highest Lance row id of this version (rows a later version adds come after it); -1 when empty."""
        return int(self._row_ids[-1]) if len(self._row_ids) else -1

    def updated(self, gone_row_ids: np.ndarray, added: pa.Table) -> "ChunkOwners":
        """The owners of a later version of the table: these row ids removed and these rows (id, document_id,
        content_hash, _rowid; all after this version's last row id) added. The lookups are merged (no sort of the
        whole version); keys no chunk uses any more are dropped once they are as many as those in use."""
        gone = np.sort(np.asarray(gone_row_ids))
        keys, new_codes = self._codes_of(added)
        ids, row_ids, codes = self._table
        keep = ~_member(row_ids, gone)
        new_ids, new_rows = added["id"].to_numpy().astype(np.int64), added["_rowid"].to_numpy()
        table = (np.concatenate([ids[keep], new_ids]), np.concatenate([row_ids[keep], new_rows]), np.concatenate([codes[keep], new_codes]))
        lengths = np.bincount(table[2], minlength=len(keys))
        if len(keys) > 2 * int(np.count_nonzero(lengths)) + 64:  # many replaced versions: renumber the keys still in use
            used = np.flatnonzero(lengths)
            return ChunkOwners._of(table[0], table[1], np.searchsorted(used, table[2]), keys.take(pa.array(used)))
        out = ChunkOwners.__new__(ChunkOwners)
        out._table, out.keys = table, keys
        gone_ids = self.ids_at_rows(gone)
        by_row = np.searchsorted(self._row_ids, gone)  # where the gone rows sit in the sorted lookups: deleted there
        order = np.argsort(new_rows, kind="stable")
        out._row_ids = np.concatenate([np.delete(self._row_ids, by_row), new_rows[order]])
        out._ids_by_row = np.concatenate([np.delete(self._ids_by_row, by_row), new_ids[order]])
        by_id = np.searchsorted(self.ids, gone_ids)
        order = np.argsort(new_ids, kind="stable")
        at = np.searchsorted(np.delete(self.ids, by_id), new_ids[order])
        out.ids, out._codes, out.row_ids = (np.insert(np.delete(a, by_id), at, b[order]) for a, b in
                                            ((self.ids, new_ids), (self._codes, new_codes), (self.row_ids, new_rows)))
        member_codes = np.repeat(np.arange(len(self.keys)), np.diff(self._starts))
        by_code = ~_member(self._members, np.sort(gone_ids)) if len(gone) else np.ones(len(self._members), bool)
        order = np.argsort(new_codes, kind="stable")  # after the chunks of their version already there: table order
        at = np.searchsorted(member_codes[by_code], new_codes[order], side="right")
        out._members = np.insert(self._members[by_code], at, new_ids[order])
        out._starts = np.concatenate([[0], np.cumsum(lengths)])
        return out

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

    def rows_of(self, code_mask: np.ndarray) -> np.ndarray:
        """The Lance row ids of the chunks whose code the mask (one bool per key) marks."""
        _, row_ids, codes = self._table
        return row_ids[code_mask[codes]]

    def ids_at_rows(self, row_ids: np.ndarray) -> np.ndarray:
        """The chunk ids at these Lance row ids of this version (each must be one)."""
        return self._ids_by_row[np.searchsorted(self._row_ids, row_ids)]

    def has(self, chunk_ids: np.ndarray) -> np.ndarray:
        """Whether each chunk id is in this version."""
        return _member(np.asarray(chunk_ids, dtype=np.int64), self.ids)

    def codes(self, chunk_ids: np.ndarray) -> np.ndarray:
        """The document-version code of each chunk id; -1 for ids not in this version."""
        chunk_ids = np.asarray(chunk_ids, dtype=np.int64)
        if not len(self.ids) or not len(chunk_ids):
            return np.full(len(chunk_ids), -1, np.int64)
        pos, found = _find(self.ids, chunk_ids)
        return np.where(found, self._codes[pos], -1)

    def ranked(self, row_ids: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Hits given by Lance row id (of this version) as chunk ids and scores, best first (equal scores in id
        order, however Lance ran the query); row ids not in this version are left out."""
        if not len(self._row_ids) or not len(row_ids):
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        pos, known = _find(self._row_ids, row_ids)
        ids, scores = self._ids_by_row[pos[known]], np.asarray(scores)[known]
        order = np.lexsort((ids, -scores))
        return ids[order], scores[order]

    def members(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The chunk ids of these document versions, concatenated (each one's in order), and how many each has
        (none for a code of -1)."""
        codes = np.asarray(codes, dtype=np.int64)
        known = codes >= 0
        low = np.where(known, self._starts[np.maximum(codes, 0)], 0)
        lengths = np.where(known, self._starts[np.maximum(codes, 0) + 1] - low, 0)
        offsets = np.cumsum(lengths) - lengths
        return self._members[np.repeat(low - offsets, lengths) + np.arange(int(lengths.sum()))], lengths
