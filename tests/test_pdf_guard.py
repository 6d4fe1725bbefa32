"""The PDF guard (indexer/pdf/pdf_guard.py, pdf_filters.py, pdf_draws.py) against what it once let through to pdfium:
LZW and RunLength amplification, a bomb behind them in a filter chain, an image marker nested in a content stream's
dictionary, form XObjects drawing forms; and the same filters and forms in ordinary files, which pdfium still reads."""

import random
import zlib
from collections.abc import Iterator

import pytest

from lodex.indexer.errors import ReadError
from lodex.indexer.pdf.pdf_draws import MAX_PAGE_DRAWS
from lodex.indexer.pdf.pdf_filters import lzw, run_length
from lodex.indexer.pdf.pdf_guard import check_pdf
from lodex.indexer.pdf.pdf_reader import read_pdf
from lodex.indexer.readers.document import ReadLimits
from tests.fuzz_files import Case
from tests.fuzz_files.pdf import lzw as lzw_zeros
from tests.fuzz_files.pdf import one_page_with, packed, stream

MB = 1 << 20
LIMITS = ReadLimits(max_inflated_bytes=4 * MB)
FONT = b"/Font << /F1 3 0 R >> "
FORM = b"/Type /XObject /Subtype /Form /BBox [0 0 612 792] "
INFLATES = "a compressed stream inflates past the limit"


def lzw_encoded(data: bytes, early: bool = True) -> bytes:
    """`data` LZW-encoded as PDF writes it (a clear code first, the table cleared when nearly full, codes widening one
    code early when `early`), by the textbook encoder: pdfium reading the result back is what checks it."""

    def codes() -> Iterator[tuple[int, int]]:
        table, width, word = {bytes((i,)): i for i in range(256)}, 9, b""
        yield 256, width
        for byte in data:
            longer = word + bytes((byte,))
            if longer in table:
                word = longer
                continue
            yield table[word], width
            if len(table) < 4000:
                table[longer] = len(table) + 2
            else:
                yield 256, width
                table = {bytes((i,)): i for i in range(256)}
            size = len(table) + 1 + early
            width = 9 if size < 512 else 10 if size < 1024 else 11 if size < 2048 else 12
            word = bytes((byte,))
        yield table[word], width
        yield 257, width

    return packed(codes())


def run_length_encoded(data: bytes) -> bytes:
    """`data` RunLength-encoded: runs of a repeated byte as repeats, the rest as literal copies."""
    out, at = bytearray(), 0
    while at < len(data):
        run = 1
        while at + run < len(data) and run < 128 and data[at + run] == data[at]:
            run += 1
        if run > 1:
            out += bytes((257 - run, data[at]))
        else:
            out += bytes((0, data[at]))
        at += run
    return bytes(out + b"\x80")


def text_page(rng: random.Random) -> tuple[bytes, list[str]]:
    """Content operators showing 60 lines of seeded words down a page, then thousands of path operators with seeded
    numbers (drawn nowhere: enough codes to clear an LZW table several times); and the words shown, in order."""
    vocabulary = "heron egret bittern stork crane ibis spoonbill".split()
    lines = [" ".join(rng.choice(vocabulary) for _ in range(6)) for _ in range(60)]
    shown = b"".join(b"BT /F1 10 Tf 72 %d Td (%s) Tj ET\n" % (760 - 12 * i, line.encode()) for i, line in enumerate(lines))
    paths = b"".join(b"%d %d m %d %d l n\n" % tuple(rng.randrange(10_000) for _ in range(4)) for _ in range(3_000))
    return shown + paths, " ".join(lines).split()


def refusal(data: bytes, limit: int = 4 * MB) -> str:
    with pytest.raises(ReadError) as caught:
        check_pdf(data, limit)
    return caught.value.message


@pytest.mark.parametrize("early", [True, False])
def test_lzw_content_is_decoded_as_pdfium_decodes_it(early: bool) -> None:
    content, words = text_page(random.Random(7))
    encoded = lzw_encoded(content, early)
    assert lzw(encoded, len(content), early) == content
    parameters = b"" if early else b"/DecodeParms << /EarlyChange 0 >> "
    data = one_page_with(stream(encoded, b"/Filter /LZWDecode " + parameters), FONT)
    assert read_pdf(data, LIMITS).text.split() == words


def test_run_length_content_is_decoded_and_read() -> None:
    content, words = text_page(random.Random(8))
    encoded = run_length_encoded(content + b" " * 1_000)
    assert run_length(encoded, 2 * len(content)) == content + b" " * 1_000
    data = one_page_with(stream(encoded, b"/Filter /RunLengthDecode "), FONT)
    assert read_pdf(data, LIMITS).text.split() == words


@pytest.mark.parametrize("filters", [b"/Filter /LZWDecode ", b"/Filter [/LZW] ", b"/Filter /LZWDecod#65 "])  # #65: "e" (found by review)
def test_lzw_bomb_refused_before_pdfium(filters: bytes) -> None:
    data = one_page_with(stream(lzw_zeros(20_000), filters))  # 28 kB that decode to 37 MB
    assert len(data) < 30_000
    assert refusal(data).startswith(INFLATES)
    check_pdf(data, 64 * MB)  # within a larger limit: let through


