"""BEIR-layout test collections: load them, and write them out as a folder of (optionally bundled) files."""

import csv
import json
import random
from dataclasses import dataclass
from pathlib import Path

from lodex.search.metrics import Qrels


@dataclass
class Collection:
    """Documents, queries and graded judgments of one test collection."""

    name: str
    docs: dict[str, tuple[str, str]]  # id → (title, text)
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def load_collection(directory: Path) -> Collection:
    """Read corpus.jsonl, queries.jsonl and qrels.tsv from a BEIR-layout folder."""
    docs: dict[str, tuple[str, str]] = {}
    with (directory / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                docs[str(row["_id"])] = (row.get("title") or "", row.get("text") or "")
    queries: dict[str, str] = {}
    with (directory / "queries.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                queries[str(row["_id"])] = row["text"]
    qrels: dict[str, dict[str, int]] = {}
    with (directory / "qrels.tsv").open(encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    return Collection(directory.name, docs, queries, qrels)


def _doc_text(title: str, text: str) -> str:
    return f"{title.strip()}\n\n{text.strip()}" if title.strip() and not text.startswith(title.strip()) else text.strip()


def write_files(collection: Collection, folder: Path, bundle: int = 1, seed: int = 0) -> tuple[dict[str, str], Qrels]:
    """Write one .txt per document (bundle=1) or per `bundle` shuffled documents; return file→docs map and file qrels."""
    folder.mkdir(parents=True, exist_ok=True)
    ids = [i for i, (title, text) in collection.docs.items() if (title + text).strip()]
    owner: dict[str, str] = {}
    if bundle <= 1:
        for doc_id in ids:
            name = f"{doc_id}.txt"
            (folder / name).write_text(_doc_text(*collection.docs[doc_id]) + "\n", encoding="utf-8")
            owner[doc_id] = name
    else:
        random.Random(seed).shuffle(ids)
        for start in range(0, len(ids), bundle):
            name = f"bundle-{start // bundle:04d}.txt"
            members = ids[start : start + bundle]
            (folder / name).write_text("\n\n".join(_doc_text(*collection.docs[d]) for d in members) + "\n", encoding="utf-8")
            owner.update({d: name for d in members})
    qrels: dict[str, dict[str, int]] = {}
    for query, judged in collection.qrels.items():
        for doc_id, grade in judged.items():
            if doc_id in owner:
                files = qrels.setdefault(query, {})
                files[owner[doc_id]] = max(files.get(owner[doc_id], 0), grade)
    return owner, qrels
