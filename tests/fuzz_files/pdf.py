"""Hostile PDFs: flate bombs behind filter arrays and comments, LZW and run-length amplification, many pages sharing
one content stream, form XObjects that draw each other (a billion laughs of PDF), deep nesting, broken trees."""

import random
import zlib
from collections.abc import Iterable, Iterator

from tests.fuzz_files.common import corruptions, words, zlib_stream


def pdf(objects: list[bytes], root: int = 1, trailer_extra: bytes = b"", xref: bool = True) -> bytes:
    """A PDF of these object bodies (object n is objects[n-1]) with a cross-reference table."""
    out, offsets = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    at = len(out)
    if xref:
        out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1) + b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root %d 0 R %s>>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, root, trailer_extra, at)
    return bytes(out)


def stream(data: bytes, extra: bytes = b"", before: bytes = b"\n") -> bytes:
    """A stream object's body: its dictionary (with `extra` entries), `before` the keyword, the data."""
    return b"<< /Length %d %s>>%sstream\n%s\nendstream" % (len(data), extra, before, data)


FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def text_ops(rng: random.Random, lines: int = 12) -> bytes:
    """Content operators that show `lines` lines of words."""
    body = b"".join(b"BT /F1 11 Tf 72 %d Td (%s) Tj ET\n" % (760 - 14 * i, words(rng, 8).encode()) for i in range(lines))
    return body


def pages_doc(contents: list[int], extra_objects: list[bytes], resources: bytes = b"") -> bytes:
    """Catalog (1), Pages (2), font (3), then one page per entry of `contents` (the object number of its content
    stream), then `extra_objects` (numbered from 4 + len(contents))."""
    first_page = 4
    kids = b" ".join(b"%d 0 R" % (first_page + i) for i in range(len(contents)))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, len(contents)), FONT]
    for content in contents:
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> %s>> "
            b"/Contents %d 0 R >>" % (resources, content)
        )
    return pdf(objects + extra_objects)


def valid(rng: random.Random) -> bytes:
    """A few pages of text, some contents deflated: the base of the corruption generators."""
    n = rng.randint(1, 4)
    streams = []
    for _ in range(n):
        ops = text_ops(rng)
        streams.append(stream(zlib.compress(ops), b"/Filter /FlateDecode ") if rng.random() < 0.5 else stream(ops))
    return pages_doc([4 + n + i for i in range(n)], streams)


def one_page_with(content: bytes, resources: bytes = b"", extra: list[bytes] | None = None) -> bytes:
    """One page whose content stream object is `content` (object 5), then `extra` objects (6 on)."""
    return pages_doc([5], [content, *(extra or [])], resources)


def _bomb_size(rng: random.Random) -> int:
    return rng.choice((80, 120, 200)) << 20


def flate_bomb(rng: random.Random) -> bytes:
    """A plain /FlateDecode content stream of no-op operators far over the inflation limit."""
    return one_page_with(stream(zlib_stream(b"q Q\n", _bomb_size(rng)), b"/Filter /FlateDecode "))


def filter_array_bomb(rng: random.Random) -> bytes:
    """The bomb behind [/ASCIIHexDecode /FlateDecode] (or /AHx, or [/FlateDecode] alone, an array of one)."""
    data = zlib_stream(b"q Q\n", _bomb_size(rng))
    kind = rng.randrange(3)
    if kind == 0:
        return one_page_with(stream(data.hex().encode() + b">", b"/Filter [/ASCIIHexDecode /FlateDecode] "))
    if kind == 1:
        return one_page_with(stream(data.hex().encode() + b">", b"/Filter [/AHx /Fl] "))
    return one_page_with(stream(data, b"/Filter [/FlateDecode] "))


def comment_bomb(rng: random.Random) -> bytes:
    """The bomb with a %comment (or stream\\r, or other whitespace) between the dictionary and the stream data."""
    data = zlib_stream(b"q Q\n", _bomb_size(rng))
    before = rng.choice((b" % a comment\n", b"\n%%\n", b"\r\n%x\r\n"))
    return one_page_with(stream(data, b"/Filter /FlateDecode ", before))


def image_marker_bomb(rng: random.Random) -> bytes:
    """A content-stream bomb whose dictionary says /Subtype /Image inside a nested dictionary (or a string), which
    the inflation guard takes for an image it need not check."""
    data = zlib_stream(b"q Q\n", _bomb_size(rng))
    mark = rng.choice((b"/Info << /Subtype /Image >> ", b"/Note (/Subtype /Image) ", b"/X << /Type /EmbeddedFile >> "))
    return one_page_with(stream(data, b"/Filter /FlateDecode " + mark))


