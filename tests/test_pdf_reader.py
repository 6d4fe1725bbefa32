"""The PDF reader on files from real producers (tests/fixtures/pdf/, made by scripts/make_pdf_fixtures.py): reading
order, page offsets, running headers and footers, hyphenation, titles, each failure and the text limit."""

import json
import re
import threading
import zlib
from collections import Counter
from pathlib import Path

import pypdfium2 as pdfium
import pytest

from lodex.indexer.errors import ReadError
from lodex.indexer.pdf.pdf_reader import PDF_READER_VERSION, _document, read_pdf, real_title
from lodex.indexer.pdf.pdf_running import Running
from lodex.indexer.pdf.pdf_text import BROKEN, Line, Page, join_lines, mend, stream_page
from lodex.indexer.readers.document import Document, ReadLimits, page_of, section_of

FIXTURES = Path(__file__).parent / "fixtures" / "pdf"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))


def read(name: str, limits: ReadLimits | None = None) -> Document:
    return read_pdf((FIXTURES / name).read_bytes(), limits or ReadLimits())


def page_texts(doc: Document) -> list[str]:
    assert doc.pages is not None
    ends = doc.pages[1:] + [len(doc.text)]
    return [doc.text[start:end] for start, end in zip(doc.pages, ends)]


def raw_text(name: str) -> str:
    """pdfium's own text of every page, in content-stream order (what a reader without layout gives)."""
    pdf = pdfium.PdfDocument((FIXTURES / name).read_bytes())
    try:
        return "\n".join(pdf[i].get_textpage().get_text_range() for i in range(len(pdf)))
    finally:
        pdf.close()


def test_version_is_a_string() -> None:
    assert isinstance(PDF_READER_VERSION, str) and PDF_READER_VERSION


@pytest.mark.parametrize(
    "name",
    [
        "two_column.pdf",
        "two_column_rows.pdf",
        "soft_hyphens.pdf",
        "forty_pages.pdf",
        "rotated.pdf",
        "layout.pdf",
        "outline.pdf",
        "two_column_writer.pdf",
        "running_titles.pdf",
        "side_by_side.pdf",
    ],
)
def test_text_is_the_source_word_for_word(name: str) -> None:
    """Every page gives its source's words in order: columns one after the other, hyphenated words whole, no header,
    footer or page number."""
    doc = read(name)
    assert [t.split() for t in page_texts(doc)] == [p.split() for p in EXPECTED[name]["pages"]]


def test_css_columns_read_column_by_column() -> None:
    """A full-width heading over CSS columns: the heading, then the left column top to bottom, then the right one."""
    source = EXPECTED["two_column.pdf"]["pages"][0]
    doc = read("two_column.pdf")
    lines = doc.text.splitlines()
    assert lines[0] == "Studies of library use"
    assert all(len(line) < 60 for line in lines)  # no line runs across both columns
    assert doc.text.split() == source.split()


def test_writer_columns_read_column_by_column() -> None:
    """LibreOffice's two-column section under a heading across the page, hyphenated: the heading, then each column."""
    assert raw_text("two_column_writer.pdf").count("\ufffe") >= 5  # words hyphenated at line ends
    doc = read("two_column_writer.pdf")
    assert doc.text.splitlines()[0] == "Library services in two columns"
    assert doc.text.split() == EXPECTED["two_column_writer.pdf"]["pages"][0].split()
    assert doc.sections == [(0, "Library services in two columns")]  # Writer bookmarks its headings


def test_columns_found_by_position_when_the_stream_runs_across_them() -> None:
    """The producer wrote both columns' lines row by row; the left column's text still comes first, whole."""
    source = EXPECTED["two_column_rows.pdf"]["pages"][0]
    left, right = (column.split() for column in EXPECTED["two_column_rows.pdf"]["columns"])
    raw_first_line = raw_text("two_column_rows.pdf").splitlines()[0].split()
    cut = raw_first_line.index(right[0])
    # pdfium's first line holds the first row of both columns
    assert cut > 3 and raw_first_line[:3] == left[:3] and raw_first_line[cut : cut + 3] == right[:3]
    doc = read("two_column_rows.pdf")
    assert all(len(line) < 60 for line in doc.text.splitlines())
    assert doc.text.split() == source.split()


def test_tables_lists_and_stray_lines_read_row_by_row() -> None:
    """A table of short cells and a numbered list are not columns; a line under two columns whose gap falls in their
    gutter ("Short left line ... right part 12") is read whole after them, not split between them."""
    lines = read("layout.pdf").text.splitlines()
    assert all(line in lines for line in EXPECTED["layout.pdf"]["lines"])
    assert lines.index("Short left line right part 12") > lines.index("The end of the second column.")


