"""Regenerates the PDF fixtures of tests/test_pdf_reader.py (tests/fixtures/pdf/) from the evaluation texts, with real
PDF producers, never with the library lodex reads PDFs with.

usage: python scripts/make_pdf_fixtures.py [--evaldata DIR] [--out tests/fixtures/pdf]
       (--evaldata: default $LODEX_EVALDATA, else ../shared/evaldata beside the checkout)
needs: apt-get install -y chromium libreoffice-writer-nogui hyphen-en-us qpdf

  two_column.pdf       Chromium: a full-width heading over CSS `column-count: 2` text (both columns full)
  two_column_rows.pdf  Chromium: two columns of text laid out as a table of lines, so that the content stream runs
                       row by row across both columns: only the characters' boxes tell the columns apart
  two_column_writer.pdf  LibreOffice Writer: a heading across an A4 page over a two-column section (justified,
                       hyphenated), which pdfium's own order reads line across line
  forty_pages.pdf      LibreOffice Writer: 40 A5 pages, one abstract each, justified with automatic hyphenation, a
                       running header and a "Page N of 40" footer, the planted sentence (PLANTED) on page 37
  layout.pdf           Chromium: a justified paragraph, a table of short cells, a numbered list, two CSS columns, a
                       line with a right-floated part whose gap falls in the columns' gutter, a paragraph
  outline.pdf          Chromium (--generate-pdf-document-outline): three pages of h1/h2 headings, bookmarked
  soft_hyphens.pdf     Chromium: narrow justified text with soft hyphens in long words (line ends broken with U+2010)
  rotated.pdf          Chromium: page 1 text turned clockwise, page 2 counter-clockwise, page 3 a level paragraph
                       and a turned one (read level first)
  running_titles.pdf   Chromium: 8 A5 pages, one abstract each, under a running header that changes from page to page
                       (chapter title and folio on left pages, folio and section title on right ones; a new chapter
                       every 4 pages) over a "- N -" footer
  side_by_side.pdf     Chromium: two blocks of short lines (two words each, like code) side by side, written one
                       block after the other, above a paragraph
  scanned.pdf          Chromium printing a page that holds only a PNG image (made here with zlib): no text layer
  encrypted.pdf        qpdf --encrypt user owner 256 of two_column.pdf: opening it needs a password
  owner_only.pdf       qpdf --encrypt "" owner 256 of two_column.pdf: restrictions only, it opens without one
  truncated.pdf        the first half of two_column.pdf's bytes
  expected.json        per fixture, the source text of each page in reading order (running headers left out) and the
                       title its producer recorded; bench/readers/extract.py scores text fidelity against it too
The texts are CISI abstracts (`corpus.jsonl`), chosen deterministically; each run rewrites every file (the PDFs
differ only in their creation dates and IDs).
"""

import argparse
import html
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import textwrap
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLANTED = "The quokka census of Rottnest Island is the planted sentence that only page thirty seven holds."
HEADER = "CISI abstracts, a test collection"
CHROMIUM = [
    "/usr/bin/chromium",
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-pdf-header-footer",
]


