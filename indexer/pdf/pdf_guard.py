"""The PDF reader's first line of defence, before pdfium sees a file: decompression bombs (whatever the filter chain or
the syntax around the `stream` keyword) and page contents that would be parsed over and over (one stream shared by
thousands of pages, forms drawing forms) are refused with the reason. The per-file read budget (read_budget.py) stands
behind it."""

import base64
import re
import zlib
from collections.abc import Iterator

from lodex.indexer.errors import ReadError
from lodex.indexer.pdf.pdf_draws import Drawing, count_draws
from lodex.indexer.pdf.pdf_filters import SNIFFED, decode_named, named_filters

# A stream: its keyword (not `endstream`), whatever precedes it (`>>`, a comment, spaces). Images and attached files
# are not decoded to read text; every other stream is decoded (Flate, ASCIIHex, ASCII85, chained in any order, and the
# LZW and RunLength its dictionary names) and its output counted against limits.max_inflated_bytes, a piece at a time.
_STREAM = re.compile(rb"(?<![A-Za-z])stream[ \t\f\0]*(?:\r\n|\n|\r)?")
_OBJ = re.compile(rb"(\d+)\s+\d+\s+obj\b")
_NOT_INFLATED = re.compile(rb"/Subtype\s*/Image\b|/Type\s*/EmbeddedFile\b")
_COMMENT_OR_STRING = re.compile(rb"%[^\r\n]*|\((?:[^()\\]|\\.)*\)")
_OBJECT_STREAM = re.compile(rb"/Type\s*/ObjStm\b")
_LENGTH = re.compile(rb"/Length\s+(\d+)(?!\s+\d+\s+R)")
_HEX = re.compile(rb"[0-9A-Fa-f\s]{2,}>")
_A85 = re.compile(rb"(?:<~)?[!-uz\s]{5,}~>")
_PIECE = 1 << 20
_HEAD = 2048  # bytes before a stream keyword looked at for its dictionary (and its object number)
_MAX_LAYERS = 4  # filters chained on one stream that are followed (Flate over Flate over ASCIIHex …)


def check_pdf(data: bytes, limit: int) -> None:
    """ReadError when a stream that reading text decodes (page contents, forms, fonts, object streams; not images nor
    attachments) would decode past `limit` bytes, or when the pages would parse too much (pdf_draws.py: a stream again
    for every page or form that draws it)."""
    drawing = Drawing()
    bodies: dict[int, tuple[memoryview, int, tuple[str, ...]]] = {}
    for number, dictionary, body, length in _streams(data):
        if _not_inflated(dictionary, number is not None):
            continue
        named = named_filters(dictionary)
        if not SNIFFED.issuperset(named):  # LZW and RunLength run to the end of the stream's data, not of the file
            declared = _LENGTH.search(dictionary)
            body = body[: max(length, int(declared.group(1)) if declared else 0)]
        size = _decoded_size(body, limit, 0, named)
        if size > limit:
            raise ReadError(
                f"a compressed stream inflates past the limit of {limit / 1e6:,.1f} MB (max_inflated_bytes)",
                "a decompression bomb, or raise the limit",
            )
        if number is not None:
            drawing.sizes[number] = size or length
            bodies[number] = body, length, named
        if _OBJECT_STREAM.search(dictionary):  # objects packed in a stream: the page dictionaries may be there
            drawing.add_object_stream(dictionary, _content(body, length, limit, named))
    drawing.add_objects(data)
    for number in drawing.drawn() & bodies.keys():
        drawing.draws[number] = count_draws(_content(*bodies[number][:2], limit, bodies[number][2]))
    drawing.check(limit)


def _not_inflated(dictionary: bytes, whole: bool) -> bool:
    """Whether a stream is an image or an attached file, by a key of its own dictionary, not of one nested in it (when
    the dictionary is `whole`: its object's header was found, so the nesting can be counted)."""
    for match in _NOT_INFLATED.finditer(dictionary):
        before = dictionary[: match.start()]
        if not whole or before.count(b"<<") - before.count(b">>") == 1:
            return True
    return False


def _streams(data: bytes) -> Iterator[tuple[int | None, bytes, memoryview, int]]:
    """(object number or None, its dictionary without comments and strings, the bytes from the data on, the raw
    length up to `endstream`) of each stream."""
    view = memoryview(data)
    for match in _STREAM.finditer(data):
        head = data[max(0, match.start() - _HEAD) : match.start()]
        objects = list(_OBJ.finditer(head))
        start = objects[-1].end() if objects else 0
        dictionary = _COMMENT_OR_STRING.sub(b" ", head[start:])
        end = data.find(b"endstream", match.end())
        length = (end if end >= 0 else len(data)) - match.end()
        yield (int(objects[-1].group(1)) if objects else None), dictionary, view[match.end() :], length


def _decoded_size(stream: memoryview | bytes, limit: int, layer: int, named: tuple[str, ...]) -> int:
    """How many bytes `stream` decodes to, counted up to just past `limit`: by the LZW or RunLength filter when the
    dictionary names one next (`named`, pdf_filters.py), else inflated when it is zlib data, else decoded when it is
    ASCIIHex or ASCII85 text; an output that is itself encoded, or named to be, is decoded again."""
    rest = named[1:]
    if named and named[0] not in SNIFFED:
        out = decode_named(named[0], stream, limit)
        if len(out) > limit or layer >= _MAX_LAYERS:
            return len(out)
        return max(len(out), _decoded_size(out, limit, layer + 1, rest))
    size, head = _inflated_size(stream, limit)
    if size > limit or layer >= _MAX_LAYERS:
        return size
    if size:
        again = _encoded(head) or rest
        return max(size, _decoded_size(_decoded(stream, limit), limit, layer + 1, rest)) if again else size
    text = _ascii_decoded(stream)
    return _decoded_size(text, limit, layer + 1, rest) if text else 0


def _content(stream: memoryview, length: int, limit: int, named: tuple[str, ...]) -> bytes:
    """What `stream` decodes to through all its layers (at most `limit` bytes of each, already counted to fit); its
    raw data when it is not encoded."""
    data: memoryview | bytes = stream
    for _ in range(_MAX_LAYERS + 1):
        out = decode_named(named[0], data, limit) if named and named[0] not in SNIFFED else _decoded(data, limit)
        if not out:
            break
        data, named = out, named[1:]
    return bytes(stream[:length]) if data is stream else bytes(data)


def _encoded(head: bytes) -> bool:
    """Whether decoded bytes starting with `head` look encoded again: zlib data, or ASCIIHex / ASCII85 text."""
    zlib_header = len(head) >= 2 and head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0
    return zlib_header or bool(_HEX.match(head[:64] + b">")) or head.lstrip().startswith(b"<~")


def _ascii_decoded(stream: memoryview | bytes) -> bytes:
    """The bytes an ASCIIHex or ASCII85 run at the start of `stream` stands for, b"" when it starts with neither."""
    start = bytes(stream[:64])
    try:
        if re.match(rb"[0-9A-Fa-f\s]{2}", start) and (run := _HEX.match(stream)):
            digits = re.sub(rb"\s", b"", run.group()[:-1])
            return bytes.fromhex((digits + b"0" * (len(digits) % 2)).decode("ascii"))
        if re.match(rb"(?:<~)?[!-uz\s]{5}", start) and (run := _A85.match(stream)):
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
        pending: bytes | memoryview = stream[at : at + piece]
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