def test_turned_text_read_along_its_lines() -> None:
    """Text turned a quarter either way reads line by line although pdfium's own order cuts it in bits; a page with
    level and turned text gives the level text, then the turned."""
    raw = raw_text("rotated.pdf")
    assert "Fishenden's" not in raw.split()  # pdfium's order: "Fishen\r\nden's"
    pages = page_texts(read("rotated.pdf"))
    source = EXPECTED["rotated.pdf"]["pages"]
    assert [p.split() for p in pages] == [s.split() for s in source]
    assert all(len(line) < 120 for line in pages[0].splitlines() + pages[1].splitlines())


def test_pdfium_order_when_the_boxes_cannot_say() -> None:
    page = stream_page("Running head 3\r\nfirst line hyphen\ufffeation goes on\r\nsecond line\r\n12")
    assert page == Page(["Running head 3"], f"first line hyphen{BROKEN}ation goes on\nsecond line", ["12"])


def test_planted_sentence_maps_to_page_37() -> None:
    doc = read("forty_pages.pdf")
    assert doc.pages is not None and len(doc.pages) == 40
    planted = EXPECTED["forty_pages.pdf"]["planted"]
    match = re.search(r"\s+".join(map(re.escape, planted.split())), doc.text)
    assert match is not None
    assert doc.pages[36] <= match.start() < match.end() <= doc.pages[37]
    assert planted.split()[0] in doc.text[doc.pages[36] :]
    assert page_of(doc.pages, match.start()) == 37 and page_of(doc.pages, match.end() - 1) == 37
    assert [n for n, t in enumerate(page_texts(doc), 1) if "Rottnest" in t] == [37]


def test_pages_start_after_blank_lines() -> None:
    doc = read("forty_pages.pdf")
    assert doc.pages is not None and doc.pages[0] == 0
    assert all(a < b for a, b in zip(doc.pages, doc.pages[1:]))
    assert all(doc.text[start - 2 : start] == "\n\n" and not doc.text[start].isspace() for start in doc.pages[1:])
    assert doc.extras["pages"] == "40"


def test_a_page_without_text_keeps_its_place() -> None:
    doc = _document([Page([], "first", []), Page([], "", []), Page([], "third", [])], "", [], ReadLimits())
    assert doc.text == "first\n\n\n\nthird" and doc.pages == [0, 7, 9]
    assert page_of(doc.pages, doc.text.index("third")) == 3
    assert doc.extras == {"pages": "3", "pages_without_text": "1"}


def test_running_header_and_footer_dropped() -> None:
    raw = raw_text("forty_pages.pdf")
    header = EXPECTED["forty_pages.pdf"]["header"]
    assert raw.count(header) == 40 and "Page 37 of 40" in raw  # the file has them on every page
    doc = read("forty_pages.pdf")
    assert header not in doc.text
    assert not re.search(r"Page\s+\d+\s+of\s+40", doc.text)


def test_hyphenated_line_ends_joined() -> None:
    """LibreOffice hyphenated 100+ line ends (pdfium marks them U+FFFE), Chromium broke soft hyphens with U+2010:
    every such word comes out whole (the page-for-page comparison above), none keeps a hyphen or a break."""
    assert raw_text("forty_pages.pdf").count("\ufffe") >= 100
    assert raw_text("soft_hyphens.pdf").count("\u2010\r\n") >= 5
    for name in ("forty_pages.pdf", "soft_hyphens.pdf"):
        text = read(name).text
        assert not re.search(r"\w[-\u2010\ufffe\u00ad]\s", text)
        assert "\ufffe" not in text and "\u2010" not in text


@pytest.mark.parametrize(
    ("lines", "text"),
    [
        (["a hyphen-", "ation here"], "a hyphenation here"),
        (["a hyphen\u2010", "ation"], "a hyphenation"),  # Chromium's soft hyphen at a line end
        (["pdfium's marker\ufffe", "ation"], "pdfium's markeration"),
        (["soft\u00ad", "Ware"], "softWare"),  # a soft hyphen joins whatever follows
        (["Anglo-", "Saxon"], "Anglo-Saxon"),  # upper case: a compound, its hyphen kept
        (["pages 10-", "12"], "pages 10-12"),
        (["H3-", "thymidine"], "H3-thymidine"),
        (["out-of-", "date"], "out-of-date"),  # already hyphenated: a compound
        (["out-", "of-date"], "out-of-date"),
        (["a list -", "next"], "a list -\nnext"),
        (["end of a para-", "graph"], "end of a paragraph"),
    ],
)
def test_hyphenation_rule(lines: list[str], text: str) -> None:
    assert mend(join_lines([Line(line, False) for line in lines]), Counter()) == text


