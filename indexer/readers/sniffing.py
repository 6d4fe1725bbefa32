"""Names a file's format from its content (magic bytes, zip entries, mail headers), whatever its extension."""

import io
import re
import struct
import zipfile
from pathlib import Path

from lodex.indexer.paths import open_regular
from lodex.store.errors import LodexError

# Bump whenever a change here would name the format of some content differently.
SNIFFING_READER_VERSION = "1"

SNIFF_HEAD_BYTES = 4096  # the first bytes sniff_format needs (a zip's may need the whole file: needs_whole_file)

_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # a local file header; the end record of an empty archive
_MIMETYPES = {
    b"application/vnd.oasis.opendocument.text": "odt",
    b"application/vnd.oasis.opendocument.presentation": "odp",
    b"application/vnd.oasis.opendocument.spreadsheet": "ods",
    b"application/epub+zip": "epub",
}
_OOXML_PARTS = (("word/document.xml", "docx"), ("ppt/presentation.xml", "pptx"), ("xl/workbook.xml", "xlsx"))
_OOXML_TYPES = (
    (b"wordprocessingml.document.main+xml", "docx"),
    (b"ms-word.document.macroEnabled.main+xml", "docx"),
    (b"presentationml.presentation.main+xml", "pptx"),
    (b"ms-powerpoint.presentation.macroEnabled.main", "pptx"),
    (b"spreadsheetml.sheet.main+xml", "xlsx"),
    (b"ms-excel.sheet.macroEnabled.main+xml", "xlsx"),
)
_SMALL_ENTRY = 1024 * 1024  # [Content_Types].xml and mimetype are read only when they declare at most this

_FIELD = re.compile(rb"^[!-9;-~]{1,76}:")  # a header field's name: printable ASCII but the colon, then a colon
_MAIL_FIELDS = frozenset(
    b"from to cc bcc subject date mime-version message-id received return-path reply-to "
    b"delivered-to sender in-reply-to references content-type content-transfer-encoding "
    b"dkim-signature authentication-results x-mailer user-agent".split()
)
_MAIL_ONLY = frozenset(b"from mime-version message-id received return-path delivered-to dkim-signature".split())


def sniff_format(head: bytes, data: bytes | None = None) -> str | None:
    """The format the content starting with `head` is in: "pdf", "docx", "pptx", "xlsx", "odt", "odp", "ods",
    "epub", "rtf", "eml", or None when it is none of those (or cannot be told). `head` is the file's first
    SNIFF_HEAD_BYTES (or all of it); a zip needs `data`, the whole file, unless it starts with an ODF or EPUB
    mimetype entry (see needs_whole_file)."""
    start = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if start.startswith(b"%PDF-"):
        return "pdf"
    if head.startswith(_ZIP_MAGIC):
        return _zip_format(head, data)
    if start.startswith(b"{\\rtf"):
        return "rtf"
    if _looks_like_mail(head):
        return "eml"
    return None


def needs_whole_file(head: bytes) -> bool:
    """Whether sniff_format needs the whole file to name this content: a zip whose first entry is no mimetype."""
    return head.startswith(_ZIP_MAGIC) and _first_entry_mimetype(head) is None


def _zip_format(head: bytes, data: bytes | None) -> str | None:
    """An archive's format: from its leading mimetype entry (ODF, EPUB), else from its entries (OOXML)."""
    mimetype = _first_entry_mimetype(head)
    if mimetype is not None:
        return _MIMETYPES.get(mimetype)
    if data is None:
        return None
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        names = set(archive.namelist())
        if "mimetype" in names:
            return _MIMETYPES.get(_small_entry(archive, "mimetype").strip())
        return _ooxml_format(archive, names)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, RuntimeError, NotImplementedError):
        return None


def _first_entry_mimetype(head: bytes) -> bytes | None:
    """The content of the archive's first entry when it is "mimetype", stored uncompressed (as ODF and EPUB
    require), read from the local header; None otherwise."""
    if len(head) < 30 or not head.startswith(b"PK\x03\x04"):
        return None
    method, size, name_len, extra_len = struct.unpack_from("<H8xI4xHH", head, 8)
    if method != 0 or head[30 : 30 + name_len] != b"mimetype":
        return None
    start = 30 + name_len + extra_len
    return head[start : start + min(size, 200)].strip()


def _ooxml_format(archive: zipfile.ZipFile, names: set[str]) -> str | None:
    """docx, pptx or xlsx: from the main part's usual name, else from [Content_Types].xml."""
    if "[Content_Types].xml" not in names:
        return None
    for part, fmt in _OOXML_PARTS:
        if part in names:
            return fmt
    types = _small_entry(archive, "[Content_Types].xml")
    return next((fmt for marker, fmt in _OOXML_TYPES if marker in types), None)


def _small_entry(archive: zipfile.ZipFile, name: str) -> bytes:
    """An entry's bytes when it declares at most _SMALL_ENTRY (and inflates to no more), else b""."""
    if archive.getinfo(name).file_size > _SMALL_ENTRY:
        return b""
    with archive.open(name) as entry:
        return entry.read(_SMALL_ENTRY)


def _looks_like_mail(head: bytes) -> bool:
    """Whether `head` starts with an RFC 822 header block: only header lines (an mbox "From " line allowed first)
    up to the first blank line, two or more of them fields of mail, one of which only mail has (From, Message-ID,
    MIME-Version, Received, …)."""
    lines = head.split(b"\n")
    if not head.endswith(b"\n"):
        lines = lines[:-1]  # cut off mid-line
    if lines and lines[0].startswith(b"From "):
        lines = lines[1:]
    fields: list[bytes] = []
    for line in lines:
        line = line.rstrip(b"\r")
        if not line:
            break
        if line[:1] in (b" ", b"\t") and fields:
            continue
        match = _FIELD.match(line)
        if match is None:
            return False
        fields.append(match.group()[:-1].lower())
    known = [name for name in fields if name in _MAIL_FIELDS]
    return len(known) >= 2 and any(name in _MAIL_ONLY for name in known)


def sniff_path(path: Path) -> str | None:
    """The format of the file at `path` by its content (its first bytes; for a zip, its entry names, read from the
    central directory without inflating anything), or None; a file that cannot be opened as a regular file is None
    too (reading it says why)."""
    try:
        with open_regular(path) as fh:
            head = fh.read(SNIFF_HEAD_BYTES)
            if not needs_whole_file(head):
                return sniff_format(head)
            with zipfile.ZipFile(fh) as archive:
                names = set(archive.namelist())
                if "mimetype" in names:
                    return _MIMETYPES.get(_small_entry(archive, "mimetype").strip())
                return _ooxml_format(archive, names)
    except (LodexError, OSError, zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, RuntimeError, NotImplementedError):
        return None