def double_flate_bomb(rng: random.Random) -> bytes:
    """[/FlateDecode /FlateDecode]: the outer layer inflates to a small zlib stream, the inner one to the bomb."""
    inner = zlib_stream(b"q Q\n", _bomb_size(rng) * 4)
    return one_page_with(stream(zlib.compress(inner, 9), b"/Filter [/FlateDecode /FlateDecode] "))


def packed(codes: Iterable[tuple[int, int]]) -> bytes:
    """(code, bit width) pairs packed most significant bit first, the last byte padded with zeros (as LZW writes)."""
    out, acc, nbits = bytearray(), 0, 0
    for code, width in codes:
        acc, nbits = (acc << width) | code, nbits + width
        while nbits >= 8:
            nbits -= 8
            out.append((acc >> nbits) & 0xFF)
        acc &= (1 << nbits) - 1
    if nbits:
        out.append((acc << (8 - nbits)) & 0xFF)
    return bytes(out)


def lzw(data_codes: int) -> bytes:
    """An LZW stream (PDF /LZWDecode, early change 1) that decodes to about data_codes²/2 zero bytes: codes 0, 258,
    259, … each one longer than the last (the table is reset every 3,800 codes)."""

    def codes() -> Iterator[tuple[int, int]]:
        width, code = 9, 258
        yield 256, width
        for _ in range(data_codes):
            if code >= 4094:
                yield 256, width
                width, code = 9, 258
            yield (0 if code == 258 else code - 1), width
            code += 1
            width = 9 if code < 512 else 10 if code < 1024 else 11 if code < 2048 else 12
        yield 257, width

    return packed(codes())


def lzw_bomb(rng: random.Random) -> bytes:
    """An /LZWDecode content stream (not zlib: unchecked) of zeros, ~2,000× its size."""
    return one_page_with(stream(lzw(rng.choice((40_000, 80_000, 160_000))), b"/Filter /LZWDecode "))


def runlength_bomb(rng: random.Random) -> bytes:
    """/RunLengthDecode: 2 bytes make 128, so a few MB of stream make hundreds."""
    runs = rng.choice((1, 2, 3)) << 20
    return one_page_with(stream(b"\x81 " * runs + b"\x80", b"/Filter /RunLengthDecode "))


def shared_stream_pages(rng: random.Random) -> bytes:
    """Many pages that all draw one content stream of no-op operators (checked once, parsed for every page)."""
    pages = rng.choice((2_000, 5_000, 20_000))
    size = rng.choice((4, 16, 40)) << 20
    return pages_doc([4 + pages] * pages, [stream(zlib_stream(b"q Q\n", size), b"/Filter /FlateDecode ")])


def shared_text_pages(rng: random.Random) -> bytes:
    """Many pages that all show one content stream of text: the text multiplies with the page count."""
    pages = rng.choice((1_000, 5_000, 20_000))
    ops = b"BT /F1 6 Tf 10 780 Td " + b"(%s) Tj T* " % words(rng, 40).encode() * 2_000 + b"ET"
    return pages_doc([4 + pages] * pages, [stream(zlib.compress(ops, 9), b"/Filter /FlateDecode ")])


def xobject_laughs(rng: random.Random) -> bytes:
    """Form XObjects each drawing the next one ten times, `levels` deep: the page draws 10**levels text snippets."""
    levels = rng.choice((5, 7, 9))
    first = 6  # objects 6.. are the forms; the page's content draws form 0
    extra = []
    for level in range(levels):
        if level == levels - 1:
            ops = b"BT /F1 9 Tf 10 10 Td (%s) Tj ET" % words(rng, 4).encode()
            res = b"<< /Font << /F1 3 0 R >> >>"
        else:
            ops = b"/X Do " * 10
            res = b"<< /XObject << /X %d 0 R >> >>" % (first + level + 1)
        extra.append(stream(ops, b"/Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources %s " % res))
    return one_page_with(stream(b"/X Do"), b"/XObject << /X 6 0 R >> ", extra)


