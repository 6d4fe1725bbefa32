"""The folders bench/indexing/pipelines.py indexes end to end, each with its labelled questions: Cranfield as 1,400 files (its
queries and graded qrels), git's HTML documentation (Debian's git-doc, questions in bench/data/pipelinedata/git-doc.json)
and the real PDFs of bench/readers/pdf_set.py (bench/data/pdfdata/questions.json, judged at document level)."""

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bench.readers.pdf_set import GENERATED, debian_set, evaldata_dir, generated
from lodex.search.collections import load_collection, write_files

ROOT = Path(__file__).resolve().parents[2]
GIT_DOC_QUESTIONS = ROOT / "bench" / "data" / "pipelinedata" / "git-doc.json"
PDF_QUESTIONS = ROOT / "bench" / "data" / "pdfdata" / "questions.json"
NAMES = ("cranfield", "html", "pdf")


@dataclass(frozen=True)
class Folder:
    """A folder to index and its questions: qrels[qid] = {file path relative to the folder: grade}."""

    name: str
    path: Path
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    source: str  # what the folder holds, for the table's heading
    graded: bool = False  # graded judgements (nDCG@10 is the quality figure); else one target file per question


def natural_key(path: str) -> list[int | str]:
    """Sort key that puts 2.txt before 10.txt."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path)]


def files_of(folder: Path) -> list[str]:
    """The files under `folder`, relative, in natural order (what --limit takes the first of)."""
    return sorted((p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()), key=natural_key)


def written(source: Path, folder: Path, bundle: int = 1) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """A BEIR-layout collection written as .txt files in `folder` once (one per document, or per `bundle` shuffled
    documents; kept with its qrels beside it and reused): (its judged queries, their qrels by file)."""
    collection = load_collection(source)
    marker = folder.with_suffix(".qrels.json")
    if not marker.exists():
        shutil.rmtree(folder, ignore_errors=True)
        _, qrels = write_files(collection, folder, bundle)
        marker.write_text(json.dumps(qrels), encoding="utf-8")
    qrels = json.loads(marker.read_text(encoding="utf-8"))
    return {q: t for q, t in collection.queries.items() if q in qrels}, qrels


def cranfield(work: Path) -> Folder:
    """Cranfield's 1,400 abstracts as one .txt each; its 225 queries with their graded judgements."""
    queries, qrels = written(evaldata_dir() / "cranfield", work / "cranfield")
    return Folder(
        "cranfield", work / "cranfield", queries, qrels, "Cranfield: 1,400 abstracts, one .txt each; 225 queries, graded qrels", graded=True
    )


def git_doc(work: Path) -> Folder:
    """The HTML files of Debian's git-doc (its manual pages, user manual, how-tos and technical notes, as shipped);
    one target file per question."""
    debs = work / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    if not list(debs.glob("git-doc_*.deb")):
        subprocess.run(["apt-get", "download", "-qq", "git-doc"], cwd=debs, check=True)
    deb = sorted(debs.glob("git-doc_*.deb"))[-1]
    version = deb.name.split("_")[1].replace("%3a", ":")
    folder = work / "git-doc"
    if not folder.is_dir():
        unpacked = work / "git-doc.unpacked"
        shutil.rmtree(unpacked, ignore_errors=True)
        subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], check=True)
        source = unpacked / "usr" / "share" / "doc" / "git-doc"
        staging = work / "git-doc.part"
        shutil.rmtree(staging, ignore_errors=True)
        for page in source.rglob("*.html"):
            target = staging / page.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(page, target)
        staging.rename(folder)
        shutil.rmtree(unpacked)
    questions = json.loads(GIT_DOC_QUESTIONS.read_text(encoding="utf-8"))
    queries = {f"q{i}": q["question"] for i, q in enumerate(questions)}
    qrels = {f"q{i}": {q["target"]: 1} for i, q in enumerate(questions)}
    count = len(files_of(folder))
    return Folder("html", folder, queries, qrels, f"HTML documentation: Debian git-doc {version}, {count} .html files; {len(queries)} questions")


def pdfs(work: Path) -> Folder:
    """The real PDFs of bench/readers/pdf_set.py (TeX-typeset manuals from Debian, and one printed by Chromium); the document
    of each of bench/data/pdfdata/questions.json's questions is its target."""
    source = work / "pdfdata"
    source.mkdir(parents=True, exist_ok=True)
    files = debian_set(source)
    try:
        generated(source, evaldata_dir())
        files.append(source / GENERATED)
    except (OSError, subprocess.CalledProcessError) as exc:  # no Chromium here: the set goes without its one manual
        print(f"note: {GENERATED} left out ({exc})")
    folder = work / "pdf"
    folder.mkdir(exist_ok=True)
    for pdf in files:
        if not (folder / pdf.name).exists():
            shutil.copyfile(pdf, folder / pdf.name)
    questions = [q for q in json.loads(PDF_QUESTIONS.read_text(encoding="utf-8")) if (folder / q["file"]).exists()]
    queries = {f"q{i}": q["question"] for i, q in enumerate(questions)}
    qrels = {f"q{i}": {q["file"]: 1} for i, q in enumerate(questions)}
    return Folder("pdf", folder, queries, qrels, f"PDF: {len(files)} real PDFs (bench/readers/pdf_set.py); {len(queries)} questions")


def build(name: str, work: Path) -> Folder:
    work.mkdir(parents=True, exist_ok=True)
    return {"cranfield": cranfield, "html": git_doc, "pdf": pdfs}[name](work)


def limited(folder: Folder, limit: int | None, work: Path) -> Folder:
    """`folder` cut to its first `limit` files (hard links in work/NAME-LIMIT), with the questions whose relevant
    files are among them (their judgements cut to those files)."""
    names = files_of(folder.path)
    if not limit or limit >= len(names):
        return folder
    kept = names[:limit]
    target = work / f"{folder.name}-first{limit}"
    if not target.is_dir():
        staging = target.with_name(target.name + ".part")
        shutil.rmtree(staging, ignore_errors=True)
        for name in kept:
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            os.link(folder.path / name, staging / name)
        staging.rename(target)
    keep = set(kept)
    qrels = {q: cut for q, judged in folder.qrels.items() if (cut := {f: g for f, g in judged.items() if f in keep and g > 0})}
    queries = {q: t for q, t in folder.queries.items() if q in qrels}
    return Folder(folder.name, target, queries, qrels, f"{folder.source} (first {limit} files: {len(queries)} questions)", folder.graded)
