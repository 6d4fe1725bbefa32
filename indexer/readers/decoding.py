"""Bytes to clean text: BOM and encoding detection, binary rejection, invisible-character removal (with a map from
clean offsets back to the decoded text's)."""

import codecs
import re
from array import array
from bisect import bisect_left, bisect_right

from lodex.indexer.errors import ReadError

_BOMS: list[tuple[bytes, str]] = [
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
]
# C0/C1 controls except tab, newline, carriage return; zero-width and bidi marks; BOM; soft hyphen.
_INVISIBLE_CLASS = "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]"
_INVISIBLE = re.compile(_INVISIBLE_CLASS)
_REMOVED = re.compile(f"(?:{_INVISIBLE_CLASS}|\r(?=\n))+")  # what cleaning deletes (a CRLF's CR among it)
_SAMPLE = 64 * 1024
# Encodings tried, in order, when the bytes are not UTF-8 and carry no BOM.
_LEGACY = ("gb18030", "cp1252", "latin-1")


def _utf16_without_bom(sample: bytes) -> str | None:
    """'utf-16-le' or 'utf-16-be' when `sample` reads as mostly-Latin UTF-16 text without a BOM (every other byte NUL)."""
    if len(sample) < 4:
        return None
    even, odd = sample[0::2], sample[1::2]

    def share(part: bytes) -> float:
        return part.count(0) / len(part)

    name = "utf-16-le" if share(odd) > 0.5 and share(even) < 0.02 else "utf-16-be" if share(even) > 0.5 and share(odd) < 0.02 else None
    if name is None:
        return None
    try:
        text = sample[: len(sample) // 2 * 2].decode(name)
    except UnicodeDecodeError:
        return None
    controls = sum(1 for c in text if ord(c) < 32 and c not in "\t\n\x0c\r")
    return name if controls <= max(8, 0.05 * len(text)) else None


def _looks_binary(sample: bytes) -> str | None:
    """Return why `sample` (no BOM) looks like a binary file, or None."""
    if b"\x00" in sample:
        return "binary file (contains NUL bytes)"
    controls = sum(1 for b in sample if b < 32 and b not in (9, 10, 12, 13))
    if controls > max(8, 0.05 * len(sample)):
        return "binary file (too many control bytes)"
    return None


def looks_binary(sample: bytes) -> bool:
    """Whether a file starting with `sample` is binary data rather than text in an encoding lodex reads."""
    if any(sample.startswith(bom) for bom, _ in _BOMS) or _utf16_without_bom(sample):
        return False
    return _looks_binary(sample) is not None


def _legacy_encoding(data: bytes) -> str:
    """Pick the legacy encoding for non-UTF-8 bytes: charset-normalizer among GB18030/cp1252/Latin-1."""
    from charset_normalizer import from_bytes

    best = from_bytes(data[: _SAMPLE * 4], cp_isolation=list(_LEGACY)).best()
    if best is not None:
        return best.encoding
    return "latin-1"


def decode(data: bytes) -> tuple[str, str]:
    """Decode file bytes to clean text and return (text, encoding name); raise ReadError for binary data."""
    text, encoding = decode_source(data)
    return clean(text), encoding


def decode_source(data: bytes) -> tuple[str, str]:
    """Decode file bytes to the file's own text (a BOM dropped, nothing else changed) and return (text, encoding
    name); raise ReadError for binary data."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            try:
                return data[len(bom) :].decode(name), name + "-bom"
            except UnicodeDecodeError as exc:
                raise ReadError(f"undecodable {name} text after its BOM: {exc.reason}") from exc
    utf16 = _utf16_without_bom(data[:_SAMPLE])
    if utf16:
        try:
            return data.decode(utf16), utf16
        except UnicodeDecodeError as exc:
            raise ReadError(f"undecodable {utf16} text (no BOM): {exc.reason}", "save it as UTF-8") from exc
    reason = _looks_binary(data[:_SAMPLE])
    if reason:
        raise ReadError(reason, "exclude it with index.exclude if it should not be scanned")
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    encoding = _legacy_encoding(data)
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError:
        encoding, text = "latin-1", data.decode("latin-1")
    return text, encoding


def sniff_encoding(head: bytes) -> tuple[str, int]:
    """(codec, bytes of BOM to skip) chosen from a file's first bytes, for decoding it a block at a time;
    ReadError for binary data."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name, len(bom)
    utf16 = _utf16_without_bom(head[:_SAMPLE])
    if utf16:
        return utf16, 0
    reason = _looks_binary(head[:_SAMPLE])
    if reason:
        raise ReadError(reason, "exclude it with index.exclude if it should not be scanned")
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
        return "utf-8", 0
    except UnicodeDecodeError:
        return _legacy_encoding(head), 0


def clean(text: str) -> str:
    """Normalize newlines and remove invisible control characters."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _INVISIBLE.sub("", text)


class OffsetMap:
    """Offsets in a cleaned text back to offsets in the text it was cleaned from: one entry per run of removed
    characters (none for a text that had nothing to remove), so it costs nothing on ordinary files."""

    def __init__(self) -> None:
        self._at = array("q")  # clean offset before which a run was removed
        self._removed = array("q")  # characters removed up to and including that run
        self._base = 0  # characters removed in runs dropped by trim()

    def add(self, clean_at: int, count: int) -> None:
        """Note `count` characters removed just before clean offset `clean_at` (offsets only grow)."""
        total = (self._removed[-1] if self._removed else self._base) + count
        if self._at and self._at[-1] == clean_at:
            self._removed[-1] = total
        else:
            self._at.append(clean_at)
            self._removed.append(total)

    def _before(self, index: int) -> int:
        return self._removed[index - 1] if index > 0 else self._base

    def start(self, clean: int) -> int:
        """Source offset of the character at clean offset `clean`."""
        return clean + self._before(bisect_right(self._at, clean))

    def end(self, clean: int) -> int:
        """Source offset just after the character before clean offset `clean` (an exclusive end)."""
        return clean + self._before(bisect_left(self._at, clean))

    def trim(self, clean: int) -> None:
        """Forget runs before clean offset `clean` (no offset below it is asked for again)."""
        cut = bisect_left(self._at, clean)
        if cut:
            self._base = self._removed[cut - 1]
            del self._at[:cut]
            del self._removed[:cut]


def clean_mapped(text: str, offsets: OffsetMap, clean_base: int = 0) -> str:
    """clean(text), noting in `offsets` what it removed (`clean_base`: where this text starts in the clean whole)."""
    pieces: list[str] = []
    last = removed = 0
    for match in _REMOVED.finditer(text):
        pieces.append(text[last : match.start()])
        offsets.add(clean_base + match.start() - removed, match.end() - match.start())
        removed += match.end() - match.start()
        last = match.end()
    if not pieces:
        return text.replace("\r", "\n")
    pieces.append(text[last:])
    return "".join(pieces).replace("\r", "\n")
