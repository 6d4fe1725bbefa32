"""bench/readers/page_misses.py's in-document signals: BM25 with a document's chunks as the collection, and the first passage
lodex would show (contents and index pages last)."""

import numpy as np

from bench.readers.page_misses import bm25_in_document, first_saying


def _chunk(keywords: str, text: str = "") -> dict:
    return {"keywords": keywords, "text": text or keywords}


def test_bm25_in_a_document_ranks_the_chunk_with_the_rarer_query_term_first() -> None:
    chunks = [_chunk("caption font size caption"), _chunk("caption skip float"), _chunk("caption margin width"), _chunk(None)]  # type: ignore[arg-type]
    scores = bm25_in_document(chunks, ["caption", "skip"])
    assert int(np.argmax(scores)) == 1  # "caption" is in every chunk: it hardly counts; "skip" decides
    assert scores[3] == 0 and scores[0] > 0
    assert not bm25_in_document(chunks, ["absent"]).any()


def test_the_first_passage_shown_skips_a_table_of_contents() -> None:
    contents = "1 Introduction . . . . . . . . 3\n2 Options . . . . . . . . 5\n3 Commands . . . . . . . . 9"
    chunks = [_chunk("content", contents), _chunk("option", "The skip option sets the space below a caption.")]
    assert first_saying(np.array([0, 1]), chunks) == 1
    assert first_saying(np.array([0]), chunks[:1]) == 0  # only listings: the best of them
