"""Bytes to clean text: BOM and encoding detection, binary rejection, invisible-character removal."""

import codecs
import re

from store.errors import ReadError

_BOMS: list[tuple[bytes, str]] = [
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
]
# C0/C1 controls except tab, newline, carriage return; zero-width and bidi marks; BOM; soft hyphen.
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]"
)
_SAMPLE = 64 * 1024
# Encodings tried, in order, when the bytes are not UTF-8 and carry no BOM.
_LEGACY = ("gb18030", "cp1252", "latin-1")


def _looks_binary(sample: bytes) -> str | None:
    """Return why `sample` (no BOM) looks like a binary file, or None."""
    if b"\x00" in sample:
        return "binary file (contains NUL bytes)"
    controls = sum(1 for b in sample if b < 32 and b not in (9, 10, 12, 13))
    if controls > max(8, 0.05 * len(sample)):
        return "binary file (too many control bytes)"
    return None


def _legacy_encoding(data: bytes) -> str:
    """Pick the legacy encoding for non-UTF-8 bytes: charset-normalizer among GB18030/cp1252/Latin-1."""
    from charset_normalizer import from_bytes

    best = from_bytes(data[: _SAMPLE * 4], cp_isolation=list(_LEGACY)).best()
    if best is not None:
        return best.encoding
    return "latin-1"


def decode(data: bytes) -> tuple[str, str]:
    """Decode file bytes to text and return (text, encoding name); raise ReadError for binary data."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            try:
                return clean(data[len(bom):].decode(name)), name + "-bom"
            except UnicodeDecodeError as exc:
                raise ReadError(f"undecodable {name} text after its BOM: {exc.reason}") from None
    reason = _looks_binary(data[:_SAMPLE])
    if reason:
        raise ReadError(reason, "exclude it with index.exclude if it should not be scanned")
    try:
        return clean(data.decode("utf-8")), "utf-8"
    except UnicodeDecodeError:
        pass
    encoding = _legacy_encoding(data)
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError:
        encoding, text = "latin-1", data.decode("latin-1")
    return clean(text), encoding


def sniff_encoding(head: bytes) -> tuple[str, int]:
    """(codec, bytes of BOM to skip) chosen from a file's first bytes, for decoding it a block at a time;
    ReadError for binary data."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name, len(bom)
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