def xobject_self(rng: random.Random) -> bytes:
    """A form XObject that draws itself (directly or through a second one)."""
    two = rng.random() < 0.5
    extra = [
        stream(
            b"BT /F1 9 Tf (loop) Tj ET /X Do",
            b"/Type /XObject /Subtype /Form /BBox [0 0 9 9] /Resources << /Font << /F1 3 0 R >> /XObject << /X %d 0 R >> >> " % (7 if two else 6),
        )
    ]
    if two:
        extra.append(stream(b"/X Do", b"/Type /XObject /Subtype /Form /BBox [0 0 9 9] /Resources << /XObject << /X 6 0 R >> >> "))
    return one_page_with(stream(b"/X Do"), b"/XObject << /X 6 0 R >> ", extra)


def deep_arrays(rng: random.Random) -> bytes:
    """A page dictionary holding arrays (or dictionaries) nested 10k to 1M deep."""
    depth = rng.choice((10_000, 100_000, 1_000_000))
    nest = b"[" * depth + b"]" * depth if rng.random() < 0.5 else b"<< /A " * depth + b">>" * depth
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Deep %s /Contents 4 0 R >>" % nest,
        stream(b"BT /F1 9 Tf (deep) Tj ET"),
    ]
    return pdf(objects)


def deep_page_tree(rng: random.Random) -> bytes:
    """A page tree of nested /Pages nodes 1k to 50k deep with one page at the bottom (or a cycle of them)."""
    depth = rng.choice((1_000, 10_000, 50_000))
    cycle = rng.random() < 0.3
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>"]
    for level in range(depth):
        number = 2 + level
        kid = 2 if cycle and level == depth - 1 else number + 1
        objects.append(b"<< /Type /Pages /Kids [%d 0 R] /Count 1 >>" % kid)
    objects.append(b"<< /Type /Page /MediaBox [0 0 612 792] /Contents %d 0 R /Resources << /Font << /F1 %d 0 R >> >> >>" % (depth + 3, depth + 4))
    objects += [stream(text_ops(rng, 2)), FONT]
    return pdf(objects)


def lying_count(rng: random.Random) -> bytes:
    """A page tree that says it holds 2**31-1 (or negative, or huge) pages but has one kid."""
    count = rng.choice((b"2147483647", b"-1", b"99999999999999999999", b"1e9"))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R 3 0 R 3 0 R] /Count %s >>" % count,
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        stream(text_ops(rng, 3)),
        FONT,
    ]
    return pdf(objects)


def xref_loop(rng: random.Random) -> bytes:
    """A file whose trailer's /Prev points at its own cross-reference table (or before the header, or far past)."""
    data = valid(rng)
    at = int(data.rsplit(b"startxref\n", 1)[1].split(b"\n")[0])
    prev = rng.choice((at, 0, 10**12, -5))
    return data.replace(b"trailer\n<< ", b"trailer\n<< /Prev %d " % prev)


def object_stream_bomb(rng: random.Random) -> bytes:
    """An object stream (/Type /ObjStm) whose flate data inflates past the limit."""
    body = zlib_stream(b"0 ", _bomb_size(rng))
    return one_page_with(stream(text_ops(rng, 2)), extra=[stream(body, b"/Type /ObjStm /N 1 /First 2 /Filter /FlateDecode ")])


def many_pages(rng: random.Random) -> bytes:
    """50k to 200k tiny distinct pages (each its own page object, one shared small content stream)."""
    pages = rng.choice((50_000, 100_000, 200_000))
    return pages_doc([4 + pages] * pages, [stream(text_ops(rng, 1))])


def huge_string(rng: random.Random) -> bytes:
    """One Tj of a 20–60 MB string (over the text limit only once shown) or a hex string."""
    size = rng.choice((20, 40, 60)) << 20
    ops = b"BT /F1 1 Tf 0 0 Td (" + b"ab " * (size // 3) + b") Tj ET"
    return one_page_with(stream(zlib.compress(ops, 9), b"/Filter /FlateDecode "))


PDF = {
    "valid": valid,
    "flate_bomb": flate_bomb,
    "filter_array_bomb": filter_array_bomb,
    "comment_bomb": comment_bomb,
    "image_marker_bomb": image_marker_bomb,
    "double_flate_bomb": double_flate_bomb,
    "lzw_bomb": lzw_bomb,
    "runlength_bomb": runlength_bomb,
    "object_stream_bomb": object_stream_bomb,
    "shared_stream_pages": shared_stream_pages,
    "shared_text_pages": shared_text_pages,
    "many_pages": many_pages,
    "huge_string": huge_string,
    "xobject_laughs": xobject_laughs,
    "xobject_self": xobject_self,
    "deep_arrays": deep_arrays,
    "deep_page_tree": deep_page_tree,
    "lying_count": lying_count,
    "xref_loop": xref_loop,
    **corruptions(valid),
}
