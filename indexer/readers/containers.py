"""Safe reading of zip containers (Office, ODF, EPUB) and of the XML in them: zip bombs and entity tricks refused."""

import codecs
import io
import re
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from typing import cast
from urllib.parse import unquote
from xml.etree import ElementTree as ET

from lodex.indexer.errors import ReadError
from lodex.indexer.readers.document import ReadLimits
from lodex.indexer.readers.vendor_errors import xml_reason, zip_reason

# Bump whenever a change here would change the text a reader extracts through it.
CONTAINERS_READER_VERSION = "1"

CHUNK_BYTES = 64 * 1024  # an entry is inflated this much at a time, and XML fed to its parser so
_BOMB_FIX = "raise index.max_parsed_mb if the file is genuine, or exclude it"
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    OSError,
    EOFError,
    ValueError,
    RuntimeError,
    NotImplementedError,
    KeyError,
    UnicodeDecodeError,
)


_OLE2_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # a compound file: legacy .doc/.xls/.ppt, or encrypted OOXML
_DAMAGED_FIX = "the file may be damaged or truncated; re-save it, or exclude it"
HOSTILE_FIX = "the file is corrupt or hostile: exclude it"
# An XML tag (its name and attributes, from "<" to ">") longer than this is refused: expat parses a tag again from its
# start each time more of it is fed (a 40 MB attribute took 38 s to parse), and no real document has one.
MAX_TAG_BYTES = 1024 * 1024


class MalformedXml(ReadError):
    """A part of a container is not well-formed XML (a reader may do without an optional part)."""


def unreadable(fmt: str, reason: str | BaseException) -> ReadError:
    """The error for a file of format `fmt` that cannot be parsed (a corrupt zip, a missing part): a zip library's
    error told in words (vendor_errors.py)."""
    return ReadError(f"unreadable {fmt}: {zip_reason(reason) if isinstance(reason, BaseException) else reason}", _DAMAGED_FIX)


class SafeZip:
    """A zip archive opened from bytes whose entries are read against one inflation budget: an entry whose declared
    size would take the bytes inflated so far past `limits.max_inflated_bytes` is refused before it is inflated, and
    the bytes actually inflated are counted too (a declared size can lie)."""

    def __init__(self, data: bytes, limits: ReadLimits, fmt: str) -> None:
        self.fmt = fmt
        self.limit = limits.max_inflated_bytes
        self.declared = 0  # declared sizes of the entries read so far
        self.inflated = 0  # bytes actually inflated so far
        if data.startswith(_OLE2_MAGIC):
            raise ReadError(
                f"unreadable {fmt}: an OLE2 compound file, not a zip (a password-protected document, or "
                f"a legacy .doc/.xls/.ppt one under another name)",
                "save it unprotected in its own format",
            )
        try:
            self._zip = zipfile.ZipFile(io.BytesIO(data))
            self._infos = {info.filename: info for info in self._zip.infolist()}
        except _ZIP_ERRORS as exc:
            raise unreadable(fmt, exc) from exc

    def names(self) -> list[str]:
        """The entries' names, in the archive's order."""
        return list(self._infos)

    def has(self, name: str) -> bool:
        """Whether the archive holds an entry `name`."""
        return name in self._infos

    def read(self, name: str) -> bytes:
        """Entry `name` inflated whole (within the budget)."""
        return b"".join(self.stream(name))

    def stream(self, name: str) -> Iterator[bytes]:
        """Entry `name` inflated a chunk at a time (within the budget); ReadError when missing or corrupt."""
        info = self._infos.get(name)
        if info is None:
            raise unreadable(self.fmt, f"no {name} in the archive")
        self._reserve(info)
        try:
            with self._zip.open(info) as entry:
                while chunk := entry.read(CHUNK_BYTES):
                    self._count(name, len(chunk))
                    yield chunk
        except _ZIP_ERRORS as exc:
            raise unreadable(self.fmt, exc) from exc

    def _reserve(self, info: zipfile.ZipInfo) -> None:
        """Refuse, before inflating a byte, an entry whose declared size takes the total past the limit."""
        if self.declared + info.file_size > self.limit:
            raise ReadError(
                f"zip bomb: {self.fmt} entry {info.filename} declares {info.file_size:,} bytes and would "
                f"inflate past index.max_parsed_mb ({self.limit:,} bytes)",
                _BOMB_FIX,
            )
        self.declared += info.file_size

    def _count(self, name: str, size: int) -> None:
        """Stop inflating once the bytes actually inflated pass the limit (whatever the sizes declared)."""
        self.inflated += size
        if self.inflated > self.limit:
            raise ReadError(
                f"zip bomb: {self.fmt} entry {name} inflates to more than it declares and would inflate "
                f"past index.max_parsed_mb ({self.limit:,} bytes)",
                _BOMB_FIX,
            )


