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


class ChunkOwners:
    """chunk id → the code of its document version (document id and content hash, `keys[code]` = "id:hash"), a
    code → its chunk ids, and a Lance row id → its chunk id: lookups without Lance, built with Arrow and numpy (no
    Python object per chunk) from one version's rows (id, document_id, content_hash, _rowid), so that a new table
    version costs little."""

    def __init__(self, table: pa.Table) -> None:
        ids = table["id"].to_numpy()
        row_ids = table["_rowid"].to_numpy()
        by_row = np.argsort(row_ids)
        self._row_ids, self._ids_by_row = row_ids[by_row], ids[by_row]
        keys = version_keys(table["document_id"], table["content_hash"])
        encoded = pc.dictionary_encode(keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys)
        codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        self.keys: pa.Array = encoded.dictionary
        order = np.argsort(ids, kind="stable")
        self.ids, self._codes = ids[order], codes[order]  # ids: every chunk id of the version, sorted
        self.row_ids = row_ids[order]  # each one's Lance row id
        by_code = np.argsort(codes, kind="stable")  # stable: a document's chunks stay in table (ordinal) order
        self._members = ids[by_code]
        self._starts = np.searchsorted(codes[by_code], np.arange(len(self.keys) + 1))

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
