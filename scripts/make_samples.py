"""Write the small samples/ folder: long documents in several formats built from ../shared/evaldata."""

import csv
import html
import json
import random
import sys
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
    print(f"wrote {len(list(OUT.iterdir()))} files to {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
