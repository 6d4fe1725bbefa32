"""Which library lodex reads PDFs with, by measurement: each candidate's pages/s, peak RSS, text fidelity, install size
and licence on the same files, and the peak RSS of lodex's reader on a 2,000-page PDF next to two baselines; then
lodex's readers of the other formats against an alternative library each.

usage: python bench/extract.py [--pages 2000] [--speed-pages 200] [--libs lodex,pypdfium2,...] [--evaldata DIR]
                               [--workdir DIR] [--formats docx,pptx,...] [--text-mb 1] [--alt-python PYTHON]
                               [--skip-pdf] [--skip-office]
needs: Chromium (/usr/bin/chromium) to print the PDFs, LibreOffice (soffice) to make the Office files, the candidates
(pip install -e ".[bench-extract]", or into another interpreter given as --alt-python)

Builds, with headless Chromium, a --pages PDF (one evaluation abstract a page under a heading, in two CSS columns,
with a running header and a "Page N" footer) and a --speed-pages PDF of its first pages. Each library runs in its own
child process (its peak RSS is its own, interpreter and imports included) on:
  speed     the --speed-pages PDF: pages per second (wall clock; CPU ms a page too, as some libraries use threads),
            as a ratio to plain pypdfium2 (pdfium's text in stream order) measured in the same run;
  fidelity  the fixtures of tests/fixtures/pdf (two columns, columns written row by row, hyphenation, running
            headers and footers, turned text) and the speed PDF, whose source texts are known: word recall and
            precision (bags of words), and order, the recall of the source's word pairs (columns read one after the
            other and hyphenated words made whole raise it; headers, footers and interleaved columns lower it).
Then the 2,000-page PDF through lodex's read_pdf, next to the bare interpreter with lodex imported and to reading the
same text from as many small .txt files (lodex's decoding). CPU flags are printed next to the speed figures.

Then, per format of --formats (docx, pptx, xlsx, odt, odp, ods, rtf, epub, eml), lodex's reader and an alternative
library on the same file, each in its own child process (the fastest of 3 reads, peak RSS as above): MB/s of the
file (slides/s and rows/s where the format has them), peak RSS, and word recall and precision against the text the
file was made from, with ratios to lodex's reader in the same run. The files hold --text-mb of evaluation abstracts and
are made by real producers: LibreOffice (soffice --headless --convert-to) from an HTML document (docx, odt, rtf, epub),
a flat ODF presentation (pptx, odp) and a flat ODF spreadsheet (xlsx, ods), and Python's email package (eml). EPUB has
no permissive alternative (EbookLib is AGPL-3.0). --skip-pdf / --skip-office run one part alone; with --workdir the
generated files are kept there and a later run reuses them.
"""

import argparse
import io
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator
from html import escape
from importlib import metadata
from pathlib import Path
from typing import NamedTuple  # not dataclasses: its import (inspect) would weigh on every child's RSS

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "pdf"
EVALDATA = Path(os.environ.get("LODEX_EVALDATA", ROOT.parent / "shared" / "evaldata"))
CHROMIUM = ["/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-pdf-header-footer"]
# library: (distribution, extra whose requirements it needs, licence of the code that reads: pdfium's for pypdfium2)
LIBRARIES = {
    "pypdfium2": ("pypdfium2", "", "Apache-2.0 / BSD-3-Clause"),
    "lodex": ("pypdfium2", "", "Apache-2.0 / BSD-3-Clause"),
    "pypdf": ("pypdf", "", ""),
    "pdfminer.six": ("pdfminer.six", "", ""),
    "kreuzberg": ("kreuzberg", "", ""),
    "markitdown": ("markitdown", "pdf", ""),
}
BASELINE = "pypdfium2"


# --- what each child runs ----------------------------------------------------------------------------------------

def pages_pypdfium2(data: bytes) -> Iterator[str]:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(data)
    for index in range(len(pdf)):
        page = pdf[index]
        textpage = page.get_textpage()
        yield textpage.get_text_range()
        textpage.close()
        page.close()
    pdf.close()


