"""bench/readers/extract.py's format part: lodex's reader of each Office, OpenDocument, EPUB, RTF and mail format and the
alternative library it is measured against, and the documents made (by LibreOffice and Python's email package) to
measure them on."""

import io
import json
import random
import re
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from datetime import UTC
from html import escape
from pathlib import Path
from typing import NamedTuple  # not dataclasses: its import (inspect) would weigh on every child's RSS


def abstracts(evaldata: Path) -> list[str]:
    """Abstracts of 300 to 1,500 characters from the three evaluation collections, in a fixed shuffled order."""
    texts = []
    for name in ("cranfield", "cisi", "med"):
        with (evaldata / name / "corpus.jsonl").open(encoding="utf-8") as fh:
            texts += [t for line in fh if 300 <= len(t := " ".join(json.loads(line)["text"].split())) <= 1500]
    random.Random(0).shuffle(texts)
    return texts


# lodex's reader of each format: (module of lodex.indexer, function); each takes (data, ReadLimits) and gives a Document
LODEX_READERS = {
    "docx": ("ooxml_readers", "read_docx"),
    "pptx": ("ooxml_readers", "read_pptx"),
    "xlsx": ("xlsx_reader", "read_xlsx"),
    "odt": ("odf_readers", "read_odt"),
    "odp": ("odf_readers", "read_odp"),
    "ods": ("odf_readers", "read_ods"),
    "rtf": ("rtf_reader", "read_rtf"),
    "epub": ("epub_reader", "read_epub"),
    "eml": ("mail_reader", "read_eml"),
}
FORMATS = list(LODEX_READERS)
FORMAT_REPEAT = 3  # reads of each file in the format part, the fastest counted


def lodex_format_reader(fmt: str) -> Callable[[bytes], Iterator[str]]:
    """What a child runs for lodex's reader of `fmt`: the Document's text, with default ReadLimits."""
    module, function = LODEX_READERS[fmt]

    def extract(data: bytes) -> Iterator[str]:
        from importlib import import_module

        from lodex.indexer.readers.document import ReadLimits

        yield getattr(import_module(f"lodex.indexer.{module}"), function)(data, ReadLimits()).text

    return extract


def docx_python_docx(data: bytes) -> Iterator[str]:
    """python-docx: the body's paragraphs and tables in order, a table row's cells joined by " | "."""
    from docx import Document
    from docx.table import Table

    for block in Document(io.BytesIO(data)).iter_inner_content():
        if isinstance(block, Table):
            yield from (" | ".join(cell.text for cell in row.cells) for row in block.rows)
        else:
            yield block.text


def pptx_python_pptx(data: bytes) -> Iterator[str]:
    """python-pptx: the text of every shape with a text frame, slide by slide."""
    from pptx import Presentation

    for slide in Presentation(io.BytesIO(data)).slides:
        yield from (shape.text_frame.text for shape in slide.shapes if shape.has_text_frame)


def xlsx_openpyxl(data: bytes) -> Iterator[str]:
    """openpyxl in read-only mode (cached values): each row's cells joined by " | ", sheet by sheet."""
    from openpyxl import load_workbook

    book = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    for sheet in book.worksheets:
        for row in sheet.iter_rows(values_only=True):
            yield " | ".join(str(value) for value in row if value is not None)
    book.close()


def odf_odfpy(data: bytes) -> Iterator[str]:
    """odfpy: the text of every paragraph and heading of the body (text boxes and table cells included), in order."""
    from odf import teletype
    from odf.namespaces import TEXTNS
    from odf.opendocument import load

    todo = [load(io.BytesIO(data)).body]
    while todo:
        node = todo.pop()
        if node.qname in ((TEXTNS, "p"), (TEXTNS, "h")):
            yield teletype.extractText(node)
        else:
            todo.extend(reversed(node.childNodes))


def rtf_striprtf(data: bytes) -> Iterator[str]:
    """striprtf: the file's text (RTF is 7-bit; bytes read as Latin-1 so none is lost)."""
    from striprtf.striprtf import rtf_to_text

    yield rtf_to_text(data.decode("latin-1"), errors="replace")


