"""A result document's best passages: the chunks its query ranked highest, then by cosine, listings last."""

import numpy as np

from lodex.search.fusion import Hits
from lodex.search.highlight import highlight_spans, query_stems
from lodex.search.listing import is_listing
from lodex.search.results import Passage
from lodex.search.snapshot import Snapshot
from lodex.store.base import Store
from lodex.store.schema import LOCATION_COLUMNS

# A result document's best chunks whose texts are read to choose its passages (contents and index pages go last).
PASSAGE_POOL = 8


def best_passages(
    store: Store,
    snap: Snapshot,
    texts_of: list[str],
    vectors: np.ndarray,
    tops: list[list[tuple[int, float]]],
    chunk_order: list[Hits],
    passages: int,
) -> dict[tuple[int, int], list[Passage]]:
    """The `passages` best passages of each result document (`tops`: each query's documents; `chunk_order`: each query's
    chunk ranking; `texts_of`: each query's text) — the chunks the query ranked highest, then by cosine, of the
    PASSAGE_POOL best the ones that read as a table of contents or an index last — with their cosine to the query and
    the query words they contain; keyed by (query, document row)."""
    if passages <= 0:
        return {}
    chosen: dict[tuple[int, int], list[tuple[float, int]]] = {}
    for i, top in enumerate(tops):
        if not top:
            continue
        rows = np.array([r for r, _ in top], np.int64)
        ids, chunk_vectors, lengths = snap.chunk_vectors(rows)
        sims = chunk_vectors @ vectors[i]
        ranked = chunk_order[i].score_of(ids)
        for row, start, n in zip(rows.tolist(), (np.cumsum(lengths) - lengths).tolist(), lengths.tolist()):
            part = slice(start, start + n)
            keys = np.lexsort((np.arange(n), -sims[part], -ranked[part]))[: max(passages, PASSAGE_POOL)]
            chosen[(i, row)] = [(float(sims[part][j]), int(ids[part][j])) for j in keys]
    wanted = np.unique(np.array([chunk_id for picks in chosen.values() for _, chunk_id in picks], np.int64))
    rows = snap.owners.row_ids_of(wanted)  # every chosen chunk is of this version
    texts = {r["id"]: r for r in store.chunks_at_rows(rows, ["id", "char_start", "char_end", "text", *LOCATION_COLUMNS]).to_pylist()}
    listing = {c: is_listing(r["text"]) for c, r in texts.items()}
    for key, picks in chosen.items():  # contents and index pages after the passages that say things (stable)
        chosen[key] = sorted(picks, key=lambda pick: listing.get(pick[1], False))[:passages]
    stems = [query_stems(text) for text in texts_of]
    return {
        (i, row): [
            Passage(
                texts[c]["text"],
                texts[c]["char_start"],
                texts[c]["char_end"],
                round(s, 6),
                highlight_spans(texts[c]["text"], stems[i]),
                texts[c]["page"],
                texts[c]["page_end"],
                texts[c]["section"],
            )
            for s, c in picks
            if c in texts
        ]
        for (i, row), picks in chosen.items()
    }
