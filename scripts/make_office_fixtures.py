"""Regenerate tests/fixtures/office/: Office, ODF, EPUB, RTF and mail files made by real producers from evaldata texts.

Needs LibreOffice (`apt-get install -y libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui`)
and the evaluation collections (../shared/evaldata beside the checkout, or LODEX_EVALDATA). Run from the checkout:

    .venv/bin/python scripts/make_office_fixtures.py

What it writes (each file is what its producer made; nothing is edited afterwards except the two hostile zips):
- report.docx, report.odt, report.epub, report.rtf: LibreOffice Writer converting report.html, a report with
  numbered headings on three levels ("2 Methods" › "2.3 Sampling" holds a planted sentence), a table and
  non-ASCII text; the EPUB export splits it into one chapter per top-level heading.
- slides.pptx, slides.odp: LibreOffice Impress converting slides.fodp (flat ODF), four slides, notes on slide 3.
- sheets.xlsx, sheets.ods: LibreOffice Calc converting sheets.fods (flat ODF), two sheets of strings and numbers.
- message.eml (text/plain + text/html alternative and two attachments) and html_only.eml: Python's email package.
- bomb.docx: a docx-shaped zip whose word/document.xml inflates to 64 MiB of zeros (over the 50 MiB default limit);
  bomb_lying.docx: the same with the central directory declaring 1,000 bytes for it (a size that lies);
  corrupt.docx: report.docx cut in half (no central directory).
The planted sentences and known rows the tests look for are the PLANTED_* constants below.
"""

import html
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
from datetime import datetime, timedelta, timezone
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EVAL = Path(os.environ.get("LODEX_EVALDATA", ROOT.parent / "shared" / "evaldata"))
OUT = ROOT / "tests" / "fixtures" / "office"

PLANTED_SAMPLING = "The sampling probe was traversed across the wake at twelve stations behind the trailing edge."
PLANTED_SLIDE3 = "Boundary layer transition moved forward as the free stream turbulence grew."
PLANTED_NOTES = "Speaker note: mention the wind tunnel calibration."
PLANTED_ROW = ["alpha", "beta", "gamma"]
NON_ASCII = "Naïve café readings near 5 Ångström — “quoted” 20 € ✓ Ω"
BOMB_BYTES = 64 * 1024 * 1024


