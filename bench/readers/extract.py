"""Which library lodex reads PDFs with, by measurement: each candidate's pages/s, peak RSS, text fidelity, install size
and licence on the same files, and the peak RSS of lodex's reader on a 2,000-page PDF next to two baselines; then
lodex's readers of the other formats against an alternative library each.

usage: python bench/readers/extract.py [--pages 2000] [--speed-pages 200] [--libs lodex,pypdfium2,...] [--evaldata DIR]
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
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from html import escape
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.harness import EVALDATA, machine_line, peak_rss_mib  # noqa: E402
from bench.readers.extract_figures import fidelity, installed_mib, licence, requirements, words  # noqa: E402
from bench.readers.extract_formats import ALTERNATIVES, FORMAT_EXTRACT, FORMAT_REPEAT, FORMATS, NO_ALTERNATIVE, Source, abstracts, build_formats  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "pdf"
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
    from lodex.indexer.pdf.pdf_reader import read_pdf
    from lodex.indexer.readers.document import ReadLimits

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
    "pypdfium2": pages_pypdfium2,
    "lodex": pages_lodex,
    "pypdf": pages_pypdf,
    "pdfminer.six": pages_pdfminer,
    "kreuzberg": pages_kreuzberg,
    "markitdown": pages_markitdown,
}


def child(args: argparse.Namespace) -> None:
    """One library (or baseline) in this process; prints one JSON object."""
    if args.child == "bare":
        import lodex.indexer.readers.document  # noqa: F401 - the interpreter with lodex imported, nothing read

        print(json.dumps({"rss": peak_rss_mib()}))
        return
    if args.child == "txt":
        from lodex.indexer.readers.decoding import clean, decode_source

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
CHILD = "import sys; sys.path.insert(0, sys.argv.pop(1)); from bench.readers import extract; extract.main()"


def run_child(kind: str, files: list[Path], python: str = sys.executable, repeat: int = 1) -> dict:
    """Runs one library (`kind`) on `files` in a child process of interpreter `python`; its JSON, or {"error": …}."""
    proc = subprocess.run(
        [python, "-c", CHILD, str(ROOT), "--child", kind, "--repeat", str(repeat), *map(str, files)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["exit " + str(proc.returncode)])[-1][:120]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --- the files -------------------------------------------------------------------------------------------------


def print_pdf(pages: list[str], out: Path, work: Path) -> None:
    """A PDF of one abstract a page ("Report N" above it, in two columns, header and footer) printed by Chromium."""
    sections = "".join(f"<section><h2>Report {i}</h2><div>{escape(t)}</div></section>" for i, t in enumerate(pages, 1))
    style = (
        '@page { size: A4; margin: 2cm; @top-center { content: "Evaluation abstracts, lodex bench" }'
        ' @bottom-center { content: "Page " counter(page) } } body { font: 11pt serif }'
        " section { break-after: page } div { column-count: 2; text-align: justify }"
    )
    source = work / (out.stem + ".html")
    source.write_text(
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Evaluation abstracts'
        f"</title><style>{style}</style></head><body>{sections}</body></html>",
        encoding="utf-8",
    )
    subprocess.run(
        [*CHROMIUM, f"--user-data-dir={tempfile.mkdtemp(dir=work)}", f"--print-to-pdf={out}", source.as_uri()],
        check=True,
        capture_output=True,
        timeout=600,
    )


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=2000, help="pages of the large PDF (lodex's reader only)")
    parser.add_argument("--speed-pages", type=int, default=200, help="pages of the PDF every library reads")
    parser.add_argument("--libs", default=",".join(LIBRARIES), help="comma-separated, from: " + ", ".join(LIBRARIES))
    parser.add_argument("--evaldata", type=Path, default=EVALDATA, help="default: $LODEX_EVALDATA or ../shared/evaldata")
    parser.add_argument(
        "--workdir", type=Path, default=None, help="keep the PDFs and Office files here (made once, reused later; default a temp dir)"
    )
    parser.add_argument("--formats", default=",".join(FORMATS), type=format_list, help="comma-separated, from: " + ", ".join(FORMATS))
    parser.add_argument("--text-mb", type=float, default=1.0, help="MB of abstracts in each Office file (default 1)")
    parser.add_argument("--alt-python", default=sys.executable, help="interpreter with the alternative libraries of the formats (default: this one)")
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
    print(machine_line())
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
    print(
        f"speed: {speed.name} ({args.speed_pages} pages, {speed.stat().st_size / 2**20:.1f} MiB, Chromium: two columns,"
        f" header, footer); fidelity: {len(files)} PDFs, {sum(len(words(t)) for t in files.values()):,} source words"
    )
    bare = run_child("bare", [])
    rows: dict[str, dict] = {}
    for lib in libs:
        result = run_child(lib, [speed, *(f for f in files if f != speed)])
        if "error" in result:
            print(f"{lib}: not measured ({result['error']})")
            continue
        dist, extra, known = LIBRARIES[lib]
        timing = result["files"][str(speed)]
        rows[lib] = {
            "version": metadata.version(dist),
            "licence": licence(dist, known),
            "rss": result["rss"],
            "pps": args.speed_pages / timing["seconds"],
            "cpu": timing["cpu"] * 1000 / args.speed_pages,
            "fidelity": fidelity([(source, result["files"][str(path)]["text"]) for path, source in files.items()]),
            "order": {path.stem: fidelity([(source, result["files"][str(path)]["text"])])[2] for path, source in files.items()},
            "mib": installed_mib(requirements(dist, extra) - base_deps),
        }
    print_table(rows, bare["rss"])
    print_large(big, folder, bare["rss"])


def print_table(rows: dict[str, dict], bare_rss: float) -> None:
    base = rows.get(BASELINE, {}).get("pps")
    print(
        f"{'library':<13} {'version':<9} {'licence':<26} {'pages/s':>8} {'x ' + BASELINE:>12} {'cpu ms/p':>8}"
        f" {'peak RSS':>9} {'x bare':>7} {'recall':>7} {'precis.':>7} {'order':>6} {'inst. MiB':>9}"
    )
    for lib, r in rows.items():
        recall, precision, order = r["fidelity"]
        ratio = f"{r['pps'] / base:.2f}" if base else "-"
        print(
            f"{lib:<13} {r['version']:<9} {r['licence']:<26} {r['pps']:>8,.0f} {ratio:>12} {r['cpu']:>8.1f}"
            f" {r['rss']:>7.0f} M {r['rss'] / bare_rss:>7.2f} {recall:>7.3f} {precision:>7.3f} {order:>6.3f}"
            f" {r['mib']:>9.1f}"
        )
    names = list(next(iter(rows.values()))["order"]) if rows else []
    print("order, file by file: " + " ".join(f"{name:>16}" for name in names))
    for lib, r in rows.items():
        print(f"  {lib:<18}" + " ".join(f"{r['order'][name]:>16.3f}" for name in names))
    print(
        f"peak RSS 'x bare': against the bare interpreter with lodex imported ({bare_rss:.0f} MiB), same run;"
        f" 'inst. MiB': the package and what it adds to lodex's other dependencies, installed"
    )


def print_large(big: Path, folder: Path, bare_rss: float) -> None:
    pages = int(big.stem.split("-")[1])
    lodex = run_child("lodex", [big])
    txt = run_child("txt", [folder])
    if "error" in lodex or "error" in txt:
        print(f"{pages:,}-page PDF: not measured ({lodex.get('error') or txt.get('error')})")
        return
    timing = lodex["files"][str(big)]
    print(
        f"{pages:,}-page PDF ({big.stat().st_size / 2**20:.1f} MiB): lodex read_pdf {timing['seconds']:.1f} s"
        f" ({pages / timing['seconds']:,.0f} pages/s, {len(timing['text']):,} chars), peak RSS {lodex['rss']:.0f} MiB"
        f" = {lodex['rss'] / bare_rss:.2f} x the bare interpreter with lodex imported ({bare_rss:.0f} MiB),"
        f" {lodex['rss'] / txt['rss']:.2f} x reading the same text from {pages:,} .txt files ({txt['rss']:.0f} MiB,"
        f" {txt['chars']:,} chars)"
    )


def report_formats(args: argparse.Namespace, work: Path) -> None:
    """Per format: lodex's reader, then its alternative (or why there is none), on the same generated file."""
    files = build_formats(work, args.evaldata, args.formats, args.text_mb)
    bare = run_child("bare", [])
    print(
        f"formats: {args.text_mb:g} MB of abstracts in each file, made by LibreOffice (soffice --headless"
        f" --convert-to, from HTML and flat ODF) and Python's email package; best of {FORMAT_REPEAT} reads;"
        f" alternatives run by {args.alt_python}"
    )
    print(
        f"{'format':<6} {'reader':<15} {'version':<8} {'licence':<20} {'file MB':>7} {'MB/s':>7} {'x lodex':>7}"
        f" {'units/s':>15} {'peak RSS':>9} {'x lodex':>7} {'recall':>7} {'precis.':>7}"
    )
    for fmt, (path, source) in files.items():
        lodex = format_row(fmt, "lodex", path, source, sys.executable)
        print_format_row(fmt, "lodex", lodex, lodex)
        if fmt in NO_ALTERNATIVE:
            print(f"{fmt:<6} {'-':<15} {NO_ALTERNATIVE[fmt]}")
            continue
        name = ALTERNATIVES[fmt].name
        print_format_row(fmt, name, format_row(fmt, name, path, source, args.alt_python), lodex)
    print(
        "MB = 10^6 bytes of the file; 'x lodex': the reader's MB/s and peak RSS over lodex's reader's, same run and"
        ' file; recall and precision: of words ("|" taken for a space), against the text the file was made from;'
        f" peak RSS of the bare interpreter with lodex imported: {bare.get('rss', float('nan')):.0f} MiB"
    )