def test_hyphen_kept_where_the_text_writes_the_compound() -> None:
    broken = join_lines([Line("a two-", False), Line("dimensional flow", False)])
    assert broken == f"a two{BROKEN}dimensional flow"
    assert mend(broken, Counter({"two-dimensional": 2})) == "a two-dimensional flow"
    assert mend(broken, Counter({"two-dimensional": 1, "twodimensional": 1})) == "a twodimensional flow"
    assert mend(broken, Counter()) == "a twodimensional flow"


def test_compounds_weighed_over_the_whole_text() -> None:
    pages = [Page([], "the two-dimensional case", []), Page([], f"a two{BROKEN}dimensional and hyphen{BROKEN}ation", [])]
    text = _document(pages, "", [], ReadLimits()).text
    assert text == "the two-dimensional case\n\na two-dimensional and hyphenation"


def test_hyphen_kept_before_a_paragraph() -> None:
    assert join_lines([Line("an item-", False), Line("next", True)]) == "an item-\n\nnext"


def test_side_by_side_short_lines_read_block_by_block() -> None:
    """Two blocks of two-word lines side by side (code listings), written one after the other: the left block, then
    the right one, though their lines are short like a table's cells."""
    left, right = EXPECTED["side_by_side.pdf"]["columns"]
    lines = read("side_by_side.pdf").text.splitlines()
    assert " ".join(lines[:12]).split() == left.split() and " ".join(lines[12:24]).split() == right.split()


def test_heading_of_two_lines_made_whole() -> None:
    """A heading in larger type, hyphenated: its line spacing reads as a paragraph's gap, the word is still one."""
    lines = [Line("5 Saving and restoring verbatim text and environ-", False), Line("ments", True), Line("The macros", True)]
    assert join_lines(lines) == f"5 Saving and restoring verbatim text and environ{BROKEN}ments\n\nThe macros"


def test_word_broken_into_a_set_apart_last_paragraph_made_whole() -> None:
    """A page's last two lines (a short paragraph, set apart like a footer) go on with a word its body broke, and a
    heading set apart at the top breaks a word in two: both made whole, and the page offsets still exact."""
    pages = [
        Page(["A long heading of the chapter about inter-", "action"], "body text here.", ["that provides ways to in-", "teract with plots."]),
        Page([], "Second page text.", ["- 2 -"]),
    ]
    doc = _document(pages, "", [], ReadLimits())
    assert doc.text.startswith("A long heading of the chapter about interaction\nbody text here.")
    assert "ways to interact with plots." in doc.text
    assert doc.pages is not None and doc.text[doc.pages[1] :].startswith("Second page text.")


def test_running_titles_that_change_are_dropped() -> None:
    """Headers whose wording changes (a chapter title and the folio, on alternate sides) and a folio-only footer go
    on every page; a numbered heading at a page's top whose number happens to match stays."""

    def page(index: int, head: str, body: str = "text") -> Page:
        return Page([head], f"{body} {index}", [str(index + 1)])

    titles = ["Getting started", "Getting started", "Evaluation", "Evaluation", "Retrieval", "Retrieval"]
    pages = [page(i, f"Chapter {i // 2 + 1}: {t} {i + 1}" if i % 2 == 0 else f"{i + 1} {i // 2 + 1}.{i} {t.upper()}") for i, t in enumerate(titles)]
    running = Running(pages)
    assert all(running.is_running(i, p.head[0], True) and running.is_running(i, p.tail[0], False) for i, p in enumerate(pages))
    assert not running.is_running(2, "Results of the study", True)
    few = [Page([f"{i + 1} {name}"], "text", []) for i, name in enumerate(["Introduction", "Methods", "Results"])]
    assert not any(Running(few).is_running(i, p.head[0], True) for i, p in enumerate(few))


def test_sections_from_the_outline() -> None:
    """Each bookmark starts a section where its heading stands in the text, with the path of headings above it."""
    doc = read("outline.pdf")
    expected = EXPECTED["outline.pdf"]["sections"]
    assert doc.sections is not None and [path for _, path in doc.sections] == [s["path"] for s in expected]
    for (offset, _), section in zip(doc.sections, expected):
        assert doc.text.startswith(section["heading"], offset)
        assert page_of(doc.pages, offset) == section["page"]
        assert section_of(doc.sections, doc.text.index(section["first_words"])) == section["path"]


