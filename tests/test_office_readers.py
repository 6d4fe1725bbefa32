"""Office, ODF, EPUB, RTF and mail readers on files real producers made (tests/fixtures/office, written by
scripts/make_office_fixtures.py); zip bombs, entity expansion and corrupt files refused; formats sniffed from content."""

import io
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from lodex.indexer.errors import ReadError
from lodex.indexer.readers import containers
from lodex.indexer.readers.containers import CHUNK_BYTES, SafeZip
from lodex.indexer.readers.document import ReadLimits, page_of, section_of
from lodex.indexer.readers.epub_reader import read_epub
from lodex.indexer.readers.mail_reader import MAIL_READER_VERSION, read_eml
from lodex.indexer.readers.odf_readers import read_odp, read_ods, read_odt
from lodex.indexer.readers.office_common import OFFICE_READER_VERSION
from lodex.indexer.readers.ooxml_readers import read_docx, read_pptx
from lodex.indexer.readers.rtf_reader import RTF_READER_VERSION, read_rtf
from lodex.indexer.readers.sniffing import SNIFF_HEAD_BYTES, SNIFFING_READER_VERSION, needs_whole_file, sniff_format
from lodex.indexer.readers.xlsx_reader import read_xlsx

FIXTURES = Path(__file__).parent / "fixtures" / "office"
LIMITS = ReadLimits()
# What scripts/make_office_fixtures.py planted in the documents.
SAMPLING = "The sampling probe was traversed across the wake at twelve stations behind the trailing edge."
SLIDE3 = "Boundary layer transition moved forward as the free stream turbulence grew."
NOTES3 = "Speaker note: mention the wind tunnel calibration."
NON_ASCII = "Naïve café readings near 5 Ångström — “quoted” 20 € ✓ Ω"
REPORT_SECTIONS = [
    "1 Introduction",
    "2 Methods",
    "2 Methods › 2.1 Apparatus",
    "2 Methods › 2.2 Measurements",
    "2 Methods › 2.2 Measurements › 2.2.1 Pressure taps",
    "2 Methods › 2.3 Sampling",
    "3 Results",
    "4 Conclusions",
]


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


# ------------------------------------------------------------------------------------------------ word processing


@pytest.mark.parametrize("name, reader", [("report.docx", read_docx), ("report.odt", read_odt), ("report.rtf", read_rtf)])
def test_headings_give_the_section_of_a_passage(name, reader):
    doc = reader(fixture(name), LIMITS)
    assert doc.title == "Aerodynamics of Wings in a Slipstream"
    assert [path for _, path in doc.sections] == REPORT_SECTIONS
    offset = doc.text.index(SAMPLING)
    assert section_of(doc.sections, offset) == "2 Methods › 2.3 Sampling"
    assert section_of(doc.sections, doc.text.index("Run | Mach")) == "3 Results"
    assert doc.pages is None


@pytest.mark.parametrize("name, reader", [("report.docx", read_docx), ("report.odt", read_odt), ("report.rtf", read_rtf)])
def test_tables_come_out_a_row_a_line_and_non_ascii_text_intact(name, reader):
    lines = reader(fixture(name), LIMITS).text.split("\n")
    assert ["Run | Mach | Lift coefficient", "1 | 0.3 | 0.52", "2 | 0.6 | 0.61"] == lines[lines.index("Run | Mach | Lift coefficient") :][:3]
    assert NON_ASCII in lines


