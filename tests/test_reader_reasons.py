"""Damaged files fail in words (indexer/readers/vendor_errors.py): what zipfile, zlib and pdfium say of a file becomes
one plain clause of what is wrong with it, and the library's exception stays the cause. Each case once reached users
in the library's words ("PDFium: Success", "Bad magic number for file header", …)."""

import io
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import pypdfium2 as pdfium
import pytest

from lodex.indexer.errors import ReadError
from lodex.indexer.pdf.pdf_reader import read_pdf
from lodex.indexer.readers.document import Document, ReadLimits
from lodex.indexer.readers.epub_reader import read_epub
from lodex.indexer.readers.odf_readers import read_odt
from lodex.indexer.readers.ooxml_readers import read_docx
from lodex.indexer.readers.xlsx_reader import read_xlsx
from tests.fuzz_files import RAW_REASON, Case

OFFICE = Path(__file__).parent / "fixtures" / "office"
PDF = Path(__file__).parent / "fixtures" / "pdf"
READERS: dict[str, tuple[Callable[[bytes, ReadLimits], Document], str]] = {
    "docx": (read_docx, "word/document.xml"),
    "xlsx": (read_xlsx, "xl/workbook.xml"),
    "odt": (read_odt, "content.xml"),
    "epub": (read_epub, "META-INF/container.xml"),
}
FILES = {"docx": "report.docx", "xlsx": "sheets.xlsx", "odt": "report.odt", "epub": "report.epub"}


def failure(read: Callable[[bytes, ReadLimits], Document], data: bytes) -> ReadError:
    with pytest.raises(ReadError) as caught:
        read(data, ReadLimits())
    assert not RAW_REASON.search(caught.value.message), caught.value.message
    return caught.value


def damaged(fmt: str, how: str) -> bytes:
    """The format's fixture with one entry damaged: its local header's signature, its data (stored entries: one byte;
    deflated ones: an invalid block type), or its compression method (in both headers)."""
    data = bytearray((OFFICE / FILES[fmt]).read_bytes())
    info = zipfile.ZipFile(io.BytesIO(bytes(data))).getinfo(READERS[fmt][1])
    at = info.header_offset
    start = at + 30 + int.from_bytes(data[at + 26 : at + 28], "little") + int.from_bytes(data[at + 28 : at + 30], "little")
    if how == "signature":
        data[at : at + 2] = b"XX"
    elif how == "data":
        data[start] = 0xFF if info.compress_type == zipfile.ZIP_DEFLATED else data[start] ^ 0x01
    else:
        central = next(
            i
            for i in _all(data, b"PK\x01\x02")  # its entry in the central directory
            if int.from_bytes(data[i + 42 : i + 46], "little") == at
        )
        data[at + 8 : at + 10] = data[central + 10 : central + 12] = (99).to_bytes(2, "little")
    return bytes(data)


def _all(data: bytearray, mark: bytes) -> list[int]:
    found, at = [], data.find(mark)
    while at >= 0:
        found.append(at)
        at = data.find(mark, at + 1)
    return found


@pytest.mark.parametrize("fmt", sorted(READERS))
def test_a_damaged_zip_fails_in_words(fmt: str) -> None:
    read = READERS[fmt][0]
    error = failure(read, damaged(fmt, "signature"))
    assert error.message == f"unreadable {fmt}: its zip structure is damaged"
    assert isinstance(error.__cause__, zipfile.BadZipFile)
    error = failure(read, damaged(fmt, "data"))
    assert error.message in (
        f"unreadable {fmt}: an entry's compressed data is damaged",
        f"unreadable {fmt}: an entry's content does not match its checksum (the archive is damaged)",
    )
    assert isinstance(error.__cause__, (zlib.error, zipfile.BadZipFile))
    error = failure(read, damaged(fmt, "method"))
    assert error.message.startswith(f"unreadable {fmt}: an entry needs a zip feature lodex does not read")
    assert isinstance(error.__cause__, NotImplementedError)
    error = failure(read, b"PK\x03\x04 and then nothing of a zip")
    assert error.message.startswith(f"unreadable {fmt}: it is not the zip archive its format requires")


DAMAGED = "it is damaged or not a PDF (its header, cross-reference table, catalog or page tree cannot be read)"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"not a PDF at all", DAMAGED),
        (Case("pdf", "flip", 1).build(), DAMAGED),  # no catalog: pdfium gives up without a code ("PDFium: Success")
        (Case("pdf", "flip", 6).build(), "page 1: it cannot be loaded (its dictionary or contents are damaged)"),
    ],
    ids=["not_a_pdf", "no_page_tree", "damaged_page"],
)
def test_a_damaged_pdf_fails_in_words(data: bytes, reason: str) -> None:
    error = failure(read_pdf, data)
    assert error.message == f"unreadable PDF: {reason}"
    assert isinstance(error.__cause__, pdfium.PdfiumError)


def test_a_damaged_pdf_read_after_an_encrypted_one_is_not_called_encrypted() -> None:
    """pdfium keeps its last error code when it gives up without one: a stale "password" must not name the cause."""
    assert failure(read_pdf, (PDF / "encrypted.pdf").read_bytes()).message.startswith("encrypted")
    assert failure(read_pdf, Case("pdf", "flip", 1).build()).message == f"unreadable PDF: {DAMAGED}"
