"""The readers' structural guards (issue 55): shapes that once took minutes or GBs under the per-file budget (tables
nested a million deep, a 40 MB attribute, a nav nested 100k deep, 200k MIME parts, spaces repeated past the text
limit, a paragraph or a presentation of millions of elements) are refused while parsing, with a plain reason; real
documents just inside each bound still read the same."""

import pytest

from lodex.indexer.errors import ReadError
from lodex.indexer.readers import epub_reader
from lodex.indexer.readers.containers import MAX_TAG_BYTES
from lodex.indexer.readers.document import BinaryReader, ReadLimits
from lodex.indexer.readers.epub_reader import read_epub
from lodex.indexer.readers.html_reader import MAX_HTML_DEPTH
from lodex.indexer.readers.mail_reader import MAX_MIME_PARTS, read_eml
from lodex.indexer.readers.odf_readers import MAX_SLIDES, read_odp, read_odt
from lodex.indexer.readers.office_common import MAX_PARAGRAPH_ELEMENTS, MAX_XML_DEPTH
from lodex.indexer.readers.ooxml_readers import read_docx
from tests.fuzz_files.common import zip_with_bomb
from tests.fuzz_files.odf_epub import NS, epub, odf, xhtml
from tests.fuzz_files.ooxml import DECL, W, docx, para
from tests.fuzz_files.text_formats import mail

LIMITS = ReadLimits()
NAV = '<nav epub:type="toc" xmlns:epub="http://www.idpf.org/2007/ops">{}</nav>'


def refused(reader: BinaryReader, data: bytes, limits: ReadLimits = LIMITS) -> str:
    """The reason `reader` refuses `data` with (the test fails when it reads it)."""
    with pytest.raises(ReadError) as info:
        reader(data, limits)
    return info.value.message


def nested_tables(depth: int) -> bytes:
    return docx("<w:tbl><w:tr><w:tc>" * depth + para("bottom cell") + "</w:tc></w:tr></w:tbl>" * depth)


