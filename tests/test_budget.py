"""Issue #37: every file read in bounded time and memory. Hostile spreadsheets, PDFs and mail are refused by their
readers' guards while the text is built; a reader that hangs or allocates without bound is killed by the per-file
budget (a worker process) and the rest of the batch is indexed; text extensions are not overridden by sniffed content."""

import time
import tracemalloc
from pathlib import Path

import pytest

from lodex.indexer.errors import ReadError
from lodex.indexer.pdf.pdf_reader import read_pdf
from lodex.indexer.readers.document import ReadLimits
from lodex.indexer.readers.mail_reader import read_eml
from lodex.indexer.readers.odf_readers import read_ods
from lodex.indexer.readers.read_budget import ReadBudget, ReadPool
from lodex.indexer.readers.readers import extract
from lodex.indexer.readers.xlsx_reader import read_xlsx
from lodex.indexer.settings import IndexSettings
from tests import hostile_files as hostile
from tests.conftest import make_pipeline
from tests.fakes import FakeEncoder

MB = 1 << 20


def _refused(read, data: bytes, limits: ReadLimits = ReadLimits()) -> tuple[str, float, int]:
    """The reason `read` refuses `data`, the seconds it took, and the peak of Python memory it held meanwhile."""
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(ReadError) as caught:
            read(data, limits)
        return caught.value.message, time.monotonic() - started, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_shared_string_used_by_many_cells_is_refused_before_the_row_is_joined() -> None:
    data = hostile.xlsx_shared_string_bomb(cells=200, string_mb=1)  # 200 MB of row text from a 3 KB file
    reason, seconds, peak = _refused(read_xlsx, data)
    assert reason.startswith("xlsx text too long")
    assert peak < 64 * MB, f"{peak / MB:.0f} MB held: the row was built before it was measured"


def test_repeated_ods_cells_are_counted_as_they_are_repeated() -> None:
    data = hostile.ods_repeated_columns(text_kb=1024, repeat=200)  # one 1 MB cell written out 200 times
    reason, seconds, peak = _refused(read_ods, data)
    assert reason.startswith("ods text too long")
    assert peak < 64 * MB, f"{peak / MB:.0f} MB held: the row was built before it was measured"


def test_a_row_of_more_cells_than_excel_allows_is_refused_at_once() -> None:
    reason, seconds, peak = _refused(read_xlsx, hostile.xlsx_empty_cells(200_000))
    assert reason.startswith("xlsx row of more than 16,384 cells")
    assert peak < 64 * MB


@pytest.mark.parametrize("trick", ["array", "comment", "a85", "double"])
def test_pdf_bombs_behind_filter_arrays_and_comments_are_refused(trick: str) -> None:
    data = hostile.pdf_filter_bomb(inflated_mb=64, trick=trick)
    reason, seconds, _ = _refused(read_pdf, data, ReadLimits(16 * MB, 16 * MB))
    assert reason.startswith("a compressed stream inflates past the limit")


def test_a_stream_drawn_by_thousands_of_pages_is_refused_up_front() -> None:
    data = hostile.pdf_shared_stream(pages=500, stream_mb=1)  # 500 MiB to parse from one 1 MiB stream
    reason, seconds, _ = _refused(read_pdf, data, ReadLimits(8 * MB, 8 * MB))
    assert reason.startswith("page contents add up to")


def test_ordinary_pdfs_pass_the_guard() -> None:
    assert "plain words" in extract("a.pdf", hostile.pdf_text("A page of plain words.")).text
    many = hostile.pdf_shared_stream(pages=20, stream_mb=1)  # 20 MiB in all: under 8 times the limit
    with pytest.raises(ReadError, match="no text layer"):  # guard passed: pdfium read it (no-ops, no text)
        read_pdf(many, ReadLimits(8 * MB, 8 * MB))


def test_deeply_nested_mime_fails_with_a_reason_a_user_understands() -> None:
    started = time.monotonic()
    # 5,000 levels open 5,000 parts: refused by the part count before the email package recurses into them (a
    # message nested too deeply for it, within the part count, would say "MIME parts nested too deeply to read")
    with pytest.raises(ReadError, match="^mail of more than 1,000 MIME parts"):
        read_eml(hostile.deep_mime(5_000), ReadLimits())
    assert time.monotonic() - started < 10


def test_text_extensions_win_over_sniffed_content() -> None:
    note = b"%PDF-1.4 is not the subject here: this note is about herons.\n" * 3
    doc = extract("note.txt", note)
    assert (doc.format, doc.text) == ("text", note.decode())
    rtf_like = b"{\\rtf1 is how this note starts, then it goes on about herons and egrets at length.\n" * 6
    doc = extract("note.md", rtf_like)
    assert doc.format == "markdown" and len(doc.text) >= len(rtf_like) - 2
    assert extract("letter.rtf", b"{\\rtf1\\ansi Hello {\\b herons}.}").text.strip() == "Hello herons."