def eml_stdlib(data: bytes) -> Iterator[str]:
    """The standard library's email package: the Subject, then the text/plain body (get_body)."""
    from email import policy
    from email.parser import BytesParser

    message = BytesParser(policy=policy.default).parsebytes(data)
    yield str(message["Subject"])
    body = message.get_body(preferencelist=("plain",))
    yield body.get_content() if body is not None else ""


class Alternative(NamedTuple):
    """A library that reads a format, compared with lodex's reader: its name, the distribution it is installed as
    ("" for the standard library), its licence when known here, and what a child runs for it."""

    name: str
    dist: str
    licence: str
    extract: Callable[[bytes], Iterator[str]]


ALTERNATIVES = {
    "docx": Alternative("python-docx", "python-docx", "", docx_python_docx),
    "pptx": Alternative("python-pptx", "python-pptx", "", pptx_python_pptx),
    "xlsx": Alternative("openpyxl", "openpyxl", "", xlsx_openpyxl),
    "odt": Alternative("odfpy", "odfpy", "Apache-2.0/GPL/LGPL", odf_odfpy),
    "odp": Alternative("odfpy", "odfpy", "Apache-2.0/GPL/LGPL", odf_odfpy),
    "ods": Alternative("odfpy", "odfpy", "Apache-2.0/GPL/LGPL", odf_odfpy),
    "rtf": Alternative("striprtf", "striprtf", "", rtf_striprtf),
    "eml": Alternative("email (stdlib)", "", "PSF-2.0", eml_stdlib),
}
NO_ALTERNATIVE = {"epub": "no permissive alternative to compare (EbookLib, the usual one, is AGPL-3.0)"}

# child kinds of the format part: "docx:lodex", "docx:python-docx", ...
FORMAT_EXTRACT: dict[str, Callable[[bytes], Iterator[str]]] = {
    **{f"{fmt}:lodex": lodex_format_reader(fmt) for fmt in FORMATS},
    **{f"{fmt}:{alt.name}": alt.extract for fmt, alt in ALTERNATIVES.items()},
}


class Source(NamedTuple):
    """A generated document before its producer makes the formats of it: the file the producer reads (name and
    content), the text a reader should find in what is made, and the units it has ("slides", "rows") with their
    count."""

    name: str
    content: bytes
    text: str
    units: tuple[int, str] | None = None


def texts_of_size(evaldata: Path, chars: int) -> list[str]:
    """The first evaluation abstracts (abstracts' fixed order) that together hold at least `chars` characters."""
    texts, total = [], 0
    for text in abstracts(evaldata):
        if total >= chars:
            break
        texts.append(text)
        total += len(text)
    return texts


def writer_source(texts: list[str]) -> Source:
    """An HTML document for LibreOffice Writer: a part heading every 100 reports, "Report N" headings over the
    abstracts, and after every 25 reports a table of them (report, words, opening words)."""
    html, text = ["<h1>Evaluation abstracts</h1>"], ["Evaluation abstracts"]
    for i, abstract in enumerate(texts, 1):
        if i % 100 == 1:
            html.append(f"<h1>Part {i // 100 + 1}</h1>")
            text.append(f"Part {i // 100 + 1}")
        html.append(f"<h2>Report {i}</h2><p>{escape(abstract)}</p>")
        text += [f"Report {i}", abstract]
        if i % 25 == 0:
            rows = summary_rows(texts, i - 24, i)
            html.append(
                "<table border='1'>" + "".join("<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>" for row in rows) + "</table>"
            )
            text += [" ".join(row) for row in rows]
    page = f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Evaluation abstracts</title></head><body>{"".join(html)}</body></html>'
    return Source("writer.html", page.encode(), "\n".join(text))


def summary_rows(texts: list[str], first: int, last: int) -> list[tuple[str, str, str]]:
    """A header row, then reports `first` to `last` (1-based): number, words, first three words."""
    rows = [("Report", "Words", "Opening")]
    for n in range(first, last + 1):
        words = texts[n - 1].split()
        rows.append((str(n), str(len(words)), " ".join(words[:3])))
    return rows


