"""Which library lodex reads PDFs with, by measurement: each candidate's pages/s, peak RSS, text fidelity, install size
and licence on the same files, and the peak RSS of lodex's reader on a 2,000-page PDF next to two baselines.

usage: python bench/extract.py [--pages 2000] [--speed-pages 200] [--libs lodex,pypdfium2,...] [--evaldata DIR]
                               [--workdir DIR]
needs: Chromium (/usr/bin/chromium) to print the PDFs, the candidates (pip install -e ".[bench-extract]")

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


def peak_rss_mib() -> float:
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
    extract = EXTRACT[args.child]
    results = {}
    for name in args.files:
        data = Path(name).read_bytes()
        started, cpu = time.perf_counter(), time.process_time()
        text = "\n\n".join(extract(data))
        results[name] = {"seconds": time.perf_counter() - started, "cpu": time.process_time() - cpu, "text": text}
    print(json.dumps({"rss": peak_rss_mib(), "files": results}))


def run_child(kind: str, files: list[Path]) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--child", kind, *map(str, files)], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, "PYTHONWARNINGS": "ignore"})
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
    parser.add_argument("--workdir", type=Path, default=None, help="keep the PDFs here (made once; default a temp dir)")
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


def report(args: argparse.Namespace, work: Path) -> None:
    started = time.monotonic()
    big, speed, folder, speed_source = build(work, args.evaldata, args.pages, args.speed_pages)
    files = fidelity_files(speed, speed_source)
    libs = [lib for lib in args.libs.split(",") if lib]
    base_deps = requirements("lodex") - {"pypdfium2"}
    print(cpu_line())
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
    print(f"({time.monotonic() - started:.0f} s)")


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


if __name__ == "__main__":
    main()