def abstracts(evaldata: Path) -> list[str]:
    """CISI abstracts of 400 to 1,000 characters without hyphenated compounds (a compound broken at a line end would
    be joined like a hyphenated word), in file order."""
    out = []
    with (evaldata / "cisi" / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            text = " ".join(json.loads(line)["text"].split())
            if 400 <= len(text) <= 1000 and not re.search(r"\w-|-\w|[^\x20-\x7e]", text):
                out.append(text)
    return out


def chromium_pdf(html_text: str, out: Path, work: Path, *flags: str) -> None:
    """Print an HTML page to `out` with headless Chromium."""
    source = work / (out.stem + ".html")
    source.write_text(html_text, encoding="utf-8")
    profile = tempfile.mkdtemp(prefix="chromium-", dir=work)
    subprocess.run(
        [*CHROMIUM, *flags, f"--user-data-dir={profile}", f"--print-to-pdf={out}", source.as_uri()], check=True, capture_output=True, timeout=120
    )


def page_html(title: str, style: str, body: str) -> str:
    head = f"<title>{html.escape(title)}</title>" if title else ""
    return f'<!doctype html><html lang="en"><head><meta charset="utf-8">{head}<style>{style}</style></head><body>{body}</body></html>'


def two_column(texts: list[str], out: Path, work: Path) -> dict:
    heading, paragraphs = "Studies of library use", texts[:3]
    style = "@page { size: A4; margin: 2cm } body { font: 11pt serif } .cols { column-count: 2 }"
    body = f"<h1>{heading}</h1><div class=cols>" + "".join(f"<p>{html.escape(t)}</p>" for t in paragraphs) + "</div>"
    chromium_pdf(page_html("Studies of library use in two columns", style, body), out, work)
    return {"title": "Studies of library use in two columns", "pages": [" ".join([heading, *paragraphs])]}


def two_column_rows(texts: list[str], out: Path, work: Path) -> dict:
    left = textwrap.wrap(texts[3], 46, break_on_hyphens=False)
    right = textwrap.wrap(texts[4], 46, break_on_hyphens=False)
    rows = max(len(left), len(right))
    left, right = left + [""] * (rows - len(left)), right + [""] * (rows - len(right))
    style = (
        "@page { size: A4; margin: 2cm } body { font: 11pt serif } table { width: 100%; table-layout: fixed;"
        " border-collapse: collapse } td { padding: 0 0.5em; white-space: nowrap }"
    )
    cells = "".join(f"<tr><td>{html.escape(a)}</td><td>{html.escape(b)}</td></tr>" for a, b in zip(left, right))
    chromium_pdf(page_html("", style, f"<table>{cells}</table>"), out, work)
    return {"title": "", "pages": [texts[3] + " " + texts[4]], "columns": [texts[3], texts[4]]}


def layout(texts: list[str], out: Path, work: Path) -> dict:
    table = [("Name", "Value", "Unit"), ("Alpha", "12", "mm"), ("Beta", "34", "kg"), ("Gamma ray flux", "56", "per second")]
    items = ["First item of the list, a few words long.", "Second item, also a few words.", "Third item ends the list."]
    style = (
        "@page { size: A4; margin: 2cm } body { font: 11pt serif } p.j { text-align: justify }"
        " .cols { column-count: 2; text-align: justify } td, th { padding: 0 1em; text-align: left }"
    )
    body = (
        f"<p class=j>{html.escape(texts[50])}</p><table>"
        + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in table)
        + "</table><ol>"
        + "".join(f"<li>{item}</li>" for item in items)
        + f"</ol><div class=cols>{html.escape(texts[51])}"
        f"<p>The end of the second column.</p></div><p>Short left line <span style='float: right'>right part 12"
        f"</span></p><p class=j>{html.escape(texts[52])}</p>"
    )
    chromium_pdf(page_html("Layouts", style, body), out, work)
    lines = [" ".join(row) for row in table] + [f"{n}. {item}" for n, item in enumerate(items, 1)]
    text = " ".join([texts[50], *lines, texts[51], "The end of the second column.", "Short left line right part 12", texts[52]])
    return {"title": "Layouts", "pages": [text], "lines": lines + ["Short left line right part 12"]}


def outline(texts: list[str], out: Path, work: Path) -> dict:
    """Three pages of headings (h1, h2) that Chromium turns into the PDF's outline (bookmarks)."""
    pages = [
        [("h1", "1 Introduction", texts[53]), ("h2", "1.1 Scope of the study", texts[54])],
        [("h1", "2 Methods", texts[55]), ("h2", "2.1 Sampling of libraries", texts[56])],
        [("h1", "3 Results", texts[57])],
    ]
    style = "@page { size: A4; margin: 2cm } body { font: 11pt serif } section { break-after: page }"
    body = "".join(
        "<section>" + "".join(f"<{tag}>{head}</{tag}><p>{html.escape(text)}</p>" for tag, head, text in page) + "</section>" for page in pages
    )
    chromium_pdf(page_html("A report with an outline", style, body), out, work, "--generate-pdf-document-outline")
    paths, sections = {"h1": ""}, []
    for number, page in enumerate(pages, 1):
        for tag, head, text in page:
            path = head if tag == "h1" else f"{paths['h1']} › {head}"
            paths[tag] = head
            sections.append({"page": number, "heading": head, "path": path, "first_words": " ".join(text.split()[:6])})
    return {"title": "A report with an outline", "pages": [" ".join(f"{h} {t}" for _, h, t in page) for page in pages], "sections": sections}