def format_row(fmt: str, name: str, path: Path, source: Source, python: str) -> dict:
    """One reader's figures on one format's file, measured in a child process of `python` ({"error": …} if it
    failed)."""
    result = run_child(f"{fmt}:{name}", [path], python, FORMAT_REPEAT)
    if "error" in result:
        return result
    timing = result["files"][str(path)]
    recall, precision, _ = fidelity([(source.text, timing["text"].replace("|", " "))])  # "|": a cell separator
    units = f"{source.units[0] / timing['seconds']:,.0f} {source.units[1]}/s" if source.units else ""
    return {
        "version": result["version"],
        "licence": result["licence"],
        "mb": path.stat().st_size / 1e6,
        "mbps": path.stat().st_size / 1e6 / timing["seconds"],
        "units": units,
        "rss": result["rss"],
        "recall": recall,
        "precision": precision,
    }


def print_format_row(fmt: str, name: str, row: dict, lodex: dict) -> None:
    """One line of the format table; ratios to lodex's reader's `lodex` row (none if either was not measured)."""
    if "error" in row:
        print(f"{fmt:<6} {name:<15} not measured ({row['error']})")
        return
    speed = f"{row['mbps'] / lodex['mbps']:.2f}" if "error" not in lodex else "-"
    rss = f"{row['rss'] / lodex['rss']:.2f}" if "error" not in lodex else "-"
    print(
        f"{fmt:<6} {name:<15} {row['version']:<8} {row['licence'][:20]:<20} {row['mb']:>7.2f} {row['mbps']:>7.2f}"
        f" {speed:>7} {row['units']:>15} {row['rss']:>7.0f} M {rss:>7} {row['recall']:>7.3f}"
        f" {row['precision']:>7.3f}"
    )


if __name__ == "__main__":
    main()
