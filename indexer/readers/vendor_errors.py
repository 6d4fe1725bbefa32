"""The libraries' errors that a damaged file raises (zipfile, zlib, expat, pdfium), each told as one plain clause of
what is wrong with the file: the readers raise their ReadError `from` the library's exception, which keeps its words."""

import zipfile
import zlib
from xml.etree import ElementTree as ET

_ZIP_DAMAGED = "its zip structure is damaged"
# pdfium's error codes (fpdfview.h FPDF_ERR_*) when a document cannot be opened, beyond a password or an unsupported
# security handler (told apart by the PDF reader, with its own fix). pdfium leaves its last code as it was when it gives
# up on a damaged catalog or page tree, so the reader sets it to FPDF_ERR_FORMAT before opening: that one reads alike.
_PDFIUM_DAMAGED = "it is damaged or not a PDF (its header, cross-reference table, catalog or page tree cannot be read)"
_PDFIUM_OPEN = {2: "its data cannot be opened", 6: "a page cannot be loaded"}  # FPDF_ERR_FILE, FPDF_ERR_PAGE
# pypdfium2's messages when one page fails (the start of each), and what they mean for the page.
_PDFIUM_PAGE = {
    "Failed to load page": "it cannot be loaded (its dictionary or contents are damaged)",
    "Failed to load text page": "its text cannot be extracted",
    "Failed to get charbox": "its characters' positions cannot be read",
    "Failed to get the character's origin": "its characters' positions cannot be read",
}


def zip_reason(exc: BaseException) -> str:
    """What a zip archive's error says of the archive, in words."""
    text = str(exc)
    if isinstance(exc, zipfile.BadZipFile):
        if text.startswith("File is not a zip file"):
            return "it is not the zip archive its format requires (damaged, or another kind of file)"
        if text.startswith("Bad CRC-32"):
            return "an entry's content does not match its checksum (the archive is damaged)"
        return _ZIP_DAMAGED
    if isinstance(exc, zlib.error):
        return "an entry's compressed data is damaged"
    if isinstance(exc, NotImplementedError):
        return "an entry needs a zip feature lodex does not read (a compression method or zip version)"
    if isinstance(exc, RuntimeError) and "encrypted" in text:
        return "an entry is encrypted"
    if isinstance(exc, UnicodeDecodeError):
        return "an entry's name cannot be decoded (the archive is damaged)"
    if isinstance(exc, EOFError):
        return "the archive is truncated"
    return _ZIP_DAMAGED


def xml_reason(what: str, exc: ET.ParseError) -> str:
    """What expat's error says of the XML part `what`, with where it stopped."""
    line, column = exc.position
    return f"{what} is not well-formed XML (line {line:,}, column {column + 1:,})"


def pdfium_open_reason(code: int | None) -> str:
    """What pdfium's error code, when it cannot open a document, says of the file."""
    return _PDFIUM_OPEN.get(code if code is not None else 1, _PDFIUM_DAMAGED)


def pdfium_page_reason(page: int, message: str) -> str:
    """What pypdfium2's error on one page (from 1) says of it."""
    said = next((meaning for start, meaning in _PDFIUM_PAGE.items() if message.startswith(start)), "it cannot be read")
    return f"page {page:,}: {said}"
