"""Real documents through the whole pipeline: Office, OpenDocument, EPUB, RTF and mail files (made by real producers,
tests/fixtures) indexed next to failing ones; passages carry their page and section; formats chosen by content;
files no reader takes counted by extension."""

import re
import shutil
from pathlib import Path

import pytest

from lodex.indexer.scanner import ScanRules
from lodex.store.job_log import JobLog
from tests.conftest import make_pipeline
from tests.fakes import FakeEncoder

OFFICE = Path(__file__).parent / "fixtures" / "office"
SAMPLING = "The sampling probe was traversed across the wake at twelve stations behind the trailing edge."
SLIDE3 = "Boundary layer transition moved forward as the free stream turbulence grew."


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    for name in (
        "report.docx",
        "report.odt",
        "report.rtf",
        "report.epub",
        "slides.pptx",
        "slides.odp",
        "sheets.xlsx",
        "sheets.ods",
        "message.eml",
        "bomb.docx",
        "corrupt.docx",
    ):
        shutil.copy(OFFICE / name, root / name)
    shutil.copy(OFFICE / "report.docx", root / "report-copy.bin")  # a DOCX under another extension
    (root / "notes.txt.pdf").write_text("A text file named like a PDF, about ornithopters.\n")
    (root / "keynote.key").write_bytes(b"\x00\x01 not a format lodex reads")
    (root / "pages.pages").write_bytes(b"\x00\x02 nor this")
    (root / "more.pages").write_bytes(b"\x00\x03 nor this")
    shutil.copy(OFFICE / "report.docx", root / "photo.png")  # media extensions are not sniffed: counted, not read
    return root


def test_a_folder_of_documents_indexes_with_locations_and_failures(folder: Path, tmp_path: Path) -> None:
    store, indexer, searcher = make_pipeline(tmp_path / "data", FakeEncoder(), max_tokens=24, rules=ScanRules(max_parsed_bytes=4 << 20))
    indexer.jobs = JobLog(tmp_path / "data")
    summary = indexer.run(folder)
    assert summary.failures.keys() == {"bomb.docx", "corrupt.docx"}
    assert summary.failures["bomb.docx"].startswith("zip bomb") and summary.failures["corrupt.docx"].startswith("unreadable docx")
    assert summary.skipped == {".pages": 2, ".key": 1, ".png": 1}
    assert summary.added == 11 and indexer.jobs.last_run()["skipped"] == {".pages": 2, ".key": 1, ".png": 1}
    formats = {path: record.format for path, record in store.document_records().items()}
    assert formats["report-copy.bin"] == "docx" and formats["notes.txt.pdf"] == "text" and formats["message.eml"] == "eml"

    def passage(query: str, path: str, holding: str):
        hits = searcher.search(query, 20, mode="bm25").results
        return next(p for hit in hits if hit.path == path for p in hit.passages if holding in p.text)

    for name in ("report.docx", "report.odt", "report.rtf"):
        found = passage("sampling probe traversed wake twelve stations trailing edge", name, "twelve stations")
        assert found.section == "2 Methods › 2.3 Sampling" and found.page is None, name
    for name in ("slides.pptx", "slides.odp"):
        found = passage("boundary layer transition moved forward free stream turbulence grew", name, "turbulence grew")
        assert found.page is not None and found.page_end is not None and found.page <= 3 <= found.page_end, name
        record = store.document_records()[name]
        chunks = store.chunks_of(record.id, record.content_hash, ["text", "page", "page_end", "section"]).to_pylist()
        holding = {(c["page"], c["page_end"], c["section"]) for c in chunks if "turbulence grew" in c["text"]}
        assert (3, 3, "Transition") in holding and holding <= {(2, 3, "Apparatus"), (3, 3, "Transition")}, name
    assert passage("ornithopters", "notes.txt.pdf", "ornithopters").page is None


PDF = Path(__file__).parent / "fixtures" / "pdf"


def _pdf_folder(root: Path) -> Path:
    root.mkdir()
    for name in ("forty_pages.pdf", "two_column.pdf", "scanned.pdf", "encrypted.pdf", "truncated.pdf"):
        shutil.copy(PDF / name, root / name)
    shutil.copy(PDF / "forty_pages.pdf", root / "report.bin")  # a PDF saved under another extension
    return root


def test_pdfs_index_with_pages_and_their_failures(tmp_path: Path) -> None:
    root = _pdf_folder(tmp_path / "docs")
    store, indexer, searcher = make_pipeline(tmp_path / "data", FakeEncoder(), max_tokens=48)
    summary = indexer.run(root)
    assert summary.failures["scanned.pdf"].startswith("no text layer (scanned PDF)")
    assert summary.failures["encrypted.pdf"].startswith("encrypted")
    assert summary.failures["truncated.pdf"].startswith("unreadable PDF: ")
    assert summary.added == 3 and store.document_records()["report.bin"].format == "pdf"


@pytest.mark.slow
def test_a_sentence_planted_on_page_37_is_found_first_with_its_page_and_offsets(tmp_path: Path, real_encoder) -> None:
    from lodex.indexer.readers.readers import extract

    root = _pdf_folder(tmp_path / "docs")
    store, indexer, searcher = make_pipeline(tmp_path / "data", real_encoder)
    indexer.run(root)
    hits = searcher.search("how many quokkas live on Rottnest Island", 3).results
    assert hits[0].path in ("forty_pages.pdf", "report.bin")
    best = hits[0].passages[0]
    assert re.search(r"quokka\s+census\s+of\s+Rottnest\s+Island", best.text) and (best.page, best.page_end) == (37, 37)
    text = extract("forty_pages.pdf", (root / "forty_pages.pdf").read_bytes()).text
    assert text[best.char_start : best.char_end] == best.text  # exact offsets into the extracted text