FLAT_ODF_NAMESPACES = " ".join(
    f'xmlns:{prefix}="urn:oasis:names:tc:opendocument:xmlns:{ns}"'
    for prefix, ns in (
        ("office", "office:1.0"),
        ("style", "style:1.0"),
        ("text", "text:1.0"),
        ("table", "table:1.0"),
        ("draw", "drawing:1.0"),
        ("presentation", "presentation:1.0"),
        ("fo", "xsl-fo-compatible:1.0"),
        ("svg", "svg-compatible:1.0"),
    )
)


def flat_odf(mimetype: str, styles: str, body: str) -> bytes:
    """A flat (single XML file) OpenDocument of `mimetype`, its automatic and master styles and its body."""
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><office:document {FLAT_ODF_NAMESPACES} office:version="1.3"'
        f' office:mimetype="application/vnd.oasis.opendocument.{mimetype}">{styles}<office:body>{body}'
        "</office:body></office:document>"
    ).encode()


def slides_source(texts: list[str]) -> Source:
    """A flat ODF presentation for LibreOffice Impress: one slide a report, "Report N" as its title and the abstract
    in its outline box."""
    frame = (
        '<draw:frame presentation:class="{}" svg:x="1cm" svg:y="{}" svg:width="26cm" svg:height="{}">'
        "<draw:text-box><text:p>{}</text:p></draw:text-box></draw:frame>"
    )
    slides = "".join(
        f'<draw:page draw:name="Report {i}" draw:master-page-name="Default">'
        + frame.format("title", "0.8cm", "2.5cm", f"Report {i}")
        + frame.format("outline", "3.8cm", "14cm", escape(abstract))
        + "</draw:page>"
        for i, abstract in enumerate(texts, 1)
    )
    styles = (
        '<office:automatic-styles><style:page-layout style:name="PM1"><style:page-layout-properties'
        ' fo:page-width="28cm" fo:page-height="21cm" style:print-orientation="landscape"/></style:page-layout>'
        '</office:automatic-styles><office:master-styles><style:master-page style:name="Default"'
        ' style:page-layout-name="PM1"/></office:master-styles>'
    )
    text = "\n".join(f"Report {i}\n{abstract}" for i, abstract in enumerate(texts, 1))
    return Source(
        "slides.fodp", flat_odf("presentation", styles, f"<office:presentation>{slides}</office:presentation>"), text, (len(texts), "slides")
    )


def sheets_source(texts: list[str]) -> Source:
    """A flat ODF spreadsheet for LibreOffice Calc: a sheet for every 250 reports, a row a sentence (report number,
    sentence number, its words, the sentence) under a header row."""
    sheets, text, rows = [], [], 0
    for first in range(0, len(texts), 250):
        name = f"Reports {first + 1}-{min(first + 250, len(texts))}"
        lines = [("Report", "Sentence", "Words", "Text")] + [
            (i, n, len(sentence.split()), sentence)
            for i, abstract in enumerate(texts[first : first + 250], first + 1)
            for n, sentence in enumerate(re.split(r"(?<=[.!?])\s+", abstract), 1)
        ]
        body = "".join("<table:table-row>" + "".join(ods_cell(value) for value in line) + "</table:table-row>" for line in lines)
        sheets.append(f'<table:table table:name="{name}">{body}</table:table>')
        text += [name] + [" ".join(map(str, line)) for line in lines]
        rows += len(lines)
    return Source(
        "sheets.fods", flat_odf("spreadsheet", "", f"<office:spreadsheet>{''.join(sheets)}</office:spreadsheet>"), "\n".join(text), (rows, "rows")
    )


def ods_cell(value: int | str) -> str:
    """One ODF spreadsheet cell: a number, or a string."""
    if isinstance(value, int):
        return f'<table:table-cell office:value-type="float" office:value="{value}"><text:p>{value}</text:p></table:table-cell>'
    return f'<table:table-cell office:value-type="string"><text:p>{escape(value)}</text:p></table:table-cell>'