def test_no_outline_no_sections() -> None:
    assert read("forty_pages.pdf").sections is None


def test_titles() -> None:
    assert read("forty_pages.pdf").title == "Library and information science abstracts"
    assert read("two_column.pdf").title == "Studies of library use in two columns"
    assert read("two_column_rows.pdf").title == ""  # Chromium recorded the file name, two_column_rows.html


@pytest.mark.parametrize(
    ("title", "real"),
    [
        ("  A   study of\nlibraries ", "A study of libraries"),
        ("Microsoft Word - Annual report 2020", "Annual report 2020"),
        ("Microsoft Word - report.docx", ""),
        ("untitled", ""),
        ("Untitled Document", ""),
        ("", ""),
        ("   ", ""),
        ("1234", ""),
        ("report_final.pdf", ""),
        ("C:\\docs\\report.pdf", ""),
        ("/home/me/x", ""),
        ("https://example.org/a", ""),
        ("x" * 400, ""),
        ("TCP/IP networks", "TCP/IP networks"),
        ("docs/2020/report", ""),
        ("Abstract:", "Abstract:"),
    ],
)
def test_real_title(title: str, real: str) -> None:
    assert real_title(title) == real


def test_no_text_layer() -> None:
    with pytest.raises(ReadError) as exc:
        read("scanned.pdf")
    assert exc.value.message.startswith("no text layer (scanned PDF)")


def test_encrypted() -> None:
    with pytest.raises(ReadError) as exc:
        read("encrypted.pdf")
    assert exc.value.message.startswith("encrypted")


def test_restrictions_without_a_password_are_read() -> None:
    assert read("owner_only.pdf").text == read("two_column.pdf").text


@pytest.mark.parametrize("data", [(FIXTURES / "truncated.pdf").read_bytes(), b"", b"not a PDF at all", b"%PDF-1.7\n1 0 obj <<>> endobj\n"])
def test_corrupt_or_truncated(data: bytes) -> None:
    with pytest.raises(ReadError) as exc:
        read_pdf(data, ReadLimits())
    assert exc.value.message.startswith("unreadable PDF: ")
    assert len(exc.value.message) > len("unreadable PDF: ")  # with the parser's message


def test_text_limit() -> None:
    size = len(read("forty_pages.pdf").text)
    assert read("forty_pages.pdf", ReadLimits(max_text_chars=size)).text
    with pytest.raises(ReadError) as exc:
        read("forty_pages.pdf", ReadLimits(max_text_chars=size - 1))
    assert "limit" in exc.value.message and f"{size - 1:,}" in exc.value.message
    with pytest.raises(ReadError):
        read("forty_pages.pdf", ReadLimits(max_text_chars=1_000))  # stops early, on the body of the first pages