def pages_lodex(data: bytes) -> Iterator[str]:
    from lodex.indexer.document import ReadLimits
    from lodex.indexer.pdf_reader import read_pdf

    yield read_pdf(data, ReadLimits()).text


def pages_pypdf(data: bytes) -> Iterator[str]:
    from pypdf import PdfReader

    for page in PdfReader(io.BytesIO(data)).pages:
        yield page.extract_text()


def pages_pdfminer(data: bytes) -> Iterator[str]:
    from pdfminer.high_level import extract_text

    yield extract_text(io.BytesIO(data))


def pages_kreuzberg(data: bytes) -> Iterator[str]:
    from kreuzberg import extract_bytes_sync

    yield extract_bytes_sync(data, "application/pdf").content


def pages_markitdown(data: bytes) -> Iterator[str]:
    from markitdown import MarkItDown

    yield MarkItDown(enable_plugins=False).convert_stream(io.BytesIO(data), file_extension=".pdf").text_content


EXTRACT: dict[str, Callable[[bytes], Iterator[str]]] = {
    "pypdfium2": pages_pypdfium2, "lodex": pages_lodex, "pypdf": pages_pypdf, "pdfminer.six": pages_pdfminer,
    "kreuzberg": pages_kreuzberg, "markitdown": pages_markitdown,
}


# lodex's reader of each format: (module of lodex.indexer, function); each takes (data, ReadLimits) and gives a Document
LODEX_READERS = {
    "docx": ("ooxml_readers", "read_docx"), "pptx": ("ooxml_readers", "read_pptx"),
    "xlsx": ("ooxml_readers", "read_xlsx"), "odt": ("odf_readers", "read_odt"),
    "odp": ("odf_readers", "read_odp"), "ods": ("odf_readers", "read_ods"),
    "rtf": ("rtf_reader", "read_rtf"), "epub": ("epub_reader", "read_epub"), "eml": ("mail_reader", "read_eml"),
}
FORMATS = list(LODEX_READERS)
FORMAT_REPEAT = 3  # reads of each file in the format part, the fastest counted


def lodex_format_reader(fmt: str) -> Callable[[bytes], Iterator[str]]:
    """What a child runs for lodex's reader of `fmt`: the Document's text, with default ReadLimits."""
    module, function = LODEX_READERS[fmt]

    def extract(data: bytes) -> Iterator[str]:
        from importlib import import_module

        from lodex.indexer.document import ReadLimits

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


def peak_rss_mib() -> float:
    """This process's peak resident memory, MiB: VmHWM, which starts afresh at exec. Not ru_maxrss: on Linux it
    survives fork and exec, so a child started by subprocess reports its parent's peak whenever that is higher."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(args: argparse.Namespace) -> None:
    """One library (or baseline) in this process; prints one JSON object."""
    if args.child == "bare":
        import lodex.indexer.document  # noqa: F401 - the interpreter with lodex imported, nothing read
        print(json.dumps({"rss": peak_rss_mib()}))
        return
    if args.child == "txt":
        from lodex.indexer.decoding import clean, decode_source

        started = time.perf_counter()
        texts = [clean(decode_source(p.read_bytes())[0]) for p in sorted(Path(args.files[0]).iterdir())]
        text = "\n\n".join(texts)
        print(json.dumps({"rss": peak_rss_mib(), "seconds": time.perf_counter() - started, "chars": len(text)}))
        return
    extract = {**EXTRACT, **FORMAT_EXTRACT}[args.child]
    results = {name: timed(extract, Path(name).read_bytes(), args.repeat) for name in args.files}
    print(json.dumps({"rss": peak_rss_mib(), "files": results, **library_facts(args.child)}))


def timed(extract: Callable[[bytes], Iterator[str]], data: bytes, repeat: int) -> dict:
    """The fastest of `repeat` reads of `data`: its wall-clock and CPU seconds, and the text it gave."""
    best: dict = {}
    for _ in range(repeat):
        started, cpu = time.perf_counter(), time.process_time()
        text = "\n\n".join(extract(data))
        seconds = time.perf_counter() - started
        if not best or seconds < best["seconds"]:
            best = {"seconds": seconds, "cpu": time.process_time() - cpu, "text": text}
    return best


def library_facts(kind: str) -> dict[str, str]:
    """Version and licence of a format part's library, read in the child (its interpreter may be --alt-python's);
    nothing for the PDF part's kinds."""
    if kind not in FORMAT_EXTRACT:
        return {}
    fmt, name = kind.split(":", 1)
    if name == "lodex":
        return {"version": metadata.version("lodex"), "licence": "-"}
    alt = ALTERNATIVES[fmt]
    if not alt.dist:
        return {"version": ".".join(map(str, sys.version_info[:3])), "licence": alt.licence}
    return {"version": metadata.version(alt.dist), "licence": licence(alt.dist, alt.licence)}