def load(name: str) -> list[dict]:
    with (EVAL / name / "corpus.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def sentences(docs: list[dict], start: int, n: int) -> list[str]:
    """n abstracts from `start` on, each cut to its first few sentences and capitalized."""
    out = []
    for doc in docs[start : start + n]:
        text = " . ".join(doc["text"].split(" . ")[:3]).strip()
        out.append(text[:1].upper() + text[1:])
    return out


def report_html(cran: list[dict]) -> str:
    """A report with numbered headings on three levels, a table and a non-ASCII paragraph."""
    paras = iter(sentences(cran, 0, 40))

    def p(n: int = 2) -> str:
        return "".join(f"<p>{html.escape(next(paras))}</p>\n" for _ in range(n))

    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Aerodynamics of Wings in a Slipstream</title></head><body>
<h1>1 Introduction</h1>
{p(3)}<p>{html.escape(NON_ASCII)}</p>
<h1>2 Methods</h1>
{p()}<h2>2.1 Apparatus</h2>
{p()}<h2>2.2 Measurements</h2>
{p()}<h3>2.2.1 Pressure taps</h3>
{p()}<h2>2.3 Sampling</h2>
{p(1)}<p>{PLANTED_SAMPLING}</p>
{p(1)}<h1>3 Results</h1>
{p()}<table border="1">
<tr><th>Run</th><th>Mach</th><th>Lift coefficient</th></tr>
<tr><td>1</td><td>0.3</td><td>0.52</td></tr>
<tr><td>2</td><td>0.6</td><td>0.61</td></tr>
</table>
{p()}<h1>4 Conclusions</h1>
{p(3)}</body></html>
"""


FODP_HEAD = """<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
 xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"
 xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
 xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0"
 xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0"
 xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0"
 xmlns:dc="http://purl.org/dc/elements/1.1/" office:version="1.3" office:mimetype="application/vnd.oasis.opendocument.presentation">
<office:meta><dc:title>Slipstream Wind Tunnel Tests</dc:title></office:meta>
<office:styles>
 <style:presentation-page-layout style:name="AL1T1">
  <presentation:placeholder presentation:object="title" svg:x="1.4cm" svg:y="0.6cm" svg:width="25cm" svg:height="2.6cm"/>
  <presentation:placeholder presentation:object="outline" svg:x="1.4cm" svg:y="3.7cm" svg:width="25cm" svg:height="10cm"/>
 </style:presentation-page-layout>
</office:styles>
<office:automatic-styles>
 <style:page-layout style:name="PM1"><style:page-layout-properties fo:page-width="28cm" fo:page-height="15.75cm"/></style:page-layout>
</office:automatic-styles>
<office:master-styles><style:master-page style:name="Default" style:page-layout-name="PM1">
 <draw:frame presentation:style-name="Default-title" presentation:class="title" presentation:placeholder="true"
  svg:x="1.4cm" svg:y="0.6cm" svg:width="25cm" svg:height="2.6cm"><draw:text-box/></draw:frame>
 <draw:frame presentation:style-name="Default-outline1" presentation:class="outline" presentation:placeholder="true"
  svg:x="1.4cm" svg:y="3.7cm" svg:width="25cm" svg:height="10cm"><draw:text-box/></draw:frame>
</style:master-page></office:master-styles>
<office:body><office:presentation>
"""


TITLE_FRAME = (
    '<draw:frame presentation:style-name="Default-title" presentation:class="title" svg:x="1.4cm" svg:y="0.6cm" svg:width="25cm" svg:height="2.6cm">'
)
OUTLINE_FRAME = (
    '<draw:frame presentation:style-name="Default-outline1" presentation:class="outline" svg:x="1.4cm" '
    'svg:y="3.7cm" svg:width="25cm" svg:height="10cm">'
)
NOTES_FRAME = '<draw:frame presentation:class="notes" svg:x="2cm" svg:y="14cm" svg:width="17cm" svg:height="10cm">'


def slide(number: int, title: str, bullets: list[str], notes: str = "") -> str:
    """One draw:page: a title placeholder, an outline of bullets, and speaker notes when given."""
    items = "".join(f"<text:list-item><text:p>{html.escape(b)}</text:p></text:list-item>" for b in bullets)
    note = (
        (f"<presentation:notes>{NOTES_FRAME}<draw:text-box><text:p>{html.escape(notes)}</text:p></draw:text-box></draw:frame></presentation:notes>")
        if notes
        else ""
    )
    return (
        f'<draw:page draw:name="page{number}" draw:master-page-name="Default" '
        f'presentation:presentation-page-layout-name="AL1T1">'
        f"{TITLE_FRAME}<draw:text-box><text:p>{html.escape(title)}</text:p></draw:text-box></draw:frame>"
        f"{OUTLINE_FRAME}<draw:text-box><text:list>{items}</text:list></draw:text-box></draw:frame>{note}</draw:page>\n"
    )


def slides_fodp(cran: list[dict]) -> str:
    texts = sentences(cran, 100, 8)
    pages = [
        slide(1, "Slipstream Wind Tunnel Tests", ["Cranfield collection, 1960s aerodynamics", texts[0]]),
        slide(2, "Apparatus", texts[1:3]),
        slide(3, "Transition", [PLANTED_SLIDE3, texts[3]], PLANTED_NOTES),
        slide(4, "Conclusions", texts[4:6]),
    ]
    return FODP_HEAD + "".join(pages) + "</office:presentation></office:body></office:document>\n"


FODS_HEAD = """<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
 xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"
 xmlns:dc="http://purl.org/dc/elements/1.1/" office:version="1.3" office:mimetype="application/vnd.oasis.opendocument.spreadsheet">
<office:meta><dc:title>Wind Tunnel Runs</dc:title></office:meta>
<office:body><office:spreadsheet>
"""


def cell(value: object) -> str:
    if isinstance(value, (int, float)):
        return f'<table:table-cell office:value-type="float" office:value="{value}"><text:p>{value}</text:p></table:table-cell>'
    return f'<table:table-cell office:value-type="string"><text:p>{html.escape(str(value))}</text:p></table:table-cell>'


def sheet(name: str, rows: list[list[object]]) -> str:
    body = "".join("<table:table-row>" + "".join(cell(v) for v in row) + "</table:table-row>\n" for row in rows)
    return f'<table:table table:name="{html.escape(name)}">\n{body}</table:table>\n'


def sheets_fods(cran: list[dict]) -> str:
    runs: list[list[object]] = [["Run", "Mach", "Lift coefficient", "Remark"]]
    runs += [[i, round(0.1 * i, 1), round(0.4 + 0.03 * i, 2), f"run {i} nominal"] for i in range(1, 9)]
    runs.insert(4, PLANTED_ROW)
    notes: list[list[object]] = [["Document", "Abstract"]]
    notes += [[doc["_id"], text] for doc, text in zip(cran[200:205], sentences(cran, 200, 5))]
    return FODS_HEAD + sheet("Runs", runs) + sheet("Notes", notes) + "</office:spreadsheet></office:body></office:document>\n"


def soffice(source: Path, target: str, outdir: Path, profile: Path) -> Path:
    """LibreOffice headless converting `source` to format `target` (e.g. "docx") in outdir."""
    filters = {".html": ["--infilter=HTML (StarWriter)"]}.get(source.suffix, [])
    cmd = ["soffice", f"-env:UserInstallation=file://{profile}", "--headless", *filters, "--convert-to", target, "--outdir", str(outdir), str(source)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    produced = outdir / (source.stem + "." + target.split(":")[0])
    if not produced.exists():
        sys.exit(f"soffice did not write {produced}")
    return produced


def office_files(cran: list[dict]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work, profile = Path(tmp), Path(tmp) / "profile"
        sources = {"report.html": report_html(cran), "slides.fodp": slides_fodp(cran), "sheets.fods": sheets_fods(cran)}
        targets = {"report.html": ["docx", "odt", "epub", "rtf"], "slides.fodp": ["pptx", "odp"], "sheets.fods": ["xlsx", "ods"]}
        for name, content in sources.items():
            (work / name).write_text(content, encoding="utf-8")
            for target in targets[name]:
                produced = soffice(work / name, target, work, profile)
                shutil.copy(produced, OUT / produced.name)


def mail_files(med: list[dict]) -> None:
    texts = sentences(med, 0, 6)
    date = datetime(2021, 3, 4, 9, 30, tzinfo=timezone(timedelta(hours=1)))
    msg = EmailMessage()
    msg["Subject"] = "Plasma glucose results – café meeting"
    msg["From"] = "Ada Lovelace <ada@example.org>"
    msg["To"] = "Team <team@example.org>"
    msg["Date"] = format_datetime(date)
    msg["Message-ID"] = "<results-1@example.org>"
    msg.set_content("Hello team,\n\n" + "\n\n".join(texts[:3]) + "\n\nRegards,\nAda\n")
    msg.add_alternative(
        "<html><body><p>Hello team,</p>" + "".join(f"<p>{html.escape(t)}</p>" for t in texts[:3]) + "<p>Regards,<br>Ada</p></body></html>",
        subtype="html",
    )
    msg.add_attachment(
        b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n", maintype="application", subtype="pdf", filename="results.pdf"
    )
    msg.add_attachment("run,glucose\n1,5.2\n2,6.1\n", subtype="csv", filename="data.csv")
    (OUT / "message.eml").write_bytes(msg.as_bytes())

    only = EmailMessage()
    only["Subject"] = "Fetal plasma levels"
    only["From"] = "bob@example.org"
    only["Date"] = format_datetime(date + timedelta(days=1))
    only.set_content(
        "<html><head><title>ignored</title><style>p {color: red}</style></head><body><h1>Summary</h1>"
        + "".join(f"<p>{html.escape(t)}</p>" for t in texts[3:6])
        + "</body></html>",
        subtype="html",
    )
    (OUT / "html_only.eml").write_bytes(only.as_bytes())


def bomb_files(report_docx: Path) -> None:
    """A docx-shaped zip bomb, its twin whose declared size lies, and a truncated docx."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr(
            "[Content_Types].xml",
            '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.'
            'openxmlformats.org/package/2006/content-types"><Override PartName="/word/document.xml" ContentType='
            '"application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>',
        )
        zf.writestr(
            "_rels/.rels",
            '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"/>',
        )
        with zf.open("word/document.xml", "w") as entry:
            zero = bytes(1024 * 1024)
            for _ in range(BOMB_BYTES // len(zero)):
                entry.write(zero)
    bomb = buf.getvalue()
    (OUT / "bomb.docx").write_bytes(bomb)
    (OUT / "bomb_lying.docx").write_bytes(lie_about_size(bomb, "word/document.xml", 1000))
    data = report_docx.read_bytes()
    (OUT / "corrupt.docx").write_bytes(data[: len(data) // 2])


def lie_about_size(data: bytes, name: str, size: int) -> bytes:
    """`data` with its central directory declaring `size` inflated bytes for entry `name` (the entry is unchanged)."""
    out = bytearray(data)
    at = zipfile.ZipFile(io.BytesIO(data)).start_dir  # where the central directory begins
    while out[at : at + 4] == b"PK\x01\x02":
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", out, at + 28)
        if out[at + 46 : at + 46 + name_len].decode() == name:
            struct.pack_into("<I", out, at + 24, size)
            return bytes(out)
        at += 46 + name_len + extra_len + comment_len
    raise SystemExit(f"{name} not found in the central directory")


def main() -> None:
    if not shutil.which("soffice"):
        sys.exit("LibreOffice is needed: apt-get install -y libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui")
    OUT.mkdir(parents=True, exist_ok=True)
    cran, med = load("cranfield"), load("med")
    office_files(cran)
    mail_files(med)
    bomb_files(OUT / "report.docx")
    total = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"wrote {len(list(OUT.iterdir()))} files, {total / 1e6:.2f} MB, in {OUT}")


if __name__ == "__main__":
    main()