def resolve(base: str, target: str) -> str:
    """The archive path of `target` (a relationship's or manifest's href, %-escaped, maybe with a #fragment, which is
    dropped) relative to the entry `base` ("" for the archive's root)."""
    path = unquote(target.split("#")[0])
    parts = [] if path.startswith("/") else [part for part in base.rpartition("/")[0].split("/") if part]
    for part in path.split("/"):
        if part == "..":
            parts = parts[:-1]
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts)


# XML: no entity may be declared (the billion-laughs expansion and external entities both need a declaration, which
# sits in a DOCTYPE's internal subset; ElementTree never fetches an external DTD). The declaration is looked for in
# the bytes before they reach the parser, in every encoding the parser could be reading them in.
_ENTITY = "<!ENTITY"
_WIDE = [_ENTITY.encode(codec) for codec in ("utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be")]
_DECLARED = re.compile(rb"^(?:\xef\xbb\xbf)?\s*<\?xml[^>]{0,200}?encoding\s*=\s*[\"']([A-Za-z0-9._-]{1,40})[\"']")


class _EntityGuard:
    """Refuses XML holding an entity declaration, scanned chunk by chunk (a declaration split across chunks too)."""

    def __init__(self, fmt: str, what: str) -> None:
        self.fmt, self.what = fmt, what
        self.patterns: list[bytes] = []
        self.carry = b""

    def check(self, chunk: bytes) -> None:
        if not self.patterns:
            self.patterns = _patterns_for(chunk, self.fmt, self.what)
        window = self.carry + chunk
        if any(pattern in window for pattern in self.patterns):
            raise ReadError(f"unsafe {self.fmt}: {self.what} declares XML entities (refused: entity expansion)", "exclude the file")
        self.carry = window[-32:]


def _patterns_for(head: bytes, fmt: str, what: str) -> list[bytes]:
    """How an entity declaration reads in the encoding the XML starting with `head` is in."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) or b"\x00" in head[:4]:
        return _WIDE
    declared = _DECLARED.match(head)
    if declared:
        try:
            same = _ENTITY.encode(declared.group(1).decode("ascii")) == _ENTITY.encode()
        except (LookupError, UnicodeError):
            same = False
        if not same:
            raise unreadable(fmt, f"{what} is XML in an unsupported encoding ({declared.group(1).decode('ascii')})")
    return [_ENTITY.encode()]


class _TagBound:
    """Refuses a tag longer than MAX_TAG_BYTES, measured across the chunks it spans, before the parser is fed it (a ">"
    inside an attribute's value ends the tag as far as this count goes; the per-file budget still bounds such a file)."""

    def __init__(self, fmt: str, what: str) -> None:
        self.fmt, self.what = fmt, what
        self.open = -1  # bytes of the tag still open at the end of the chunks seen, -1 when none is

    def check(self, chunk: bytes) -> None:
        if self.open >= 0:  # the tag left open ends in this chunk, or goes on past it
            ends = chunk.find(b">")
            self._refuse_past(self.open + (ends if ends >= 0 else len(chunk)))
        opened, closed = chunk.rfind(b"<"), chunk.rfind(b">")
        if opened > closed:
            self.open = len(chunk) - opened
        elif closed >= 0:
            self.open = -1
        elif self.open >= 0:
            self.open += len(chunk)

    def _refuse_past(self, length: int) -> None:
        if length > MAX_TAG_BYTES:
            raise ReadError(
                f"unsafe {self.fmt}: {self.what} holds an XML tag longer than {MAX_TAG_BYTES >> 20} MB (an "
                f"attribute or element name; no real document has one); refused",
                HOSTILE_FIX,
            )


def iter_xml(chunks: Iterable[bytes], fmt: str, what: str) -> Iterator[tuple[str, ET.Element]]:
    """("start" | "end", element) events of the XML in `chunks`, parsed as they come (entity declarations and tags
    longer than MAX_TAG_BYTES refused)."""
    parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("start", "end"))
    guard, tags = _EntityGuard(fmt, what), _TagBound(fmt, what)
    try:
        for chunk in chunks:
            guard.check(chunk)
            tags.check(chunk)
            parser.feed(chunk)
            yield from cast(Iterator[tuple[str, ET.Element]], parser.read_events())  # only those two kinds asked
        parser.close()
        yield from cast(Iterator[tuple[str, ET.Element]], parser.read_events())
    except ET.ParseError as exc:
        raise MalformedXml(f"unreadable {fmt}: {xml_reason(what, exc)}", _DAMAGED_FIX) from exc


def parse_xml(data: bytes, fmt: str, what: str) -> ET.Element:
    """The XML in `data` as a tree (for small parts: metadata, relationships, one slide); entity declarations refused."""
    _EntityGuard(fmt, what).check(data)
    try:
        return ET.fromstring(data)
    except ET.ParseError as exc:
        raise MalformedXml(f"unreadable {fmt}: {xml_reason(what, exc)}", _DAMAGED_FIX) from exc


def local(tag: str) -> str:
    """An element's tag without its namespace: "{urn:…}p" → "p"."""
    return tag.rpartition("}")[2]