def test_docx_heading_levels_from_styles_and_outline_levels_without_duplicates_or_deletions():
    w = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    styles = (
        f'<w:styles {w}><w:style w:type="paragraph" w:styleId="Chap"><w:name w:val="heading 1"/></w:style>'
        '<w:style w:type="paragraph" w:styleId="MyChap"><w:name w:val="Mine"/><w:basedOn w:val="Chap"/>'
        "</w:style></w:styles>"
    )
    body = (
        '<w:p><w:pPr><w:pStyle w:val="MyChap"/><w:tabs><w:tab w:val="left" w:pos="720"/></w:tabs></w:pPr>'
        "<w:r><w:t>Part A</w:t></w:r></w:p>"
        '<w:p><w:pPr><w:outlineLvl w:val="1"/></w:pPr><w:r><w:t>Sub</w:t></w:r></w:p>'
        "<w:p><w:r><w:t>kept</w:t></w:r><w:del><w:r><w:delText>deleted</w:delText></w:r></w:del>"
        '<w:r><mc:AlternateContent xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006">'
        "<mc:Choice><w:txbxContent><w:p><w:r><w:t>box</w:t></w:r></w:p></w:txbxContent></mc:Choice>"
        "<mc:Fallback><w:txbxContent><w:p><w:r><w:t>box</w:t></w:r></w:p></w:txbxContent></mc:Fallback>"
        "</mc:AlternateContent></w:r><w:r><w:tab/><w:t>after</w:t></w:r></w:p>"
    )
    data = make_zip({"word/document.xml": f"<w:document {w}><w:body>{body}</w:body></w:document>", "word/styles.xml": styles})
    doc = read_docx(data, LIMITS)
    assert doc.text == "Part A\n\nSub\n\nbox\n\nkept\tafter"  # a text box's paragraph comes before its anchor's
    assert doc.sections == [(0, "Part A"), (8, "Part A › Sub")]
    assert doc.title == "Part A"


def test_docx_odt_and_rtf_of_one_document_give_the_same_text():
    docx = read_docx(fixture("report.docx"), LIMITS)
    assert read_odt(fixture("report.odt"), LIMITS).text == docx.text
    assert read_rtf(fixture("report.rtf"), LIMITS).text == docx.text


def test_rtf_escapes_code_pages_and_skipped_groups():
    rtf = (
        rb"{\rtf1\ansi\ansicpg1251{\fonttbl{\f0 Arial;}}{\info{\title \u1055?\u1088?oba}}\uc1 "
        rb"x\u-10179?\u-8704?y \'cf\'f0 {\*\fldinst HYPERLINK x}{\fldrslt link}\bin3 {}}\par "
        rb"\pard\outlinelevel1 Sub\par}"
    )
    doc = read_rtf(rtf, LIMITS)
    assert doc.text == "x\U0001f600y Пр link\n\nSub"  # a surrogate pair joined; cp1251 bytes; field result only
    assert doc.title == "Прoba"
    assert doc.sections == [(len(doc.text) - 3, "Sub")]


# --------------------------------------------------------------------------------------------------- presentations


@pytest.mark.parametrize("name, reader", [("slides.pptx", read_pptx), ("slides.odp", read_odp)])
def test_slides_are_pages(name, reader):
    doc = reader(fixture(name), LIMITS)
    assert doc.title == "Slipstream Wind Tunnel Tests"
    assert doc.pages is not None and len(doc.pages) == 4
    assert page_of(doc.pages, doc.text.index(SLIDE3)) == 3
    assert page_of(doc.pages, doc.text.index(NOTES3)) == 3  # speaker notes follow their slide's text
    assert page_of(doc.pages, doc.text.index("Conclusions")) == 4
    assert [path for _, path in doc.sections] == ["Slipstream Wind Tunnel Tests", "Apparatus", "Transition", "Conclusions"]
    assert section_of(doc.sections, doc.text.index(SLIDE3)) == "Transition"


# ---------------------------------------------------------------------------------------------------- spreadsheets


@pytest.mark.parametrize("name, reader", [("sheets.xlsx", read_xlsx), ("sheets.ods", read_ods)])
def test_sheets_give_a_row_a_line(name, reader):
    doc = reader(fixture(name), LIMITS)
    lines = doc.text.split("\n")
    assert lines[:3] == ["Runs", "Run | Mach | Lift coefficient | Remark", "1 | 0.1 | 0.43 | run 1 nominal"]
    assert "alpha | beta | gamma" in lines
    assert section_of(doc.sections, doc.text.index("alpha | beta | gamma")) == "Runs"
    assert section_of(doc.sections, doc.text.index("201 | ")) == "Notes"
    assert doc.title == "Wind Tunnel Runs"


