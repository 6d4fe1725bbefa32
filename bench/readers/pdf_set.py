"""The real-PDF regression set of bench/readers/pdf_quality.py: documentation PDFs typeset by TeX that Debian ships (downloaded
with apt-get download, unpacked with dpkg-deb -x), and a manual printed by headless Chromium whose page texts,
running headers, columns and hyphenation points are known."""

import html
import importlib.util
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# (Debian package, the PDF's path inside it, what it tests). Versions: Debian 12 (bookworm).
DEBIAN = [
    ("r-doc-pdf", "usr/share/R/doc/manual/R-intro.pdf", "texinfo: 'Chapter 5: <title> 12' headers, folio footers"),
    ("r-doc-pdf", "usr/share/R/doc/manual/R-admin.pdf", "texinfo headers; '2 Installing R under Unix-alikes 7'"),
    ("r-doc-pdf", "usr/share/R/doc/manual/R-data.pdf", "texinfo headers"),
    ("r-doc-pdf", "usr/share/R/doc/manual/R-lang.pdf", "texinfo headers"),
    (
        "texlive-latex-recommended-doc",
        "usr/share/doc/texlive-doc/latex/microtype/microtype.pdf",
        "pdfTeX font expansion and protrusion (microtype); 'OPTIONS 5' headers; layered text on page 3",
    ),
    (
        "texlive-latex-recommended-doc",
        "usr/share/doc/texlive-doc/latex/listings/listings.pdf",
        "side-by-side code listings (narrow columns); two-column index",
    ),
    ("texlive-latex-recommended-doc", "usr/share/doc/texlive-doc/latex/fancyvrb/fancyvrb-doc.pdf", "side-by-side verbatim blocks"),
    (
        "texlive-latex-recommended-doc",
        "usr/share/doc/texlive-doc/latex/crop/crop.pdf",
        "margin notes beside numbered code (ltxdoc), two-column index",
    ),
    ("texlive-latex-recommended-doc", "usr/share/doc/texlive-doc/latex/caption/caption.pdf", "ltxdoc with running headers and a two-column index"),
    ("texlive-latex-recommended-doc", "usr/share/doc/texlive-doc/latex/etoolbox/etoolbox.pdf", "KOMA-script headers"),
    ("texlive-latex-recommended-doc", "usr/share/doc/texlive-doc/latex/fontspec/fontspec.pdf", "xelatex; tables of names in columns"),
    ("texlive-latex-recommended-doc", "usr/share/doc/texlive-doc/latex/booktabs/booktabs.pdf", "tables"),
    (
        "texlive-base",
        "usr/share/doc/texlive-doc/pdftex/manual/pdftex-a.pdf",
        "pdfTeX's manual: expanded TeX Gyre Pagella whose font descriptor has no descent (pdfium's loose boxes are the"
        " glyphs'); the GFDL in four narrow columns",
    ),
]
GENERATED = "chromium-manual.pdf"
CHAPTERS = ["Getting started", "Collections and their use", "Evaluation of indexing", "Retrieval in practice"]


def debian_set(out: Path) -> list[Path]:
    """The Debian PDFs in `out` (copied from packages downloaded into out/debs when missing)."""
    debs, unpacked = out / "debs", out / "unpacked"
    debs.mkdir(parents=True, exist_ok=True)
    unpacked.mkdir(exist_ok=True)
    for package in sorted({p for p, _, _ in DEBIAN}):
        if not list(debs.glob(f"{package}_*.deb")):
            subprocess.run(["apt-get", "download", "-qq", package], cwd=debs, check=True)
        deb = sorted(debs.glob(f"{package}_*.deb"))[-1]
        if not (unpacked / package).exists():
            subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked / (package + ".part"))], check=True)
            (unpacked / (package + ".part")).rename(unpacked / package)
    files = []
    for package, member, _ in DEBIAN:
        target = out / Path(member).name
        if not target.exists():
            target.write_bytes((unpacked / package / member).read_bytes())
        files.append(target)
    return files