def soft_hyphens(texts: list[str], out: Path, work: Path) -> dict:
    def shy(word: str) -> str:
        return "&shy;".join(word[i : i + 3] for i in range(0, len(word), 3)) if len(word) >= 8 and word.isalpha() else word

    style = "@page { size: A5; margin: 1.5cm } body { font: 12pt serif; text-align: justify } p { width: 5.5cm }"
    body = "<p>" + " ".join(shy(html.escape(w)) for w in texts[5].split()) + "</p>"
    chromium_pdf(page_html("Abstracting and its teaching", style, body), out, work)
    return {"title": "Abstracting and its teaching", "pages": [texts[5]]}


def rotated(texts: list[str], out: Path, work: Path) -> dict:
    # each box sits at the top of its page before it is turned (a box across a page break would be cut in two)
    style = (
        "@page { size: A5; margin: 1cm } body { font: 11pt serif; margin: 0 } section { position: relative;"
        " height: 18.9cm; break-after: page } div { position: absolute; top: 0; width: 17cm;"
        " transform-origin: top left } .cw { left: 12.5cm; transform: rotate(90deg) }"
        " .ccw { left: 0; transform: translateY(17.5cm) rotate(-90deg) } .level { width: 12.5cm }"
    )
    pages = [
        f"<section><div class=cw>{html.escape(texts[46])}</div></section>",
        f"<section><div class=ccw>{html.escape(texts[47])}</div></section>",
        f'<section><div class=level>{html.escape(texts[48])}</div><div class=ccw style="left: 1cm">{html.escape(texts[49])}</div></section>',
    ]
    chromium_pdf(page_html("Turned text", style, "".join(pages)), out, work)
    return {"title": "Turned text", "pages": [texts[46], texts[47], texts[48] + " " + texts[49]]}


def side_by_side(texts: list[str], out: Path, work: Path) -> dict:
    """Two floated blocks of two-word lines, level with each other, then a paragraph across the page."""
    left, right = texts[66].split()[:24], texts[67].split()[:24]

    def pairs(ws: list[str]) -> list[str]:
        return [" ".join(ws[i : i + 2]) for i in range(0, len(ws), 2)]

    style = (
        "@page { size: A4; margin: 2cm } body { font: 11pt monospace } .block { float: left; width: 40%;"
        " margin-right: 10% } p { clear: both; font: 11pt serif; padding-top: 1em }"
    )
    body = (
        "".join(f"<div class=block>{'<br>'.join(html.escape(line) for line in pairs(words))}</div>" for words in (left, right))
        + f"<p>{html.escape(texts[68])}</p>"
    )
    chromium_pdf(page_html("Side by side", style, body), out, work)
    return {"title": "Side by side", "pages": [" ".join([*left, *right, texts[68]])], "columns": [" ".join(left), " ".join(right)]}


RUNNING_CHAPTERS = ["Getting started", "Evaluation of indexing"]


def running_titles(texts: list[str], out: Path, work: Path) -> dict:
    """8 pages whose headers change: "Chapter 1: Getting started  1" on left pages, "2  1.1 GETTING STARTED" on
    right ones."""
    style = (
        "@page { size: A5; margin: 1.2cm } body { font: 11pt serif; margin: 0 } section { height: 17.5cm;"
        " position: relative; break-after: page; overflow: hidden } .head { display: flex;"
        " justify-content: space-between; font-style: italic; margin-bottom: 1.5em }"
        " .foot { position: absolute; bottom: 0; width: 100%; text-align: center } p { text-align: justify }"
    )
    pages, body = texts[58:66], []
    for index, text in enumerate(pages):
        folio, chapter = index + 1, index // 4
        if index % 2 == 0:
            head = [f"Chapter {chapter + 1}: {RUNNING_CHAPTERS[chapter]}", str(folio)]
        else:
            head = [str(folio), f"{chapter + 1}.{index % 4} {RUNNING_CHAPTERS[chapter].upper()}"]
        body.append(
            f"<section><div class=head><span>{html.escape(head[0])}</span><span>{html.escape(head[1])}</span>"
            f"</div><p>{html.escape(text)}</p><div class=foot>- {folio} -</div></section>"
        )
    chromium_pdf(page_html("Running titles", style, "".join(body)), out, work)
    return {"title": "Running titles", "pages": pages}