def test_xlsx_inline_strings_and_booleans():
    sheet = (
        '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData><row r="1">'
        '<c r="A1" t="inlineStr"><is><t>inline</t></is></c><c r="B1" t="b"><v>1</v></c><c r="C1"><v>2.5</v></c>'
        '<c r="D1" t="inlineStr"><is><r><t>ri</t></r><r><t>ch</t></r><rPh><t>x</t></rPh></is></c></row>'
        "</sheetData></worksheet>"
    )
    workbook = (
        '<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://'
        'schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="S" sheetId="1" '
        'r:id="rId1"/></sheets></workbook>'
    )
    rels = (
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship '
        'Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" '
        'Target="worksheets/sheet1.xml"/></Relationships>'
    )
    data = make_zip({"xl/workbook.xml": workbook, "xl/_rels/workbook.xml.rels": rels, "xl/worksheets/sheet1.xml": sheet})
    assert read_xlsx(data, LIMITS).text == "S\ninline | TRUE | 2.5 | rich"


# -------------------------------------------------------------------------------------------------------- EPUB


def test_epub_chapters_in_spine_order_named_by_the_table_of_contents():
    doc = read_epub(fixture("report.epub"), LIMITS)
    assert doc.title == "Aerodynamics of Wings in a Slipstream"
    assert [path for _, path in doc.sections] == ["1 Introduction", "2 Methods", "3 Results", "4 Conclusions"]
    assert section_of(doc.sections, doc.text.index(SAMPLING)) == "2 Methods"
    starts = [doc.text.index(heading) for heading in ("1 Introduction", "2 Methods", "3 Results", "4 Conclusions")]
    assert starts == sorted(starts) and [start for start, _ in doc.sections] == starts
    assert NON_ASCII in doc.text


def test_epub_2_chapters_named_by_the_ncx():
    source = zipfile.ZipFile(io.BytesIO(fixture("report.epub")))
    entries = {info.filename: source.read(info) for info in source.infolist()}
    entries["OEBPS/content.opf"] = entries["OEBPS/content.opf"].replace(b' properties="nav"', b"")
    doc = read_epub(make_zip(entries), LIMITS)
    assert [path for _, path in doc.sections] == ["1 Introduction", "2 Methods", "3 Results", "4 Conclusions"]


# -------------------------------------------------------------------------------------------------------- mail


def test_eml_header_block_then_the_plain_body_attachments_listed():
    doc = read_eml(fixture("message.eml"), LIMITS)
    subject = "Plasma glucose results – café meeting"
    assert doc.title == subject
    assert doc.text.startswith(f"Subject: {subject}\nFrom: Ada Lovelace <ada@example.org>\nDate: Thu, 04 Mar 2021 09:30:00 +0100\n\nHello team,")
    assert doc.text.count("Hello team,") == 1  # the text/html alternative is not read too
    assert doc.text.rstrip().endswith("Regards,\nAda")
    assert doc.extras == {"skipped_attachments": "results.pdf, data.csv"}
    assert "%PDF" not in doc.text and "glucose\n1,5.2" not in doc.text


def test_eml_html_only_body_read_as_text():
    doc = read_eml(fixture("html_only.eml"), LIMITS)
    assert doc.title == "Fetal plasma levels"
    assert doc.text.startswith("Subject: Fetal plasma levels\nFrom: bob@example.org\nDate: ")
    assert "\n\nSummary\n\nPlacental and cord blood lipids" in doc.text
    assert "<p>" not in doc.text and "color: red" not in doc.text
    assert doc.extras == {}


# ------------------------------------------------------------------------------------------ hostile and corrupt


