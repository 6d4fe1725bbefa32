"""The PDF reader's first line of defence, before pdfium sees a file: decompression bombs (whatever the filter chain or
the syntax around the `stream` keyword) and page contents that would be parsed over and over (one stream shared by
thousands of pages) are refused with the reason. The per-file read budget (read_budget.py) stands behind it."""

import base64
import re
import zlib
from collections import Counter
from collections.abc import Iterator

from lodex.indexer.errors import ReadError

# A stream: its keyword (not `endstream`), whatever precedes it (`>>`, a comment, spaces). Images and attached files
# are not decoded to read text; every other stream is decoded (Flate, ASCIIHex, ASCII85, chained in any order) and its
# output counted against limits.max_inflated_bytes, a piece at a time.
_STREAM = re.compile(rb"(?<![A-Za-z])stream[ \t\f\0]*(?:\r\n|\n|\r)?")
_OBJ = re.compile(rb"(\d+)\s+\d+\s+obj\b")
_NOT_INFLATED = re.compile(rb"/Subtype\s*/Image\b|/Type\s*/EmbeddedFile\b")
_COMMENT_OR_STRING = re.compile(rb"%[^\r\n]*|\((?:[^()\\]|\\.)*\)")
_OBJECT_STREAM = re.compile(rb"/Type\s*/ObjStm\b")
_HEX = re.compile(rb"[0-9A-Fa-f\s]{2,}>")
_A85 = re.compile(rb"(?:<~)?[!-uz\s]{5,}~>")
_REF = rb"(\d+)\s+\d+\s+R\b"
# Where a page names the streams it draws: its /Contents (one, or an array) and its form XObjects; each is parsed
# again for every page that names it.
_CONTENTS = re.compile(rb"/Contents\s*(?:" + _REF + rb"|\[([^\]]*)\])")
_XOBJECTS = re.compile(rb"/XObject\s*<<([^<>]*)>>")
_REFS = re.compile(_REF)
_PIECE = 1 << 20
_HEAD = 2048  # bytes before a stream keyword looked at for its dictionary (and its object number)
_MAX_LAYERS = 4  # filters chained on one stream that are followed (Flate over Flate over ASCIIHex …)
# Page contents parsed, all pages together, may be this many times limits.max_inflated_bytes: 2 GB at the default
# 50 MB, about 45 s of pdfium's parsing, within the default per-file budget (a large background drawing repeated on
# a thousand pages stays readable); past it, a file is refused before any page is parsed.
CONTENT_FACTOR = 40


def check_pdf(data: bytes, limit: int) -> None:
    """ReadError when a stream that reading text decodes (page contents, forms, fonts, object streams; not images nor
    attachments) would decode past `limit` bytes, or when the page contents to parse add up past CONTENT_FACTOR times
    `limit` (counting a stream again for every page that draws it)."""
    sizes: dict[int, int] = {}
    refs: Counter[int] = Counter(_drawn(data))
    for number, dictionary, body, length in _streams(data):
        if _NOT_INFLATED.search(dictionary):
            continue
        size = _decoded_size(body, limit, 0)
        if size > limit:
            raise ReadError(f"a compressed stream inflates past the limit of {limit / 1e6:,.1f} MB "
                            "(max_inflated_bytes)", "a decompression bomb, or raise the limit")
        if number is not None:
            sizes[number] = size or length
        if _OBJECT_STREAM.search(dictionary):  # objects packed in a stream: the page dictionaries may be there
            refs.update(_drawn(_decoded(body, limit)))
    total = sum(sizes.get(number, 0) * count for number, count in refs.items())
    if total > CONTENT_FACTOR * limit:
        raise ReadError(f"page contents add up to {total / 1e6:,.0f} MB to parse, more than {CONTENT_FACTOR} times the "
                        f"limit of {limit / 1e6:,.1f} MB (max_inflated_bytes): one stream drawn by many pages?",
                        "the file is hostile or broken: exclude it")