def png(width: int, height: int) -> bytes:
    """A grey-scale PNG of dark bars on white, like a scanned page of text lines."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = []
    for y in range(height):
        line = bytes(40 if (y // 6) % 3 == 1 and 20 <= x < width - 20 - (y * 7) % 60 else 250 for x in range(width))
        rows.append(b"\x00" + line)
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"".join(rows), 9)) + chunk(b"IEND", b"")


def scanned(out: Path, work: Path) -> dict:
    (work / "scan.png").write_bytes(png(300, 400))
    style = "@page { size: A5; margin: 1cm } img { width: 100% }"
    chromium_pdf(page_html("A scanned page", style, '<img src="scan.png" alt="">'), out, work)
    return {"title": "A scanned page", "pages": [""]}


def writer_pdf(fodt: str, out: Path, work: Path) -> None:
    """Convert a flat ODT document to `out` with LibreOffice Writer, headless."""
    source = work / (out.stem + ".fodt")
    source.write_text(fodt, encoding="utf-8")
    profile = (work / "lo-profile").as_uri()
    subprocess.run(
        ["soffice", f"-env:UserInstallation={profile}", "--headless", "--convert-to", "pdf", "--outdir", str(work), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    shutil.move(work / (out.stem + ".pdf"), out)


def two_column_writer(texts: list[str], out: Path, work: Path) -> dict:
    """One A4 page from LibreOffice Writer: a heading across the page over a two-column section, justified and
    hyphenated."""
    heading, paragraphs = "Library services in two columns", texts[58:62]
    body = (
        f'<text:h text:style-name="First" text:outline-level="1">{heading}</text:h>'
        '<text:section text:style-name="Columns" text:name="C">'
        + "".join(f'<text:p text:style-name="Standard">{html.escape(t)}</text:p>' for t in paragraphs)
        + "</text:section>"
    )
    fodt = FODT.format(title="Library services", header="", paragraphs=body)
    fodt = fodt.replace(
        "<office:automatic-styles>",
        '<office:automatic-styles><style:style style:name="Columns" '
        'style:family="section"><style:section-properties><style:columns fo:column-count="2" '
        'fo:column-gap="0.6cm"/></style:section-properties></style:style>',
    )
    fodt = re.sub(r"<style:footer>.*?</style:footer>", "", fodt, flags=re.DOTALL)  # and an empty header
    writer_pdf(fodt.replace('style:page-layout-name="A5"', 'style:page-layout-name="A4"'), out, work)
    return {"title": "Library services", "pages": [" ".join([heading, *paragraphs])]}


def forty_pages(texts: list[str], out: Path, work: Path) -> dict:
    """40 pages from LibreOffice Writer (a flat ODT converted headless); the planted sentence goes into page 37."""
    pages = texts[6:46]
    first, rest = pages[36].split(". ", 1)
    pages[36] = f"{first}. {PLANTED} {rest}"
    paragraphs = "\n".join(f'<text:p text:style-name="{"First" if i == 0 else "Next"}">{html.escape(t)}</text:p>' for i, t in enumerate(pages))
    writer_pdf(FODT.format(title="Library and information science abstracts", header=HEADER, paragraphs=paragraphs), out, work)
    return {
        "title": "Library and information science abstracts",
        "pages": pages,
        "header": HEADER,
        "footer": "Page {n} of 40",
        "planted": PLANTED,
        "planted_page": 37,
    }


FODT = """<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
 xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"
 xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" xmlns:dc="http://purl.org/dc/elements/1.1/"
 office:version="1.3" office:mimetype="application/vnd.oasis.opendocument.text">
<office:meta><dc:title>{title}</dc:title></office:meta>
<office:styles>
<style:style style:name="Standard" style:family="paragraph">
 <style:paragraph-properties fo:text-align="justify" fo:hyphenation-ladder-count="no-limit"/>
 <style:text-properties style:font-name="Liberation Serif" fo:font-family="'Liberation Serif'" fo:font-size="12pt"
  fo:language="en" fo:country="US" fo:hyphenate="true" fo:hyphenation-remain-char-count="2"
  fo:hyphenation-push-char-count="2"/>
</style:style>
</office:styles>
<office:automatic-styles>
<style:style style:name="First" style:family="paragraph" style:parent-style-name="Standard" style:master-page-name="Report"/>
<style:style style:name="Next" style:family="paragraph" style:parent-style-name="Standard">
 <style:paragraph-properties fo:break-before="page"/>
</style:style>
<style:page-layout style:name="A4">
 <style:page-layout-properties fo:page-width="21cm" fo:page-height="29.7cm" fo:margin-top="2cm"
  fo:margin-bottom="2cm" fo:margin-left="2cm" fo:margin-right="2cm"/>