def mail_source(texts: list[str]) -> Source:
    """A message made by Python's email package: the reports as its text/plain body, an HTML alternative of them and
    a CSV attachment (report, words)."""
    from datetime import datetime
    from email.message import EmailMessage
    from email.utils import format_datetime

    message = EmailMessage()
    message["Subject"] = "Evaluation abstracts, lodex bench"
    message["From"] = "Evaluation desk <desk@example.org>"
    message["To"] = "Readers <readers@example.org>"
    message["Date"] = format_datetime(datetime(2024, 1, 15, 9, 30, tzinfo=UTC))
    message["Message-ID"] = "<abstracts@example.org>"
    plain = "\n\n".join(f"Report {i}\n\n{abstract}" for i, abstract in enumerate(texts, 1))
    message.set_content(plain)
    message.add_alternative("".join(f"<h2>Report {i}</h2><p>{escape(abstract)}</p>" for i, abstract in enumerate(texts, 1)), subtype="html")
    csv = "".join(f"{i},{len(abstract.split())}\r\n" for i, abstract in enumerate(texts, 1))
    message.add_attachment(csv.encode(), maintype="text", subtype="csv", filename="reports.csv")
    return Source("mail.eml", bytes(message), f"{message['Subject']}\n{plain}")


SOURCES: dict[str, Callable[[list[str]], Source]] = {"writer": writer_source, "slides": slides_source, "sheets": sheets_source, "mail": mail_source}
SOURCE_OF = {
    "docx": "writer",
    "odt": "writer",
    "rtf": "writer",
    "epub": "writer",
    "pptx": "slides",
    "odp": "slides",
    "xlsx": "sheets",
    "ods": "sheets",
    "eml": "mail",
}


def convert(source: Path, fmt: str, out: Path, profile: Path) -> None:
    """Makes `out` (format `fmt`) of `source` with headless LibreOffice, using the user profile `profile`; written
    under another name first, so an interrupted run leaves no half file to be reused."""
    infilter = ["--infilter=HTML (StarWriter)"] if source.suffix == ".html" else []  # Writer, not Writer/Web
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        subprocess.run(
            ["soffice", f"-env:UserInstallation={profile.as_uri()}", "--headless", *infilter, "--convert-to", fmt, "--outdir", tmp, str(source)],
            check=True,
            capture_output=True,
            timeout=600,
        )
        (Path(tmp) / f"{source.stem}.{fmt}").rename(out)


FORMAT_FILES_VERSION = 1  # bump when a source above changes, so that files made before are not reused


def build_formats(work: Path, evaldata: Path, formats: list[str], text_mb: float) -> dict[str, tuple[Path, Source]]:
    """Each format's file and the source it was made from; files already in `work` (same --text-mb and
    FORMAT_FILES_VERSION) are reused. A format whose file cannot be made is left out, with a line saying why."""
    folder = work / f"formats-{text_mb:g}mb-v{FORMAT_FILES_VERSION}"
    folder.mkdir(parents=True, exist_ok=True)
    texts = texts_of_size(evaldata, int(text_mb * 1e6))
    sources = {kind: SOURCES[kind](texts) for kind in {SOURCE_OF[fmt] for fmt in formats}}
    files = {}
    with tempfile.TemporaryDirectory(prefix="lodex-soffice-") as profile:
        for fmt in formats:
            source = sources[SOURCE_OF[fmt]]
            out = folder / f"{Path(source.name).stem}.{fmt}"
            try:
                make_file(source, fmt, out, Path(profile))
                files[fmt] = (out, source)
            except (OSError, subprocess.SubprocessError) as error:
                print(f"{fmt}: not measured, its file could not be made ({type(error).__name__}: {error})"[:160])
    return files


def make_file(source: Source, fmt: str, out: Path, profile: Path) -> None:
    """Makes `out` of `source` unless it is there: the message as it is, the other formats by LibreOffice."""
    if out.exists():
        return
    if fmt == "eml":
        out.write_bytes(source.content)
        return
    (out.parent / source.name).write_bytes(source.content)
    convert(out.parent / source.name, fmt, out, profile)