# A child imports this file rather than running it as a script: a script is compiled at every start, an imported
# module loads from its cached bytecode (where Python may write it), so what compiling this file costs, which grows
# with it, does not count in every child's peak RSS.
CHILD = "import sys; sys.path.insert(0, sys.argv.pop(1)); import extract; extract.main()"


def run_child(kind: str, files: list[Path], python: str = sys.executable, repeat: int = 1) -> dict:
    """Runs one library (`kind`) on `files` in a child process of interpreter `python`; its JSON, or {"error": …}."""
    proc = subprocess.run([python, "-c", CHILD, str(Path(__file__).parent), "--child", kind, "--repeat", str(repeat),
                           *map(str, files)],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["exit " + str(proc.returncode)])[-1][:120]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --- the files -------------------------------------------------------------------------------------------------

def abstracts(evaldata: Path) -> list[str]:
    """Abstracts of 300 to 1,500 characters from the three evaluation collections, in a fixed shuffled order."""
    texts = []
    for name in ("cranfield", "cisi", "med"):
        with (evaldata / name / "corpus.jsonl").open(encoding="utf-8") as fh:
            texts += [t for line in fh if 300 <= len(t := " ".join(json.loads(line)["text"].split())) <= 1500]
    random.Random(0).shuffle(texts)
    return texts


def print_pdf(pages: list[str], out: Path, work: Path) -> None:
    """A PDF of one abstract a page ("Report N" above it, in two columns, header and footer) printed by Chromium."""
    sections = "".join(f"<section><h2>Report {i}</h2><div>{escape(t)}</div></section>" for i, t in enumerate(pages, 1))
    style = ('@page { size: A4; margin: 2cm; @top-center { content: "Evaluation abstracts, lodex bench" }'
             ' @bottom-center { content: "Page " counter(page) } } body { font: 11pt serif }'
             " section { break-after: page } div { column-count: 2; text-align: justify }")
    source = work / (out.stem + ".html")
    source.write_text(f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Evaluation abstracts'
                      f"</title><style>{style}</style></head><body>{sections}</body></html>", encoding="utf-8")
    subprocess.run([*CHROMIUM, f"--user-data-dir={tempfile.mkdtemp(dir=work)}", f"--print-to-pdf={out}",
                    source.as_uri()], check=True, capture_output=True, timeout=600)


def build(work: Path, evaldata: Path, pages: int, speed_pages: int) -> tuple[Path, Path, Path, list[str]]:
    """(big PDF, speed PDF, folder of one .txt a page, the speed PDF's source texts), made once per workdir."""
    texts = abstracts(evaldata)
    texts = [texts[i % len(texts)] for i in range(pages)]
    big, speed, folder = work / f"pages-{pages}.pdf", work / f"pages-{speed_pages}.pdf", work / "txt"
    if not big.exists():
        print_pdf(texts, big, work)
    if not speed.exists():
        print_pdf(texts[:speed_pages], speed, work)
    if not folder.exists():
        folder.mkdir()
        for i, text in enumerate(texts, 1):
            (folder / f"page-{i:05d}.txt").write_text(f"Report {i}\n\n{text}\n", encoding="utf-8")
    return big, speed, folder, [f"Report {i} {t}" for i, t in enumerate(texts[:speed_pages], 1)]