def bomb(inflated: int, pad: int = 0) -> bytes:
    """A one-page PDF whose content stream, a few kB compressed, inflates to `inflated` bytes of no-op operators (its
    dictionary padded with `pad` bytes)."""
    stream = zlib.compress(b"q Q\n" * (inflated // 4), 9)
    return one_page_pdf(b"", b"<< /Filter /FlateDecode /Pad (%s) /Length %d >>\nstream\n%s\nendstream" % (b"x" * pad, len(stream), stream))


def one_page_pdf(resources: bytes, contents: bytes, *more: bytes) -> bytes:
    """A one-page PDF written by hand: the page's resources dictionary (b"" for none), its content stream object
    (object 4) and further objects (5 on)."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792]%s /Contents 4 0 R >>" % (b" /Resources " + resources if resources else b""),
        contents,
        *more,
    ]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def kerned_lines(
    descent: int,
    lines: tuple[str, ...] = ("all we saw was a gun on our raw sea", "we ran up as new rain came over us", "it was pure joy on a warm summer eve"),
) -> bytes:
    """Lines of Times-Roman as pdfTeX writes expanded text (each word a string of a TJ array with kerning between,
    the line scaled horizontally), 11 pt on 13.5 pt, its font descriptor giving /Ascent 467 and `descent`."""
    stream = "\n".join(
        f"BT /F1 11 Tf {100 + 3 * n} Tz 72 {700 - 13.5 * n} Td ["
        + " ".join(f"({word}) -{250 + 20 * i}" for i, word in enumerate(line.split()))
        + "] TJ ET"
        for n, line in enumerate(lines)
    ).encode()
    font = b"<< /Type /Font /Subtype /Type1 /BaseFont /Times-Roman /FirstChar 32 /LastChar 126 /Widths [%s] /FontDescriptor 6 0 R >>" % b" ".join(
        [b"500"] * 95
    )
    descriptor = (
        b"<< /Type /FontDescriptor /FontName /Times-Roman /Flags 34 /FontBBox [-168 -218 1000 898]"
        b" /Ascent 467 /Descent %d /CapHeight 662 /ItalicAngle 0 /StemV 84 >>" % descent
    )
    return one_page_pdf(b"<< /Font << /F1 5 0 R >> >>", b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream), font, descriptor)


@pytest.mark.parametrize("descent", [0, -217])
def test_lines_kept_whole_where_the_font_gives_no_descent(descent: int) -> None:
    """A font descriptor without a descent (pdfTeX's for TeX Gyre Pagella: /Ascent 467 /Descent 0) leaves pdfium's
    loose boxes the glyphs' own, so a word opening with a descender ("gun", "pure") sits lower than its line's other
    words; lines are still read whole, as they stand in pdfium's own text (issue 39: pdftex-a.pdf)."""
    data = kerned_lines(descent)
    assert len(data) < 2_000
    pdf = pdfium.PdfDocument(data)
    try:
        raw = pdf[0].get_textpage().get_text_range().split("\r\n")
    finally:
        pdf.close()
    assert read_pdf(data, ReadLimits()).text.split("\n") == raw


def test_no_paragraph_between_lines_where_the_font_gives_no_descent() -> None:
    """With that font the boxes are the glyphs': a line of tall letters above one of short letters leaves a blank
    band like a paragraph's between them (in narrow columns a line-end hyphen before it was kept: "docu-" + "ment").
    Words get line boxes from their baselines instead: one paragraph."""
    lines = (
        "as new rain came on us in the hall",
        "all the tall hats had it at the hall",
        "on a cure eve we ran over us",
        "as new rain came on us in the hall",
        "we saw a raw sea on our own",
        "it was the last of the tall hats",
    )
    assert read_pdf(kerned_lines(0, lines), ReadLimits()).text == "\n".join(lines)


def test_columns_under_a_title_that_covers_a_gutter() -> None:
    """A title across the page (under a running head) above three columns, covering the gap between the first two but
    not the second (so it joins their block, and is set apart from it by the blank band under it): the columns' gaps
    are found again without the title, and the first two columns read one after the other, not line across line
    (issue 39: pdftex-a.pdf's GNU Free Documentation License in seven columns)."""
    title = "The title of this page runs across the first two columns here"
    columns = [[f"column {c} line {n} words" for n in range(1, 7)] for c in "abc"]
    lines = ["BT /F1 10 Tf 280 780 Td (Running head) Tj ET", f"BT /F1 10 Tf 72 740 Td ({title}) Tj ET"]
    for x, column in zip((72, 250, 428), columns):  # written column by column, as TeX does
        lines += [f"BT /F1 10 Tf {x} {700 - 12 * n} Td ({line}) Tj ET" for n, line in enumerate(column)]
    stream = "\n".join(lines).encode()
    data = one_page_pdf(
        b"<< /Font << /F1 5 0 R >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    )
    assert read_pdf(data, ReadLimits()).text.split("\n") == ["Running head", title, "", *columns[0], *columns[1], *columns[2]]


@pytest.mark.parametrize("pad", [0, 5_000])
def test_decompression_bomb_refused_before_it_is_inflated(pad: int) -> None:
    data = bomb(8 * 2**20, pad)
    assert len(data) < 50_000
    with pytest.raises(ReadError) as exc:
        read_pdf(data, ReadLimits(max_inflated_bytes=4 * 2**20))
    assert "inflates past the limit" in exc.value.message
    with pytest.raises(ReadError) as exc:  # within the limit: parsed (and found to hold no text)
        read_pdf(data, ReadLimits(max_inflated_bytes=16 * 2**20))
    assert exc.value.message.startswith("no text layer")


def test_inflation_limit_counts_real_streams() -> None:
    assert read("forty_pages.pdf", ReadLimits(max_inflated_bytes=1 * 2**20)).text
    with pytest.raises(ReadError):
        read("forty_pages.pdf", ReadLimits(max_inflated_bytes=1_000))


def test_same_text_from_threads() -> None:
    """pdfium is not thread-safe: the reader serializes its calls, so concurrent reads give the same text."""
    expected = {name: read(name).text for name in ("forty_pages.pdf", "two_column_rows.pdf")}
    results: list[bool] = []

    def work(name: str) -> None:
        for _ in range(3):
            results.append(read(name).text == expected[name])

    threads = [threading.Thread(target=work, args=(name,)) for name in list(expected) * 2]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results and all(results)