def test_zip_bomb_declared_over_the_limit_is_refused_before_inflating(monkeypatch):
    real_open = zipfile.ZipFile.open

    def no_inflating_the_bomb(self, name, *args, **kwargs):
        assert getattr(name, "filename", name) != "word/document.xml", "the bomb was opened"
        return real_open(self, name, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "open", no_inflating_the_bomb)
    with pytest.raises(ReadError, match=r"^zip bomb: .*word/document.xml.* would inflate past index.max_parsed_mb"):
        read_docx(fixture("bomb.docx"), LIMITS)


def test_zip_bomb_whose_declared_size_lies_is_stopped_without_a_large_allocation():
    data = fixture("bomb_lying.docx")  # 64 MiB of zeros declared as 1,000 bytes
    assert zipfile.ZipFile(io.BytesIO(data)).getinfo("word/document.xml").file_size == 1000
    tracemalloc.start()
    try:
        with pytest.raises(ReadError, match="^unreadable docx"):
            read_docx(data, LIMITS)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024


def test_inflated_bytes_are_counted_whatever_the_sizes_declared(monkeypatch):
    """A zip reader that trusted the data over the directory would inflate on: the count stops it at the limit."""
    limits = ReadLimits(max_inflated_bytes=1024 * 1024)
    given = []

    class Endless(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def read(self, size: int = -1) -> bytes:
            given.append(size)
            return bytes(size)

    monkeypatch.setattr(zipfile.ZipFile, "open", lambda self, *args, **kwargs: Endless())
    with pytest.raises(ReadError, match="^zip bomb: .* inflates to more than it declares"):
        read_docx(fixture("report.docx"), limits)
    assert sum(given) <= limits.max_inflated_bytes + CHUNK_BYTES


def test_the_budget_is_summed_over_the_entries_read():
    data = fixture("report.docx")
    sizes = {info.filename: info.file_size for info in zipfile.ZipFile(io.BytesIO(data)).infolist()}
    archive = SafeZip(data, ReadLimits(max_inflated_bytes=sizes["word/document.xml"] + 100), "docx")
    archive.read("word/document.xml")
    with pytest.raises(ReadError, match="^zip bomb"):
        archive.read("word/styles.xml")


BILLION_LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10 if i > 1 else "&lol;" * 10}">' for i in range(1, 10))
    + ']><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>'
    "<w:p><w:r><w:t>&lol9;</w:t></w:r></w:p></w:body></w:document>"
)
EXTERNAL = (
    '<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]><w:document xmlns:w="http://'
    'schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>&x;</w:t></w:r></w:p>'
    "</w:body></w:document>"
)


@pytest.mark.parametrize(
    "xml",
    [
        BILLION_LAUGHS.encode(),
        BILLION_LAUGHS.encode("utf-16"),
        EXTERNAL.encode(),
        EXTERNAL.replace('version="1.0"', 'version="1.0" encoding="utf-8"').encode(),
    ],
)
def test_xml_entity_declarations_are_refused(xml):
    with pytest.raises(ReadError, match="^unsafe docx: word/document.xml declares XML entities"):
        read_docx(make_zip({"word/document.xml": xml}), LIMITS)


def test_xml_in_an_encoding_that_could_hide_a_declaration_is_refused():
    xml = b'<?xml version="1.0" encoding="cp037"?>' + "<a/>".encode("cp037")
    with pytest.raises(ReadError, match="^unreadable docx: word/document.xml is XML in an unsupported encoding"):
        read_docx(make_zip({"word/document.xml": xml}), LIMITS)


@pytest.mark.parametrize("reader", [read_docx, read_pptx, read_xlsx, read_odt, read_odp, read_ods, read_epub])
def test_corrupt_containers_are_refused_with_the_reason(reader):
    fmt = reader.__name__.removeprefix("read_")
    with pytest.raises(ReadError, match=f"^unreadable {fmt}: it is not the zip archive its format requires"):
        reader(fixture("corrupt.docx"), LIMITS)
    with pytest.raises(ReadError, match=f"^unreadable {fmt}: "):
        reader(make_zip({"unrelated.txt": "x"}), LIMITS)