def fidelity_files(speed: Path, speed_source: list[str]) -> dict[Path, str]:
    """Each PDF whose source text is known, with that text."""
    expected = json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))
    files = {FIXTURES / name: " ".join(e["pages"]) for name, e in expected.items() if "".join(e["pages"]).strip()}
    files[speed] = " ".join(speed_source)
    return files


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
            html.append("<table border='1'>" + "".join(
                "<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>" for row in rows) + "</table>")
            text += [" ".join(row) for row in rows]
    page = ('<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Evaluation abstracts</title></head>'
            f'<body>{"".join(html)}</body></html>')
    return Source("writer.html", page.encode(), "\n".join(text))


def summary_rows(texts: list[str], first: int, last: int) -> list[tuple[str, str, str]]:
    """A header row, then reports `first` to `last` (1-based): number, words, first three words."""
    rows = [("Report", "Words", "Opening")]
    for n in range(first, last + 1):
        words = texts[n - 1].split()
        rows.append((str(n), str(len(words)), " ".join(words[:3])))
    return rows


FLAT_ODF_NAMESPACES = " ".join(f'xmlns:{prefix}="urn:oasis:names:tc:opendocument:xmlns:{ns}"' for prefix, ns in (
    ("office", "office:1.0"), ("style", "style:1.0"), ("text", "text:1.0"), ("table", "table:1.0"),
    ("draw", "drawing:1.0"), ("presentation", "presentation:1.0"), ("fo", "xsl-fo-compatible:1.0"),
    ("svg", "svg-compatible:1.0")))


def flat_odf(mimetype: str, styles: str, body: str) -> bytes:
    """A flat (single XML file) OpenDocument of `mimetype`, its automatic and master styles and its body."""
    return (f'<?xml version="1.0" encoding="UTF-8"?><office:document {FLAT_ODF_NAMESPACES} office:version="1.3"'
            f' office:mimetype="application/vnd.oasis.opendocument.{mimetype}">{styles}<office:body>{body}'
            "</office:body></office:document>").encode()


def slides_source(texts: list[str]) -> Source:
    """A flat ODF presentation for LibreOffice Impress: one slide a report, "Report N" as its title and the abstract
    in its outline box."""
    frame = '<draw:frame presentation:class="{}" svg:x="1cm" svg:y="{}" svg:width="26cm" svg:height="{}">' \
            "<draw:text-box><text:p>{}</text:p></draw:text-box></draw:frame>"
    slides = "".join(f'<draw:page draw:name="Report {i}" draw:master-page-name="Default">'
                     + frame.format("title", "0.8cm", "2.5cm", f"Report {i}")
                     + frame.format("outline", "3.8cm", "14cm", escape(abstract)) + "</draw:page>"
                     for i, abstract in enumerate(texts, 1))
    styles = ('<office:automatic-styles><style:page-layout style:name="PM1"><style:page-layout-properties'
              ' fo:page-width="28cm" fo:page-height="21cm" style:print-orientation="landscape"/></style:page-layout>'
              '</office:automatic-styles><office:master-styles><style:master-page style:name="Default"'
              ' style:page-layout-name="PM1"/></office:master-styles>')
    text = "\n".join(f"Report {i}\n{abstract}" for i, abstract in enumerate(texts, 1))
    return Source("slides.fodp", flat_odf("presentation", styles, f"<office:presentation>{slides}"
                                          "</office:presentation>"), text, (len(texts), "slides"))


