"""Finding the first chunk of a passage's section: walking back a window at a time, across windows, and from all
chunks where the ids are not in chunk order; which titles a question names."""

import numpy as np
import pyarrow as pa

from lodex.search.section_start import WINDOW, names_section, section_start, title_terms


def _reader(sections: list[str], ids: np.ndarray, reads: list[int]):
    """A read of (id, ordinal, section) rows for chunk ids, in reverse order (as a table need not keep any)."""
    ordinal = {int(c): i for i, c in enumerate(ids)}

    def read(wanted: np.ndarray) -> pa.Table:
        reads.append(len(wanted))
        rows = [int(c) for c in wanted][::-1]
        return pa.table({"id": rows, "ordinal": [ordinal[c] for c in rows], "section": [sections[ordinal[c]] for c in rows]})
    return read


def test_the_walk_back_reads_a_window_and_crosses_windows() -> None:
    sections = ["A"] * 10 + ["B"] * (WINDOW + 10) + ["C"] * 5
    ids = np.arange(1000, 1000 + len(sections), dtype=np.int64) * 7  # not the ordinals
    reads: list[int] = []
    passage = int(ids[10 + WINDOW + 5])  # deep in B, more than a window after its start
    assert section_start(ids, passage, "B", _reader(sections, ids, reads)) == int(ids[10])
    assert len(reads) == 2 and max(reads) <= WINDOW
    reads.clear()
    assert section_start(ids, int(ids[len(sections) - 1]), "C", _reader(sections, ids, reads)) == int(ids[len(sections) - 5])
    assert reads == [WINDOW]  # one window: a long document costs a few rows
    assert section_start(ids, int(ids[3]), "A", _reader(sections, ids, [])) == int(ids[0])  # the document's start
    assert section_start(ids, 12345, "A", _reader(sections, ids, [])) is None  # not one of its chunks


def test_ids_out_of_chunk_order_are_read_whole() -> None:
    sections = ["A"] * 5 + ["B"] * 5
    ids = np.arange(10, dtype=np.int64) + 100
    shuffled = ids[[3, 7, 1, 9, 0, 5, 2, 8, 6, 4]]
    ordinal_order = _reader(sections, ids, reads := [])
    assert section_start(shuffled, int(ids[8]), "B", ordinal_order) == int(ids[5])
    assert reads[-1] == len(ids)  # fell back to all of them


def test_a_question_names_a_section_by_every_word_of_its_title() -> None:
    assert title_terms("2 Options › 2.4 Margins and further paragraph options") == {"margin", "paragraph", "option"}
    assert title_terms("Guide › C.1 caption v1.x") >= {"caption"}
    question = {"export", "data", "frame", "text", "file"}
    assert names_section("Data › 1.2 Export to text files", question)
    assert not names_section("Data › 1.3 Export to spreadsheets", question)
    assert not names_section(None, question) and not names_section("", question) and not names_section("2.3", question)