def test_malformed_xml_is_refused_with_the_reason():
    with pytest.raises(ReadError, match=r"^unreadable docx: word/document.xml is not well-formed XML \(line 1, column 35\)"):
        read_docx(make_zip({"word/document.xml": "<w:document xmlns:w='x'><w:body></w:document>"}), LIMITS)


def test_rtf_and_mail_that_are_not_are_refused():
    with pytest.raises(ReadError, match=r"^unreadable rtf: no \{\\rtf header"):
        read_rtf(b"plain text", LIMITS)
    with pytest.raises(ReadError, match="^unreadable eml: no Subject, From or Date header"):
        read_eml(b"\x00\x01binary", LIMITS)


@pytest.mark.parametrize(
    "name, reader",
    [
        ("report.docx", read_docx),
        ("report.odt", read_odt),
        ("slides.pptx", read_pptx),
        ("sheets.ods", read_ods),
        ("report.epub", read_epub),
        ("report.rtf", read_rtf),
        ("message.eml", read_eml),
    ],
)
def test_text_over_the_limit_is_refused(name, reader):
    with pytest.raises(ReadError, match=r"text too long: over 200 characters once extracted"):
        reader(fixture(name), ReadLimits(max_text_chars=200))


# ------------------------------------------------------------------------------------------------------- sniffing


@pytest.mark.parametrize(
    "name, fmt",
    [
        ("report.docx", "docx"),
        ("slides.pptx", "pptx"),
        ("sheets.xlsx", "xlsx"),
        ("report.odt", "odt"),
        ("slides.odp", "odp"),
        ("sheets.ods", "ods"),
        ("report.epub", "epub"),
        ("report.rtf", "rtf"),
        ("message.eml", "eml"),
        ("html_only.eml", "eml"),
        ("bomb.docx", "docx"),
    ],
)
def test_formats_are_sniffed_from_content(name, fmt):
    data = fixture(name)
    assert sniff_format(data[:SNIFF_HEAD_BYTES], data) == fmt


def test_odf_and_epub_are_told_from_their_first_bytes_ooxml_needs_the_whole_file():
    for name, fmt in [("report.odt", "odt"), ("slides.odp", "odp"), ("sheets.ods", "ods"), ("report.epub", "epub")]:
        head = fixture(name)[:SNIFF_HEAD_BYTES]
        assert sniff_format(head) == fmt and not needs_whole_file(head)
    head = fixture("report.docx")[:SNIFF_HEAD_BYTES]
    assert sniff_format(head) is None and needs_whole_file(head)


@pytest.mark.parametrize(
    "head, fmt",
    [
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj", "pdf"),
        (b"{\\rtf1\\ansi hello}", "rtf"),
        (b"From: a@example.org\nSubject: hi\n\nbody\n", "eml"),
        (b"From a@example.org Mon Jan  1 00:00:00 2024\nReceived: by x\nSubject: y\n\nbody", "eml"),
        (b"A plain text file.\nIt mentions %PDF- and From: someone.\n", None),
        (b"Title: A post\nDate: 2024-01-01\nTags: x\n\nA Pelican post's metadata is no mail.\n", None),
        (b"Subject: only one field\n\nbody\n", None),
        (b"PK\x03\x04 a truncated zip", None),
        (b"", None),
    ],
)
def test_sniffing_small_heads(head, fmt):
    assert sniff_format(head, head) == fmt


def test_a_corrupt_zip_sniffs_as_nothing():
    data = fixture("corrupt.docx")
    assert sniff_format(data[:SNIFF_HEAD_BYTES], data) is None


def test_every_module_names_its_reader_version():
    versions = [OFFICE_READER_VERSION, MAIL_READER_VERSION, RTF_READER_VERSION, SNIFFING_READER_VERSION, containers.CONTAINERS_READER_VERSION]
    assert all(isinstance(v, str) and v for v in versions)


def make_zip(entries: dict[str, str | bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in entries.items():
            archive.writestr(name, content)
    return buf.getvalue()