def sheets_source(texts: list[str]) -> Source:
    """A flat ODF spreadsheet for LibreOffice Calc: a sheet for every 250 reports, a row a sentence (report number,
    sentence number, its words, the sentence) under a header row."""
    sheets, text, rows = [], [], 0
    for first in range(0, len(texts), 250):
        name = f"Reports {first + 1}-{min(first + 250, len(texts))}"
        lines = [("Report", "Sentence", "Words", "Text")] + [
            (i, n, len(sentence.split()), sentence) for i, abstract in enumerate(texts[first:first + 250], first + 1)
            for n, sentence in enumerate(re.split(r"(?<=[.!?])\s+", abstract), 1)]
        body = "".join("<table:table-row>" + "".join(ods_cell(value) for value in line) + "</table:table-row>"
                       for line in lines)
        sheets.append(f'<table:table table:name="{name}">{body}</table:table>')
        text += [name] + [" ".join(map(str, line)) for line in lines]
        rows += len(lines)
    return Source("sheets.fods", flat_odf("spreadsheet", "", f"<office:spreadsheet>{''.join(sheets)}"
                                          "</office:spreadsheet>"), "\n".join(text), (rows, "rows"))


def ods_cell(value: int | str) -> str:
    """One ODF spreadsheet cell: a number, or a string."""
    if isinstance(value, int):
        return (f'<table:table-cell office:value-type="float" office:value="{value}"><text:p>{value}</text:p>'
                "</table:table-cell>")
    return f'<table:table-cell office:value-type="string"><text:p>{escape(value)}</text:p></table:table-cell>'


def mail_source(texts: list[str]) -> Source:
    """A message made by Python's email package: the reports as its text/plain body, an HTML alternative of them and
    a CSV attachment (report, words)."""
    from datetime import datetime, timezone
    from email.message import EmailMessage
    from email.utils import format_datetime

    message = EmailMessage()
    message["Subject"] = "Evaluation abstracts, lodex bench"
    message["From"] = "Evaluation desk <desk@example.org>"
    message["To"] = "Readers <readers@example.org>"
    message["Date"] = format_datetime(datetime(2024, 1, 15, 9, 30, tzinfo=timezone.utc))
    message["Message-ID"] = "<abstracts@example.org>"
    plain = "\n\n".join(f"Report {i}\n\n{abstract}" for i, abstract in enumerate(texts, 1))
    message.set_content(plain)
    message.add_alternative("".join(f"<h2>Report {i}</h2><p>{escape(abstract)}</p>"
                                    for i, abstract in enumerate(texts, 1)), subtype="html")
    csv = "".join(f"{i},{len(abstract.split())}\r\n" for i, abstract in enumerate(texts, 1))
    message.add_attachment(csv.encode(), maintype="text", subtype="csv", filename="reports.csv")
    return Source("mail.eml", bytes(message), f"{message['Subject']}\n{plain}")


SOURCES: dict[str, Callable[[list[str]], Source]] = {
    "writer": writer_source, "slides": slides_source, "sheets": sheets_source, "mail": mail_source}
SOURCE_OF = {"docx": "writer", "odt": "writer", "rtf": "writer", "epub": "writer", "pptx": "slides", "odp": "slides",
             "xlsx": "sheets", "ods": "sheets", "eml": "mail"}


def convert(source: Path, fmt: str, out: Path, profile: Path) -> None:
    """Makes `out` (format `fmt`) of `source` with headless LibreOffice, using the user profile `profile`; written
    under another name first, so an interrupted run leaves no half file to be reused."""
    infilter = ["--infilter=HTML (StarWriter)"] if source.suffix == ".html" else []  # Writer, not Writer/Web
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        subprocess.run(["soffice", f"-env:UserInstallation={profile.as_uri()}", "--headless", *infilter,
                        "--convert-to", fmt, "--outdir", tmp, str(source)], check=True, capture_output=True,
                       timeout=600)
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


# --- the figures -----------------------------------------------------------------------------------------------

def words(text: str) -> list[str]:
    return unicodedata.normalize("NFKC", text).split()