def _streams(data: bytes) -> Iterator[tuple[int | None, bytes, memoryview, int]]:
    """(object number or None, its dictionary without comments and strings, the bytes from the data on, the raw
    length up to `endstream`) of each stream."""
    view = memoryview(data)
    for match in _STREAM.finditer(data):
        head = data[max(0, match.start() - _HEAD):match.start()]
        objects = list(_OBJ.finditer(head))
        start = objects[-1].end() if objects else 0
        dictionary = _COMMENT_OR_STRING.sub(b" ", head[start:])
        end = data.find(b"endstream", match.end())
        length = (end if end >= 0 else len(data)) - match.end()
        yield (int(objects[-1].group(1)) if objects else None), dictionary, view[match.end():], length


def _drawn(data: bytes | memoryview) -> Iterator[int]:
    """Object numbers of the streams pages draw (their /Contents, their form XObjects), once per naming."""
    text = bytes(data)
    for match in _CONTENTS.finditer(text):
        if match.group(1):
            yield int(match.group(1))
        else:
            yield from (int(ref.group(1)) for ref in _REFS.finditer(match.group(2)))
    for match in _XOBJECTS.finditer(text):
        yield from (int(ref.group(1)) for ref in _REFS.finditer(match.group(1)))


def _decoded_size(stream: memoryview | bytes, limit: int, layer: int) -> int:
    """How many bytes `stream` decodes to, counted up to just past `limit`: inflated when it is zlib data, else
    decoded when it is ASCIIHex or ASCII85 text; an output that is itself encoded is decoded again."""
    size, head = _inflated_size(stream, limit)
    if size > limit or layer >= _MAX_LAYERS:
        return size
    if size:
        return max(size, _decoded_size(_decoded(stream, limit), limit, layer + 1)) if _encoded(head) else size
    text = _ascii_decoded(stream)
    return _decoded_size(text, limit, layer + 1) if text else 0


def _encoded(head: bytes) -> bool:
    """Whether decoded bytes starting with `head` look encoded again: zlib data, or ASCIIHex / ASCII85 text."""
    zlib_header = len(head) >= 2 and head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0
    return zlib_header or bool(_HEX.match(head[:64] + b">")) or head.lstrip().startswith(b"<~")


def _ascii_decoded(stream: memoryview | bytes) -> bytes:
    """The bytes an ASCIIHex or ASCII85 run at the start of `stream` stands for, b"" when it starts with neither."""
    start = bytes(stream[:64])
    try:
        if re.match(rb"[0-9A-Fa-f\s]{2}", start) and (run := _HEX.match(stream)):  # type: ignore[call-overload]
            digits = re.sub(rb"\s", b"", run.group()[:-1])
            return bytes.fromhex((digits + b"0" * (len(digits) % 2)).decode("ascii"))
        if re.match(rb"(?:<~)?[!-uz\s]{5}", start) and (run := _A85.match(stream)):  # type: ignore[call-overload]
            text = run.group()[:-2]
            return base64.a85decode(text[2:] if text.startswith(b"<~") else text, ignorechars=b" \t\r\n\f\0")
    except ValueError:
        pass
    return b""


def _decoded(stream: memoryview | bytes, limit: int) -> bytes:
    """`stream` inflated (zlib) or decoded (ASCII), at most `limit` bytes of it (already counted to fit)."""
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(bytes(stream[: limit + _PIECE]), limit)
    except zlib.error:
        return _ascii_decoded(stream)
    return out or _ascii_decoded(stream)


def _inflated_size(stream: memoryview | bytes, limit: int) -> tuple[int, bytes]:
    """How many bytes the zlib data `stream` starts with inflates to, counted up to just past `limit` (fed in pieces
    that grow from 16 KB, as most streams are small and what follows one is copied aside when it ends), and the
    first 64 of them."""
    inflater = zlib.decompressobj()
    size, at, piece, head = 0, 0, 1 << 14, b""
    while at < len(stream) and not inflater.eof and size <= limit:
        pending: bytes | memoryview = stream[at:at + piece]
        at, piece = at + piece, min(piece * 2, _PIECE)
        try:
            while pending and size <= limit and not inflater.eof:
                out = inflater.decompress(pending, _PIECE)
                head = head or out[:64]
                size += len(out)
                pending = inflater.unconsumed_tail
        except zlib.error:
            break
    return size, head