def _fixtures_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("make_pdf_fixtures", ROOT / "scripts" / "make_pdf_fixtures.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _shy(word: str) -> str:
    """A long word with soft hyphens every 3 letters (where Chromium may break it with a hyphen)."""
    return "&shy;".join(word[i : i + 3] for i in range(0, len(word), 3)) if len(word) >= 9 and word.isalpha() else word


def generated(out: Path, evaldata: Path) -> dict:
    """A 16-page A5 manual printed by Chromium: a running header that changes (chapter title and folio on left pages,
    section title and folio on right pages), a footer with the folio, every other page in two narrow justified
    columns, and soft hyphens in long words. Returns what its pages hold: body (the source text in reading order,
    furniture aside), columns (each column's text, two-column pages), running (the header and footer lines)."""
    target, expected_file = out / GENERATED, out / (GENERATED + ".json")
    if target.exists() and expected_file.exists():
        return json.loads(expected_file.read_text(encoding="utf-8"))
    fixtures = _fixtures_module()
    texts = [t for t in fixtures.abstracts(evaldata) if len(t) > 500]
    style = (
        "@page { size: A5; margin: 1cm } body { font: 10pt serif; margin: 0 } section { height: 18.5cm;"
        " position: relative; break-after: page; overflow: hidden } .head { display: flex;"
        " justify-content: space-between; font-style: italic; margin-bottom: 1.2em }"
        " .foot { position: absolute; bottom: 0; width: 100%; text-align: center }"
        " .cols { column-count: 2; column-gap: 1.2em; text-align: justify } p { margin: 0 0 0.6em 0 }"
        " .one { text-align: justify }"
    )
    pages, body = [], []
    for index in range(16):
        folio, chapter = index + 1, index // 4
        title = f"Chapter {chapter + 1}: {CHAPTERS[chapter]}" if index % 2 == 0 else f"{chapter + 1}.{index % 4} {CHAPTERS[chapter].upper()}"
        head = [title, str(folio)] if index % 2 == 0 else [str(folio), title]
        running = [f"{head[0]} {head[1]}", f"- {folio} -"]
        if index % 2 == 0:
            columns = [texts[2 * index], texts[2 * index + 1]]
            inner = "<div class=cols>" + "".join(f"<p>{' '.join(_shy(html.escape(w)) for w in t.split())}</p>" for t in columns) + "</div>"
        else:
            columns = []
            inner = "".join(f"<p class=one>{' '.join(_shy(html.escape(w)) for w in t.split())}</p>" for t in texts[2 * index : 2 * index + 2])
        body.append(
            f"<section><div class=head><span>{html.escape(head[0])}</span><span>{html.escape(head[1])}"
            f"</span></div>{inner}<div class=foot>- {folio} -</div></section>"
        )
        pages.append({"body": " ".join(texts[2 * index : 2 * index + 2]), "columns": columns, "running": running})
    with tempfile.TemporaryDirectory(prefix="lodex-pdfset-") as work:
        fixtures.chromium_pdf(fixtures.page_html("A manual of retrieval", style, "".join(body)), target, Path(work))
    expected = {"pages": pages}
    expected_file.write_text(json.dumps(expected, indent=1), encoding="utf-8")
    return expected


def evaldata_dir() -> Path:
    """$LODEX_EVALDATA, else ../shared/evaldata beside the checkout, else /work/shared/evaldata."""
    for candidate in (os.environ.get("LODEX_EVALDATA"), ROOT.parent / "shared" / "evaldata", "/work/shared/evaldata"):
        if candidate and (Path(candidate) / "cisi").exists():
            return Path(candidate)
    raise SystemExit("evaluation data not found: set LODEX_EVALDATA (a folder with cisi/corpus.jsonl)")


def words(text: str) -> list[str]:
    """Words as compared: letters and digits, case aside."""
    return re.findall(r"\w+", text.casefold())