def fidelity(pairs: list[tuple[str, str]]) -> tuple[float, float, float]:
    """(word recall, word precision, order: recall of the source's consecutive word pairs) over (source, text)."""
    hit_words = source_words = got_words = hit_pairs = source_pairs = 0
    for source, text in pairs:
        want, got = words(source), words(text)
        hit_words += sum((Counter(want) & Counter(got)).values())
        source_words, got_words = source_words + len(want), got_words + len(got)
        want_pairs, got_pairs = Counter(zip(want, want[1:])), Counter(zip(got, got[1:]))
        hit_pairs += sum((want_pairs & got_pairs).values())
        source_pairs += max(len(want) - 1, 0)
    return hit_words / source_words, hit_words / max(got_words, 1), hit_pairs / source_pairs


def requirements(dist: str, extra: str = "") -> set[str]:
    """The installed distributions `dist` (with `extra`) needs, itself included, by normalized name."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: set[str] = set()
    todo = [(dist, extra)]
    while todo:
        name, wanted = todo.pop()
        key = canonicalize_name(name)
        if key in seen:
            continue
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        seen.add(key)
        for line in requires:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": wanted}):
                todo.append((req.name, ""))
    return seen


def installed_mib(names: set[str]) -> float:
    total = 0
    for name in names:
        for file in metadata.distribution(name).files or []:
            path = Path(str(file.locate()))
            total += path.stat().st_size if path.is_file() else 0
    return total / 2**20


def licence(dist: str, known: str) -> str:
    if known:
        return known
    meta = metadata.metadata(dist)
    found = meta["License-Expression"] or (meta["License"] or "").split("\n")[0]
    classifiers = [c.split(" :: ")[-1].replace(" License", "") for c in meta.get_all("Classifier") or [] if "License ::" in c]
    return (found or ", ".join(classifiers) or "?")[:26]


def cpu_line() -> str:
    model, flags = "?", set()
    with open("/proc/cpuinfo", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("model name") and model == "?":
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags"):
                flags |= {f for f in line.split(":", 1)[1].split() if re.match(r"avx2|avx512|.*vnni", f)}
                break
    return f"cpu: {model}, {os.cpu_count()} cores; flags: {' '.join(sorted(flags)) or 'no avx2/avx512/vnni'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=2000, help="pages of the large PDF (lodex's reader only)")
    parser.add_argument("--speed-pages", type=int, default=200, help="pages of the PDF every library reads")
    parser.add_argument("--libs", default=",".join(LIBRARIES), help="comma-separated, from: " + ", ".join(LIBRARIES))
    parser.add_argument("--evaldata", type=Path, default=EVALDATA, help="default: $LODEX_EVALDATA or ../shared/evaldata")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="keep the PDFs and Office files here (made once, reused later; default a temp dir)")
    parser.add_argument("--formats", default=",".join(FORMATS), type=format_list,
                        help="comma-separated, from: " + ", ".join(FORMATS))
    parser.add_argument("--text-mb", type=float, default=1.0, help="MB of abstracts in each Office file (default 1)")
    parser.add_argument("--alt-python", default=sys.executable,
                        help="interpreter with the alternative libraries of the formats (default: this one)")
    parser.add_argument("--repeat", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--skip-pdf", action="store_true", help="leave out the PDF libraries")
    parser.add_argument("--skip-office", action="store_true", help="leave out the other formats (--formats)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("files", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    with tempfile.TemporaryDirectory(prefix="lodex-extract-") as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        report(args, work)


def format_list(value: str) -> list[str]:
    """--formats: the comma-separated formats, each one lodex reads here."""
    formats = [fmt.strip().lower() for fmt in value.split(",") if fmt.strip()]
    unknown = [fmt for fmt in formats if fmt not in FORMATS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown format(s) {', '.join(unknown)}; known: {', '.join(FORMATS)}")
    return formats


def report(args: argparse.Namespace, work: Path) -> None:
    """The CPU line, then the PDF part and the format part (each unless skipped), then the time it all took."""
    started = time.monotonic()
    print(cpu_line())
    if not args.skip_pdf:
        report_pdf(args, work)
    if not args.skip_office and args.formats:
        report_formats(args, work)
    print(f"({time.monotonic() - started:.0f} s)")


def report_pdf(args: argparse.Namespace, work: Path) -> None:
    """The PDF libraries' table and lodex's reader on the large PDF."""
    big, speed, folder, speed_source = build(work, args.evaldata, args.pages, args.speed_pages)
    files = fidelity_files(speed, speed_source)
    libs = [lib for lib in args.libs.split(",") if lib]
    base_deps = requirements("lodex") - {"pypdfium2"}
    print(f"speed: {speed.name} ({args.speed_pages} pages, {speed.stat().st_size / 2**20:.1f} MiB, Chromium: two columns,"
          f" header, footer); fidelity: {len(files)} PDFs, {sum(len(words(t)) for t in files.values()):,} source words")
    bare = run_child("bare", [])
    rows: dict[str, dict] = {}
    for lib in libs:
        result = run_child(lib, [speed, *(f for f in files if f != speed)])
        if "error" in result:
            print(f"{lib}: not measured ({result['error']})")
            continue
        dist, extra, known = LIBRARIES[lib]
        timing = result["files"][str(speed)]
        rows[lib] = {"version": metadata.version(dist), "licence": licence(dist, known), "rss": result["rss"],
                     "pps": args.speed_pages / timing["seconds"], "cpu": timing["cpu"] * 1000 / args.speed_pages,
                     "fidelity": fidelity([(source, result["files"][str(path)]["text"]) for path, source in files.items()]),
                     "order": {path.stem: fidelity([(source, result["files"][str(path)]["text"])])[2]
                               for path, source in files.items()},
                     "mib": installed_mib(requirements(dist, extra) - base_deps)}
    print_table(rows, bare["rss"])
    print_large(big, folder, bare["rss"])


def print_table(rows: dict[str, dict], bare_rss: float) -> None:
    base = rows.get(BASELINE, {}).get("pps")
    print(f"{'library':<13} {'version':<9} {'licence':<26} {'pages/s':>8} {'x ' + BASELINE:>12} {'cpu ms/p':>8}"
          f" {'peak RSS':>9} {'x bare':>7} {'recall':>7} {'precis.':>7} {'order':>6} {'inst. MiB':>9}")
    for lib, r in rows.items():
        recall, precision, order = r["fidelity"]
        ratio = f"{r['pps'] / base:.2f}" if base else "-"
        print(f"{lib:<13} {r['version']:<9} {r['licence']:<26} {r['pps']:>8,.0f} {ratio:>12} {r['cpu']:>8.1f}"
              f" {r['rss']:>7.0f} M {r['rss'] / bare_rss:>7.2f} {recall:>7.3f} {precision:>7.3f} {order:>6.3f}"
              f" {r['mib']:>9.1f}")
    names = list(next(iter(rows.values()))["order"]) if rows else []
    print("order, file by file: " + " ".join(f"{name:>16}" for name in names))
    for lib, r in rows.items():
        print(f"  {lib:<18}" + " ".join(f"{r['order'][name]:>16.3f}" for name in names))
    print(f"peak RSS 'x bare': against the bare interpreter with lodex imported ({bare_rss:.0f} MiB), same run;"
          f" 'inst. MiB': the package and what it adds to lodex's other dependencies, installed")


def print_large(big: Path, folder: Path, bare_rss: float) -> None:
    pages = int(big.stem.split("-")[1])
    lodex = run_child("lodex", [big])
    txt = run_child("txt", [folder])
    if "error" in lodex or "error" in txt:
        print(f"{pages:,}-page PDF: not measured ({lodex.get('error') or txt.get('error')})")
        return
    timing = lodex["files"][str(big)]
    print(f"{pages:,}-page PDF ({big.stat().st_size / 2**20:.1f} MiB): lodex read_pdf {timing['seconds']:.1f} s"
          f" ({pages / timing['seconds']:,.0f} pages/s, {len(timing['text']):,} chars), peak RSS {lodex['rss']:.0f} MiB"
          f" = {lodex['rss'] / bare_rss:.2f} x the bare interpreter with lodex imported ({bare_rss:.0f} MiB),"
          f" {lodex['rss'] / txt['rss']:.2f} x reading the same text from {pages:,} .txt files ({txt['rss']:.0f} MiB,"
          f" {txt['chars']:,} chars)")


def report_formats(args: argparse.Namespace, work: Path) -> None:
    """Per format: lodex's reader, then its alternative (or why there is none), on the same generated file."""
    files = build_formats(work, args.evaldata, args.formats, args.text_mb)
    bare = run_child("bare", [])
    print(f"formats: {args.text_mb:g} MB of abstracts in each file, made by LibreOffice (soffice --headless"
          f" --convert-to, from HTML and flat ODF) and Python's email package; best of {FORMAT_REPEAT} reads;"
          f" alternatives run by {args.alt_python}")
    print(f"{'format':<6} {'reader':<15} {'version':<8} {'licence':<20} {'file MB':>7} {'MB/s':>7} {'x lodex':>7}"
          f" {'units/s':>15} {'peak RSS':>9} {'x lodex':>7} {'recall':>7} {'precis.':>7}")
    for fmt, (path, source) in files.items():
        lodex = format_row(fmt, "lodex", path, source, sys.executable)
        print_format_row(fmt, "lodex", lodex, lodex)
        if fmt in NO_ALTERNATIVE:
            print(f"{fmt:<6} {'-':<15} {NO_ALTERNATIVE[fmt]}")
            continue
        name = ALTERNATIVES[fmt].name
        print_format_row(fmt, name, format_row(fmt, name, path, source, args.alt_python), lodex)
    print("MB = 10^6 bytes of the file; 'x lodex': the reader's MB/s and peak RSS over lodex's reader's, same run and"
          " file; recall and precision: of words (\"|\" taken for a space), against the text the file was made from;"
          f" peak RSS of the bare interpreter with lodex imported: {bare.get('rss', float('nan')):.0f} MiB")