def test_run_length_bomb_refused_before_pdfium() -> None:
    data = one_page_with(stream(b"\x81 " * (100 << 10) + b"\x80", b"/Filter /RunLengthDecode "))  # 200 kB to 12.8 MB
    assert refusal(data).startswith(INFLATES)
    with pytest.raises(ReadError, match="^no text layer"):  # within a larger limit: pdfium parses 12.8 MB of spaces
        read_pdf(data, ReadLimits(max_inflated_bytes=16 * MB))


@pytest.mark.parametrize("chain", ["lzw_flate", "hex_lzw"])
def test_a_bomb_behind_lzw_in_a_filter_chain_is_refused(chain: str) -> None:
    packed = zlib.compress(b"q Q\n" * (2 * MB), 9)  # 8 MB of no-ops
    if chain == "lzw_flate":
        data = one_page_with(stream(lzw_encoded(packed), b"/Filter [/LZWDecode /FlateDecode] "))
    else:
        data = one_page_with(stream(lzw_encoded(b"q Q\n" * (2 * MB)).hex().encode() + b">", b"/Filter [/ASCIIHexDecode /LZWDecode] "))
    assert refusal(data).startswith(INFLATES)


@pytest.mark.parametrize("mark", [b"/Info << /Subtype /Image >> ", b"/X << /Type /EmbeddedFile >> "])
def test_an_image_marker_nested_in_a_content_streams_dictionary_does_not_hide_a_bomb(mark: bytes) -> None:
    packed = zlib.compress(b"q Q\n" * (2 * MB), 9)
    assert refusal(one_page_with(stream(packed, b"/Filter /FlateDecode " + mark))).startswith(INFLATES)


def test_an_image_is_not_inflated() -> None:
    pixels = zlib.compress(b"\0" * (8 * MB), 9)
    image = stream(
        pixels, b"/Type /XObject /Subtype /Image /Width 2048 /Height 4096 /ColorSpace /DeviceGray /BitsPerComponent 8 /Filter /FlateDecode "
    )
    check_pdf(one_page_with(stream(b"q 100 0 0 100 0 0 cm /Im Do Q"), b"/XObject << /Im 6 0 R >> ", [image]), 4 * MB)


def forms(fan_out: int, levels: int) -> bytes:
    """One page drawing form 6, each form drawing the next `fan_out` times (each time further along: rows, columns),
    `levels` deep; the last shows a word."""
    objects = []
    for level in range(levels):
        if level == levels - 1:
            objects.append(stream(b"BT /F1 9 Tf 10 740 Td (heron) Tj ET", FORM + b"/Resources << " + FONT + b">> "))
        else:
            step = b"1 0 0 1 %s cm /X Do " % (b"0 -12" if level % 2 else b"55 0")
            objects.append(stream(step * fan_out, FORM + b"/Resources << /XObject << /X %d 0 R >> >> " % (7 + level)))
    return one_page_with(stream(b"/X Do"), b"/XObject << /X 6 0 R >> ", objects)


@pytest.mark.parametrize(("fan_out", "levels"), [(10, 9), (10, 6), (MAX_PAGE_DRAWS + 1, 2)])
def test_forms_drawing_forms_past_the_bound_are_refused(fan_out: int, levels: int) -> None:
    reason = refusal(forms(fan_out, levels))
    assert reason.startswith("a page draws ") and f"more than {MAX_PAGE_DRAWS:,}" in reason
    assert f"{sum(fan_out**k for k in range(levels)):,} forms" in reason


def test_forms_drawn_a_bounded_number_of_times_are_read() -> None:
    assert read_pdf(forms(10, 3), LIMITS).text.split() == ["heron"] * 100


@pytest.mark.parametrize(
    "case",
    [Case("pdf", gen, seed) for gen in ("lzw_bomb", "runlength_bomb", "image_marker_bomb") for seed in range(3)]
    + [Case("pdf", "xobject_laughs", seed) for seed in (0, 1)],
    ids=lambda case: case.id,
)
def test_fuzz_files_the_guard_refuses(case: Case) -> None:
    """Generators that once relied on the per-file budget (tests/test_reader_fuzz.py), refused by the guard."""
    assert refusal(case.build(), ReadLimits().max_inflated_bytes).startswith((INFLATES, "a page draws "))


def test_pages_past_the_contents_bound_are_not_costed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pages' contents are summed page by page, and the file refused as soon as the sum passes the bound: a file
    whose pages each cost the guard work (found by review: unique resource names defeated its memo, so the work grew
    with pages times forms) is not costed to its last page first."""
    import lodex.indexer.pdf.pdf_draws as draws
    from tests.hostile_files import _pages, _stream, pdf

    shared = zlib.compress(b"q Q " * 2_048)  # 8 KB of contents, drawn by each of 400 pages
    objects = _pages([4], 5, 400)
    objects.insert(3, _stream(b"/Filter /FlateDecode", shared))
    costed: list[int] = []
    names = draws.Drawing._page_names
    monkeypatch.setattr(draws.Drawing, "_page_names", lambda self, text: costed.append(1) or names(self, text))
    limit = 64 * 1024  # the bound: 40 x 64 KB = 2.5 MB of contents, passed at the 321st page
    with pytest.raises(ReadError, match="^page contents add up to"):
        check_pdf(pdf(objects), limit)
    assert len(costed) <= 330, len(costed)
