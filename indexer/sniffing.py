"""Which binary format a file's content is, from its first bytes (and, for zip containers, their entry names)."""

import io
import zipfile
from pathlib import Path

from lodex.indexer.paths import open_regular
from lodex.store.errors import LodexError

_HEAD_BYTES = 8192

_ZIP_MARKERS = (("word/document.xml", "docx"), ("ppt/presentation.xml", "pptx"), ("xl/workbook.xml", "xlsx"))
_MIMETYPES = {b"application/vnd.oasis.opendocument.text": "odt", b"application/vnd.oasis.opendocument.presentation": "odp",
              b"application/vnd.oasis.opendocument.spreadsheet": "ods", b"application/epub+zip": "epub"}


def sniff_format(head: bytes, data: bytes | None = None) -> str | None:
    """The format `head` (a file's first bytes; `data`, the whole file, for zip containers) is, or None."""
    if head.startswith(b"%PDF-"):
        return "pdf"
    if head.startswith(b"{\\rtf"):
        return "rtf"
    if head.startswith(b"PK\x03\x04") and data is not None:
        return zip_format(data)
    return None


def zip_format(data: bytes) -> str | None:
    """The Office, OpenDocument or EPUB format of a zip container, from its entries; None for another zip."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return _zip_names_format(archive)
    except (zipfile.BadZipFile, OSError, KeyError, ValueError):
        return None


def _zip_names_format(archive: zipfile.ZipFile) -> str | None:
    names = set(archive.namelist())
    for marker, fmt in _ZIP_MARKERS:
        if marker in names:
            return fmt
    if "mimetype" in names and archive.getinfo("mimetype").file_size < 200:
        return _MIMETYPES.get(archive.read("mimetype").strip())
    return None


def sniff_path(path: Path) -> str | None:
    """The binary format of the file at `path` by its content (its first bytes; a zip's entry names), or None; a
    file that cannot be opened as a regular file is None too (reading it says why)."""
    try:
        with open_regular(path) as fh:
            head = fh.read(_HEAD_BYTES)
            if not head.startswith(b"PK\x03\x04"):
                return sniff_format(head)
            with zipfile.ZipFile(fh) as archive:  # reads the central directory only
                return _zip_names_format(archive)
    except (LodexError, OSError, zipfile.BadZipFile, ValueError):
        return None