def format_row(fmt: str, name: str, path: Path, source: Source, python: str) -> dict:
    """One reader's figures on one format's file, measured in a child process of `python` ({"error": …} if it
    failed)."""
    result = run_child(f"{fmt}:{name}", [path], python, FORMAT_REPEAT)
    if "error" in result:
        return result
    timing = result["files"][str(path)]
    recall, precision, _ = fidelity([(source.text, timing["text"].replace("|", " "))])  # "|": a cell separator
    units = f"{source.units[0] / timing['seconds']:,.0f} {source.units[1]}/s" if source.units else ""
    return {"version": result["version"], "licence": result["licence"], "mb": path.stat().st_size / 1e6,
            "mbps": path.stat().st_size / 1e6 / timing["seconds"], "units": units, "rss": result["rss"],
            "recall": recall, "precision": precision}


def print_format_row(fmt: str, name: str, row: dict, lodex: dict) -> None:
    """One line of the format table; ratios to lodex's reader's `lodex` row (none if either was not measured)."""
    if "error" in row:
        print(f"{fmt:<6} {name:<15} not measured ({row['error']})")
        return
    speed = f"{row['mbps'] / lodex['mbps']:.2f}" if "error" not in lodex else "-"
    rss = f"{row['rss'] / lodex['rss']:.2f}" if "error" not in lodex else "-"
    print(f"{fmt:<6} {name:<15} {row['version']:<8} {row['licence'][:20]:<20} {row['mb']:>7.2f} {row['mbps']:>7.2f}"
          f" {speed:>7} {row['units']:>15} {row['rss']:>7.0f} M {rss:>7} {row['recall']:>7.3f}"
          f" {row['precision']:>7.3f}")


if __name__ == "__main__":
    main()
