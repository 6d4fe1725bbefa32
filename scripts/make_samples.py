"""Write the small samples/ folder: long documents in several formats built from ../shared/evaldata. The PDF is
printed by headless Chromium and the DOCX converted by LibreOffice (real producers; each is skipped, with a note,
when its program is missing)."""

import csv
import html
import json
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

EVAL = Path(__file__).resolve().parents[1].parent / "shared" / "evaldata"
OUT = Path(__file__).resolve().parents[1] / "samples"


def load(name: str) -> list[dict]:
    with (EVAL / name / "corpus.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def pick(docs: list[dict], n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    return rng.sample([d for d in docs if d["text"].strip()], n)


def title_of(doc: dict) -> str:
    return (doc.get("title") or doc["text"].split(" . ")[0]).strip(" .").capitalize()


def main() -> None:
    OUT.mkdir(exist_ok=True)
    med, cran, cisi = load("med"), load("cranfield"), load("cisi")
    # Markdown: a medical review of 25 MEDLINE abstracts, one section each.
    docs = pick(med, 25, 1)
    md = ["# Clinical research digest\n", "Abstracts from the MEDLINE collection, one per section.\n"]
    md += [f"## {title_of(d)}\n\n{d['text']}\n" for d in docs]
    (OUT / "clinical-digest.md").write_text("\n".join(md), encoding="utf-8")
    # HTML: aerodynamics report pages.
    docs = pick(cran, 25, 2)
    body = "".join(f"<h2>{html.escape(title_of(d))}</h2>\n<p>{html.escape(d['text'])}</p>\n" for d in docs)
    page = f"<!doctype html><html><head><title>Aerodynamics reports</title><style>body{{font:14px serif}}</style></head><body><h1>Aerodynamics reports</h1>\n{body}<script>var x = 1;</script></body></html>\n"
    (OUT / "aerodynamics-reports.html").write_text(page, encoding="utf-8")
    # reStructuredText: information science readings.
    docs = pick(cisi, 20, 3)
    rst = ["Library and information science readings", "=" * 41, ""]
    for d in docs:
        t = title_of(d)
        rst += [t, "-" * len(t), "", d["text"].strip(), ""]
    (OUT / "information-science.rst").write_text("\n".join(rst), encoding="utf-8")
    # Plain text: a long flow-physics notebook.
    docs = pick(cran, 30, 4)
    (OUT / "flow-physics-notes.txt").write_text("\n\n".join(d["text"] for d in docs) + "\n", encoding="utf-8")
    # JSON Lines: one record per MEDLINE abstract.
    docs = pick(med, 20, 5)
    with (OUT / "medline-records.jsonl").open("w", encoding="utf-8") as fh:
        for d in docs:
            fh.write(json.dumps({"id": d["_id"], "abstract": d["text"]}) + "\n")
    # CSV: a catalogue table of information-science abstracts.
    docs = pick(cisi, 20, 6)
    with (OUT / "catalogue.csv").open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["id", "title", "abstract"])
        for d in docs:
            writer.writerow([d["_id"], d["title"], d["text"]])
    # PDF: a wind-tunnel report of 40 Cranfield abstracts with numbered sections, printed by Chromium (pages).
    docs = pick(cran, 40, 7)
    body = "".join(f"<h2>{i} {html.escape(title_of(d))}</h2>\n<p>{html.escape(d['text'])}</p>\n" for i, d in enumerate(docs, 1))
    _print_pdf(
        f"<!doctype html><html><head><title>Wind-tunnel report</title><style>body{{font:13px serif;margin:2cm}}"
        f"h2{{font-size:15px}}</style></head><body><h1>Wind-tunnel report</h1>\n{body}</body></html>",
        OUT / "wind-tunnel-report.pdf",
    )
    # DOCX: a literature review of 20 CISI abstracts under headings, converted by LibreOffice (sections).
    docs = pick(cisi, 20, 8)
    body = "".join(f"<h2>{html.escape(title_of(d))}</h2>\n<p>{html.escape(d['text'])}</p>\n" for d in docs)
    _convert(
        f"<!doctype html><html><head><title>Information retrieval review</title></head><body><h1>Information retrieval "
        f"review</h1>\n{body}</body></html>",
        "docx",
        OUT / "retrieval-review.docx",
    )
    print(f"wrote {len(list(OUT.iterdir()))} files to {OUT}", file=sys.stderr)


CHROMIUM_FLAGS = [
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


def _print_pdf(page: str, out: Path) -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        print(f"skipped {out.name}: Chromium is missing (apt-get install chromium)", file=sys.stderr)
        return
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "page.html"
        source.write_text(page, encoding="utf-8")
        subprocess.run(
            [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={tmp}/profile", f"--print-to-pdf={out}", source.as_uri()],
            check=True,
            capture_output=True,
            timeout=120,
        )


def _convert(page: str, fmt: str, out: Path) -> None:
    soffice = shutil.which("soffice")
    if soffice is None:
        print(f"skipped {out.name}: LibreOffice is missing (apt-get install libreoffice-writer-nogui)", file=sys.stderr)
        return
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / f"{out.stem}.html"
        source.write_text(page, encoding="utf-8")
        subprocess.run(
            [
                soffice,
                f"-env:UserInstallation=file://{tmp}/profile",
                "--headless",
                "--convert-to",
                f"{fmt}:MS Word 2007 XML",
                "--outdir",
                tmp,
                str(source),
            ],
            check=True,
            capture_output=True,
            timeout=180,
        )
        shutil.move(Path(tmp) / f"{out.stem}.{fmt}", out)


if __name__ == "__main__":
    main()