</style:page-layout>
<style:page-layout style:name="A5">
 <style:page-layout-properties fo:page-width="14.8cm" fo:page-height="21cm" fo:margin-top="1.5cm"
  fo:margin-bottom="1.5cm" fo:margin-left="2cm" fo:margin-right="2cm"/>
 <style:header-style><style:header-footer-properties fo:min-height="0cm" fo:margin-bottom="0.6cm"/></style:header-style>
 <style:footer-style><style:header-footer-properties fo:min-height="0cm" fo:margin-top="0.6cm"/></style:footer-style>
</style:page-layout>
</office:automatic-styles>
<office:master-styles>
<style:master-page style:name="Report" style:page-layout-name="A5">
 <style:header><text:p>{header}</text:p></style:header>
 <style:footer><text:p>Page <text:page-number text:select-page="current">1</text:page-number> of
  <text:page-count>40</text:page-count></text:p></style:footer>
</style:master-page>
</office:master-styles>
<office:body><office:text>
{paragraphs}
</office:text></office:body></office:document>
"""


def qpdf_encrypt(source: Path, out: Path, user: str) -> None:
    subprocess.run(["qpdf", "--encrypt", user, "owner-secret", "256", "--", str(source), str(out)], check=True)


def only(name: str, texts: list[str], out: Path) -> None:
    """One fixture made again and its entry of expected.json replaced."""
    makers = {
        "two_column.pdf": two_column,
        "two_column_rows.pdf": two_column_rows,
        "layout.pdf": layout,
        "outline.pdf": outline,
        "soft_hyphens.pdf": soft_hyphens,
        "rotated.pdf": rotated,
        "running_titles.pdf": running_titles,
        "side_by_side.pdf": side_by_side,
    }
    expected = json.loads((out / "expected.json").read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix="lodex-pdf-fixtures-") as tmp:
        expected[name] = makers[name](texts, out / name, Path(tmp))
    (out / "expected.json").write_text(json.dumps(expected, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{(out / name).stat().st_size:>9,}  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--evaldata", type=Path, default=Path(os.environ.get("LODEX_EVALDATA", ROOT.parent / "shared" / "evaldata")))
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures" / "pdf")
    parser.add_argument("--only", help="regenerate this one Chromium fixture (e.g. running_titles.pdf), keeping the rest")
    args = parser.parse_args()
    if args.only:
        return only(args.only, abstracts(args.evaldata), args.out)
    args.out.mkdir(parents=True, exist_ok=True)
    texts = abstracts(args.evaldata)
    expected = {}
    with tempfile.TemporaryDirectory(prefix="lodex-pdf-fixtures-") as tmp:
        work = Path(tmp)
        expected["two_column.pdf"] = two_column(texts, args.out / "two_column.pdf", work)
        expected["two_column_rows.pdf"] = two_column_rows(texts, args.out / "two_column_rows.pdf", work)
        expected["layout.pdf"] = layout(texts, args.out / "layout.pdf", work)
        expected["outline.pdf"] = outline(texts, args.out / "outline.pdf", work)
        expected["soft_hyphens.pdf"] = soft_hyphens(texts, args.out / "soft_hyphens.pdf", work)
        expected["rotated.pdf"] = rotated(texts, args.out / "rotated.pdf", work)
        expected["side_by_side.pdf"] = side_by_side(texts, args.out / "side_by_side.pdf", work)
        expected["running_titles.pdf"] = running_titles(texts, args.out / "running_titles.pdf", work)
        expected["scanned.pdf"] = scanned(args.out / "scanned.pdf", work)
        expected["two_column_writer.pdf"] = two_column_writer(texts, args.out / "two_column_writer.pdf", work)
        expected["forty_pages.pdf"] = forty_pages(texts, args.out / "forty_pages.pdf", work)
    qpdf_encrypt(args.out / "two_column.pdf", args.out / "encrypted.pdf", "user-secret")
    qpdf_encrypt(args.out / "two_column.pdf", args.out / "owner_only.pdf", "")
    data = (args.out / "two_column.pdf").read_bytes()
    (args.out / "truncated.pdf").write_bytes(data[: len(data) // 2])
    (args.out / "expected.json").write_text(json.dumps(expected, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    for path in sorted(args.out.iterdir()):
        print(f"{path.stat().st_size:>9,}  {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


if __name__ == "__main__":
    main()