def test_tables_nested_past_the_depth_bound_are_refused_while_parsing() -> None:
    reason = refused(read_docx, nested_tables(MAX_XML_DEPTH // 3 + 1))  # three elements a level
    assert f"nests elements deeper than {MAX_XML_DEPTH:,} levels" in reason, reason
    assert read_docx(nested_tables(30), LIMITS).text == "bottom cell"  # a real nesting reads as before


@pytest.mark.parametrize("head, tail", [(b'<w:t a="', b'">x</w:t>'), (b"<w:t><w:", b"/></w:t>")], ids=["attribute", "element name"])
def test_an_xml_tag_longer_than_the_bound_is_refused_before_it_is_parsed(head: bytes, tail: bytes) -> None:
    start = f'{DECL}<w:document xmlns:w="{W}"><w:body><w:p><w:r>'.encode()
    data = zip_with_bomb({}, "word/document.xml", start + head, b"a", MAX_TAG_BYTES + 1, tail + b"</w:r></w:p></w:body></w:document>")
    reason = refused(read_docx, data)
    assert "holds an XML tag longer than 1 MB" in reason, reason


def test_a_long_text_node_is_no_tag_and_reads() -> None:
    text = "lift " * (MAX_TAG_BYTES // 2)  # 2.5 MB of text in one w:t, markup on neither side
    assert read_docx(docx(para(text)), LIMITS).text == text.strip()


def test_a_paragraph_of_more_elements_than_the_bound_is_refused() -> None:
    runs = "<w:r/>" * (MAX_PARAGRAPH_ELEMENTS + 1)
    reason = refused(read_docx, docx(f"<w:p>{runs}<w:r><w:t>end</w:t></w:r></w:p>"))
    assert f"docx paragraph of more than {MAX_PARAGRAPH_ELEMENTS:,} elements" in reason, reason
    spans = "<text:span>a</text:span>" * (MAX_PARAGRAPH_ELEMENTS + 1)
    reason = refused(read_odt, odf("odt", f"<office:text><text:p>{spans}</text:p></office:text>"))
    assert f"odt paragraph of more than {MAX_PARAGRAPH_ELEMENTS:,} elements" in reason, reason


def test_odt_spaces_that_add_up_past_the_text_limit_are_refused_as_they_are_parsed() -> None:
    limits = ReadLimits(max_text_chars=1_000_000)
    spaces = '<text:s text:c="1000"/>' * 1_001  # 1,001,000 spaces in one paragraph (each text:s is capped at 1,000)
    body = f"<office:text><text:p>a{spaces}b</text:p></office:text>"
    reason = refused(read_odt, odf("odt", body), limits)
    assert "paragraph whose repeated spaces (text:s) add up to more than 1,000,000 characters" in reason, reason
    few = '<text:s text:c="3"/>'  # a real document's spaces still read
    assert read_odt(odf("odt", f"<office:text><text:p>a{few}b</text:p></office:text>"), limits).text == "a   b"


def test_epub_nav_nested_past_the_depth_bound_is_refused() -> None:
    levels = MAX_HTML_DEPTH + 1  # an <ol> a level (an <li> is closed by the next one, as a parser does)
    deep = "<ol><li><a href='c.xhtml'>x</a>" * levels + "</li></ol>" * levels
    book = epub({"c": xhtml("<p>text</p>")}, nav=xhtml(NAV.format(deep)))
    reason = refused(read_epub, book)
    assert f"epub table of contents (OEBPS/nav.xhtml) nested deeper than {MAX_HTML_DEPTH:,} elements" in reason, reason
    shallow = "<ol><li><a href='c.xhtml'>Chapter</a><ol><li><a href='c.xhtml#s'>Part</a></li></ol></li></ol>"
    doc = read_epub(epub({"c": xhtml("<p>text</p>")}, nav=xhtml(NAV.format(shallow))), LIMITS)
    assert doc.text == "text" and doc.sections == [(0, "Chapter")]


def test_an_epub_chapter_nested_too_deep_is_refused_before_anything_parses_it(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[str] = []
    monkeypatch.setattr(epub_reader, "_first_heading", lambda markup: parsed.append(markup) or [])
    book = epub({"c": xhtml("<div>" * 5_000 + "deep" + "</div>" * 5_000)})  # no nav: the chapter's heading is looked for
    assert f"HTML nested deeper than {MAX_HTML_DEPTH:,} elements" in refused(read_epub, book)
    assert not parsed  # lexbor's time grows with the square of the depth: 150k nested divs took 81 s


def test_an_epub_spine_listing_a_chapter_again_reads_it_once() -> None:
    book = epub({"a": xhtml("<p>first</p>"), "b": xhtml("<p>second</p>")}, ["a", "b", "a"] * 1_000)
    assert read_epub(book, LIMITS).text == "first\n\nsecond"


def test_mail_of_more_mime_parts_than_the_bound_is_refused_before_it_is_parsed() -> None:
    def message(parts: int) -> bytes:
        part = '--b\r\nContent-Type: text/plain\r\nContent-Disposition: attachment; filename="f.txt"\r\n\r\nlift\r\n'
        body = "--b\r\nContent-Type: text/plain\r\n\r\nthe body\r\n" + part * (parts - 1) + "--b--\r\n"
        return mail({"Subject": "parts"}, body, 'multipart/mixed; boundary="b"')

    reason = refused(read_eml, message(MAX_MIME_PARTS + 1))
    assert f"mail of more than {MAX_MIME_PARTS:,} MIME parts" in reason, reason
    doc = read_eml(message(20), LIMITS)
    assert "the body" in doc.text and doc.extras["skipped_attachments"] == ", ".join(["f.txt"] * 19)


@pytest.mark.parametrize(
    "content_type", ['multipart/mixed; boundary*0="b"; boundary*1="x"', 'multipart/mixed; boundary="' + "b" * 250 + '"'], ids=["rfc2231", "long"]
)
def test_mail_whose_boundary_the_part_count_cannot_read_is_refused(content_type: str) -> None:
    """A boundary in RFC 2231 pieces or of 250 characters: the email package reads it, the count of parts did not (it
    counted 0 of 1,200 parts, found by review)."""
    boundary = "bx" if "*0" in content_type else "b" * 250
    part = f"--{boundary}\r\nContent-Type: text/plain\r\n\r\nlift\r\n"
    reason = refused(read_eml, mail({"Subject": "parts"}, part * 1_200 + f"--{boundary}--\r\n", content_type))
    assert "multipart boundary is split in pieces (RFC 2231) or longer than 200 characters" in reason, reason
    assert "the body" in read_eml(mail({"Subject": "plain"}, "the body of a note about boundary*", "text/plain"), LIMITS).text


def test_a_presentation_of_more_slides_than_the_bound_is_refused() -> None:
    data = zip_with_bomb(
        {"mimetype": "application/vnd.oasis.opendocument.presentation"},
        "content.xml",
        f"<office:document-content {NS}><office:body><office:presentation>".encode(),
        b"<draw:page/>",
        (MAX_SLIDES + 1) * 12,
        b"</office:presentation></office:body></office:document-content>",
    )
    reason = refused(read_odp, data)
    assert f"odp presentation of more than {MAX_SLIDES:,} slides" in reason, reason
