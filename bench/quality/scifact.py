"""SciFact (5,183 biomedical abstracts, 300 test claims, 339 judgments) in the BEIR layout of ../shared/evaldata,
built from two public files this machine can get without a hub: the CSV release of the SciFact corpus and claims,
and BEIR's test qrels. A held-out collection: no lodex default was chosen on it.

usage: python bench/quality/scifact.py --zip SCIFACT_ZIP --qrels BEIR_QRELS_TSV [--out bench/out/evaldata/scifact]

Where the files come from (the search tool's `fetch`, then `git show` out of the snapshot; nothing of them is committed):
  SCIFACT_ZIP      github:sumithra-p-v/claimverifier, data/scifact.zip (corpus_train.csv, claims_validation.csv:
                   allenai/scifact as CSV; its validation claims are BEIR's test queries)
  BEIR_QRELS_TSV   github:Josh1108/MixtureRetrievers, data/scifact/qrels/test.tsv (BEIR's scifact/qrels/test.tsv)
The corpus text is the abstract's sentences joined by spaces, as BEIR joins them; a query is the claim's text.
"""

import argparse
import ast
import csv
import io
import json
import re
import zipfile
from pathlib import Path

# A Python string literal inside the CSV's NumPy-array repr of an abstract: "['First sentence.' 'Second ...']".
_LITERAL = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"", re.S)
EXPECTED = {"docs": 5183, "queries": 300, "judgments": 339}


def sentences(abstract: str) -> list[str]:
    """The sentences of one abstract from its array repr."""
    return [ast.literal_eval(m.group(0)) for m in _LITERAL.finditer(abstract)]


def build(zip_path: Path, qrels_path: Path, out: Path) -> dict[str, int]:
    """Write corpus.jsonl, queries.jsonl and qrels.tsv under `out`; the counts written."""
    csv.field_size_limit(1 << 24)
    with zipfile.ZipFile(zip_path) as archive:
        corpus = list(csv.DictReader(io.TextIOWrapper(archive.open("corpus_train.csv"), encoding="utf-8")))
        claims = list(csv.DictReader(io.TextIOWrapper(archive.open("claims_validation.csv"), encoding="utf-8")))
    rows = [line.split("\t") for line in qrels_path.read_text(encoding="utf-8").splitlines()[1:] if line.strip()]
    judged = {qid for qid, _doc, _score in rows}
    texts = {row["id"]: row["claim"] for row in claims}
    missing = judged - texts.keys()
    if missing:
        raise SystemExit(f"{len(missing)} judged queries have no claim in {zip_path}: is it the SciFact CSV release?")
    out.mkdir(parents=True, exist_ok=True)
    with (out / "corpus.jsonl").open("w", encoding="utf-8") as fh:
        for row in corpus:
            fh.write(
                json.dumps({"_id": row["doc_id"], "title": row["title"], "text": " ".join(sentences(row["abstract"]))}, ensure_ascii=False) + "\n"
            )
    with (out / "queries.jsonl").open("w", encoding="utf-8") as fh:
        for qid in sorted(judged, key=int):
            fh.write(json.dumps({"_id": qid, "text": texts[qid]}, ensure_ascii=False) + "\n")
    with (out / "qrels.tsv").open("w", encoding="utf-8") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        fh.writelines(f"{qid}\t{doc}\t{score.strip()}\n" for qid, doc, score in rows)
    return {"docs": len(corpus), "queries": len(judged), "judgments": len(rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zip", type=Path, required=True)
    parser.add_argument("--qrels", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "out" / "evaldata" / "scifact")
    args = parser.parse_args()
    counts = build(args.zip, args.qrels, args.out)
    note = "" if counts == EXPECTED else f" (BEIR's scifact has {EXPECTED}: check the inputs)"
    print(f"{args.out}: {counts['docs']} documents, {counts['queries']} queries, {counts['judgments']} judgments{note}")


if __name__ == "__main__":
    main()