def test_a_hanging_or_hoarding_reader_is_killed_and_the_next_file_is_read() -> None:
    pool = ReadPool(ReadBudget(seconds=1.5, memory_mb=128), reader="tests.budget_readers:hostile")
    try:
        started = time.monotonic()
        with pytest.raises(ReadError, match=r"^took longer than 1.5 s to read \(index.max_seconds_per_file\)$"):
            pool.extract("hang.md", b"# never read", ReadLimits())
        assert time.monotonic() - started < 10
        started = time.monotonic()
        with pytest.raises(ReadError, match=r"^needed more than 128 MB to read \(index.max_memory_mb_per_file\)$"):
            pool.extract("hog.md", b"# never read", ReadLimits())
        assert time.monotonic() - started < 10
        assert pool.extract("fine.md", b"# Herons\n\nThey wade.", ReadLimits()).title == "Herons"
    finally:
        pool.close()


def test_a_spike_between_two_looks_is_over_the_budget_even_once_freed() -> None:
    """A read whose memory passes its budget and falls back before the parent looks (every 20 ms) is failed all the
    same: its reading process's peak (VmHWM) is checked with the answer, so no file that passes took more."""
    pool = ReadPool(ReadBudget(seconds=30, memory_mb=16), reader="tests.budget_readers:hostile")
    try:
        for _ in range(3):
            with pytest.raises(ReadError, match=r"^needed more than 16 MB to read \(index.max_memory_mb_per_file\)$"):
                pool.extract("spike.md", b"# Spike", ReadLimits())
        assert pool.extract("fine.md", b"# Herons\n\nThey wade.", ReadLimits()).title == "Herons"
    finally:
        pool.close()


def test_a_file_sent_to_the_reading_process_is_not_copied_in_lodex() -> None:
    """lodex's own share of a read: the file's bytes go to the reading process as they are, not in a pickle that
    would hold a second copy of them (up to index.max_parsed_mb) in lodex while it is read."""
    data = b"x" * (32 * MB)
    pool = ReadPool(ReadBudget(seconds=30, memory_mb=512), reader="tests.budget_readers:hostile")
    try:
        pool.extract("fine.md", b"# warm", ReadLimits())  # the reading process started, outside the measure
        tracemalloc.start()
        title = pool.extract("size.md", data, ReadLimits()).title
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        pool.close()
    assert title == f"{32 * MB} bytes"  # every byte arrived
    assert peak < 4 * MB, f"lodex held {peak / MB:.0f} MB more while the file was read"


def test_the_budget_stops_a_pdf_the_guard_would_have_let_through() -> None:
    data = hostile.pdf_shared_stream(pages=2_000, stream_mb=4)  # 8 GB of no-ops to parse: minutes of pdfium
    pool = ReadPool(ReadBudget(seconds=2, memory_mb=512), reader="tests.budget_readers:unguarded")
    try:
        started = time.monotonic()
        with pytest.raises(ReadError, match="took longer than 2 s"):
            pool.extract("pages.pdf", data, ReadLimits())
        assert time.monotonic() - started < 8
    finally:
        pool.close()


def test_a_run_records_budget_breaches_and_indexes_the_rest(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    for name in ("hang.md", "hog.html"):
        (root / name).write_text("# never read\n")
    (root / "ok.md").write_text("# Herons\n\nHerons wade in shallow water.\n")
    (root / "ok.txt").write_text("Egrets are herons too.\n")
    (root / "shared.xlsx").write_bytes(hostile.xlsx_shared_string_bomb(cells=200))
    store, indexer, _ = make_pipeline(tmp_path / "data", FakeEncoder())
    indexer.reading = ReadPool(ReadBudget(seconds=1.5, memory_mb=128), reader="tests.budget_readers:hostile")
    try:
        summary = indexer.run(root)
    finally:
        indexer.reading.close()
    assert summary.added == 2, summary
    assert summary.failures["hang.md"].startswith("took longer than 1.5 s to read")
    assert summary.failures["hog.html"].startswith("needed more than 128 MB to read")
    assert summary.failures["shared.xlsx"].startswith("xlsx text too long")


def test_the_budget_settings_have_defaults_and_limits() -> None:
    cfg = IndexSettings()
    assert (cfg.max_seconds_per_file, cfg.max_memory_mb_per_file, cfg.max_memory_mb) == (120, 1024, 0)
    with pytest.raises(ValueError):
        IndexSettings(max_seconds_per_file=0)
    with pytest.raises(ValueError):
        IndexSettings(max_memory_mb_per_file=10)
