"""PDF text quality on real documents, before and after, in one run: running headers and footers removed, words out
of their line, interleaved columns, split hyphens, extraction speed, and page@1 of questions written from pages.

usage: python bench/readers/pdf_quality.py [--before REF] [--workdir DIR] [--no-pages] [--rounds 2]
needs: apt-get (downloads the Debian documentation packages of bench/readers/pdf_set.py into --workdir once), dpkg-deb,
       Chromium (/usr/bin/chromium) for the generated manual, the evaluation abstracts ($LODEX_EVALDATA)

The set (bench/readers/pdf_set.py) is built in --workdir (default bench/out/pdfdata; nothing of it is committed). The code at
git ref --before (default: the commit this work started from) and the working tree each run in a child process
(the older code exported with git archive and put first on sys.path), alternately, --rounds times; each file's
fastest read counts. References, per page:
  headers   pdfium's own first and last lines (stream order) that carry the page's folio or repeat, digits aside,
            the same end's line two pages away (see pdf_metrics.running_reference); for the generated manual its
            header and footer as printed. A page keeps one when that line is still a line of the extracted text.
  moved     words of the extracted page outside the longest in-order matches with pdfium's raw text (TeX writes its
            content streams in reading order), or with the source text for the generated manual.
  columns   the generated manual's two-column pages: an interleaved page switches column more than once.
  hyphens   words pdfium shows broken at a line end, left in two by the extraction, per 1,000 such breaks.
Then page@1: the set indexed (bundled model, default settings) by each version, and each question of
bench/data/pdfdata/questions.json and of the larger second set, questions-extra.json (each with the words of its page that
answer it), searched (hybrid, k=10): right when the top document is the question's file and its best passage's pages
include the question's page; doc@1 counts the document alone. Each set is reported, then both together.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if str(Path(__file__).resolve().parents[2]) not in sys.path:  # a child has put the older code first and the root last
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.harness import OUT, machine_line  # noqa: E402
from bench.readers.pdf_metrics import column_switches, kept, line_end_hyphens, moved_words, running_reference, split_hyphens  # noqa: E402
from bench.readers.pdf_set import GENERATED, ROOT, debian_set, evaldata_dir, generated  # noqa: E402

BEFORE = "d4500d0"  # main when issue 39's PDF work started
QUESTIONS = ROOT / "bench" / "data" / "pdfdata" / "questions.json"
# A second, larger set written later from the same pages (each with the page text that answers it), asked too.
EXTRA_QUESTIONS = ROOT / "bench" / "data" / "pdfdata" / "questions-extra.json"


def asked_questions() -> list[dict]:
    """The original questions, then the second set's (each tagged with its set)."""
    original = [q | {"set": "original"} for q in json.loads(QUESTIONS.read_text(encoding="utf-8"))]
    extra = json.loads(EXTRA_QUESTIONS.read_text(encoding="utf-8")) if EXTRA_QUESTIONS.exists() else []
    return original + [q | {"set": "extra"} for q in extra]


def child(files: list[Path], out: Path, questions: bool) -> None:
    """Run in a child process under the code to measure: each file's page texts and fastest read, and page@1."""
    try:  # the package as it is now, or (a `--before` from before the indexer's split) its flat indexer/
        from lodex.indexer.pdf.pdf_reader import read_pdf
        from lodex.indexer.readers.document import ReadLimits
    except ImportError:
        from lodex.indexer.document import ReadLimits  # type: ignore[no-redef]
        from lodex.indexer.pdf_reader import read_pdf  # type: ignore[no-redef]
    result: dict = {"files": {}, "module": sys.modules[read_pdf.__module__].__file__}
    for path in files:
        data = path.read_bytes()
        started = time.perf_counter()
        doc = read_pdf(data, ReadLimits())
        seconds = time.perf_counter() - started
        assert doc.pages is not None
        ends = doc.pages[1:] + [len(doc.text)]
        result["files"][path.name] = {"seconds": seconds, "pages": [doc.text[s:e] for s, e in zip(doc.pages, ends)]}
    if questions:
        result["answers"] = _answers(files)
    out.write_text(json.dumps(result), encoding="utf-8")


def _answers(files: list[Path]) -> list[dict]:
    """Each question's top document and its best passage's pages, from an index of `files` built here (bundled model,
    default settings: three passages a document)."""
    from lodex.api.settings import Settings

    asked = asked_questions()
    with tempfile.TemporaryDirectory(prefix="lodex-pdfq-") as tmp:
        folder = Path(tmp) / "docs"
        folder.mkdir()
        for path in files:
            shutil.copy(path, folder / path.name)
        settings = Settings(base_dir=Path(tmp))
        settings.index.data_dir = "data"
        try:  # the application object (issue 54), or a `--before` from before it: the parts built by hand
            from lodex.api.factory import open_app  # noqa: F401
        except ImportError:
            return [_answer(hit) for hit in _searched_by_parts(settings, folder, [q["question"] for q in asked])]
        from bench.harness import index_in_process

        app, _ = index_in_process(settings, folder)
        with app:
            return [_answer(app.search(q["question"], k=10).results) for q in asked]


def _answer(hits: list) -> dict:
    """The top document's file and its best passage's pages (None where there is none)."""
    top = hits[0] if hits else None
    passage = top.passages[0] if top and top.passages else None
    return {
        "file": Path(top.path).name if top else None,
        "page": passage.page if passage else None,
        "page_end": (passage.page_end or passage.page) if passage else None,
    }


def _searched_by_parts(settings: Any, folder: Path, questions: list[str]) -> list[list]:
    """Each question's hits (k=10) as code before the application object answered them: encoder, store, indexer and
    searcher built by hand (the builders' signatures of `--before`'s default ref)."""
    from lodex.api.factory import build_encoder, build_indexer, open_store
    from lodex.search.searcher import Searcher

    encoder = build_encoder(settings)
    store = open_store(settings, encoder, settings.data_dir, create=True)
    build_indexer(settings, encoder, store).run(folder)
    searcher = Searcher(store, encoder, passages=3)
    return [searcher.search(question, k=10).results for question in questions]


def run_child(src: Path | None, files: list[Path], out: Path, questions: bool) -> dict:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    code = (
        f"import sys; sys.path.insert(0, {str(src)!r}) if {src is not None} else None; "
        f"sys.path.append({str(ROOT)!r}); import bench.readers.pdf_quality as q; "
        f"q.child([__import__('pathlib').Path(p) for p in {[str(f) for f in files]!r}], "
        f"__import__('pathlib').Path({str(out)!r}), {questions})"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=tempfile.gettempdir())
    return json.loads(out.read_text(encoding="utf-8"))


def export(ref: str, into: Path) -> Path:
    """The packages at git `ref` as an importable tree (lodex/api, lodex/indexer, ...)."""
    (into / "lodex").mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "api", "indexer", "search", "store"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into / "lodex")], input=archive, check=True)
    return into


def references(files: list[Path], manual: dict) -> dict:
    """Per file: pdfium's raw page texts, their running lines, line-end hyphen breaks (see the module docstring)."""
    import pypdfium2 as pdfium

    refs = {}
    for path in files:
        pdf = pdfium.PdfDocument(path.read_bytes())
        raw = [pdf[i].get_textpage().get_text_range() for i in range(len(pdf))]
        pdf.close()
        if path.name == GENERATED:
            running = [p["running"] for p in manual["pages"]]
            order = [p["body"] for p in manual["pages"]]
        else:
            running, order = running_reference(raw), raw
        refs[path.name] = {"running": running, "order": order, "breaks": [line_end_hyphens(t) for t in raw]}
    return refs


def score(texts: dict, refs: dict, manual: dict) -> dict:
    """The figures of one version's texts (see the module docstring), per file and in all."""
    rows = {}
    for name, ref in refs.items():
        pages, row = (
            texts["files"][name]["pages"],
            {"pages": 0, "have": 0, "kept": 0, "words": 0, "moved": 0, "moved_pages": 0, "breaks": 0, "split": 0, "twocol": 0, "interleaved": 0},
        )
        row["pages"], row["seconds"] = len(pages), texts["files"][name]["seconds"]
        for i, text in enumerate(pages):
            if ref["running"][i]:
                row["have"] += 1
                row["kept"] += kept(ref["running"][i], text)
            count, moved = moved_words(ref["order"][i], text)
            row["words"] += count
            row["moved"] += moved
            row["moved_pages"] += moved > 3
            row["breaks"] += len(ref["breaks"][i])
            row["split"] += split_hyphens(ref["breaks"][i], text)
            if name == GENERATED and manual["pages"][i]["columns"]:
                row["twocol"] += 1
                row["interleaved"] += column_switches(manual["pages"][i]["columns"], text) > 1
        rows[name] = row
    total = {key: sum(r[key] for r in rows.values()) for key in next(iter(rows.values()))}
    return {"files": rows, "total": total}


def page_at_1(answers: list[dict], which: str = "all") -> tuple[float, float, int]:
    """doc@1 and page@1 over the questions of one set (original, extra) or all, and how many they are."""
    pairs = [(q, a) for q, a in zip(asked_questions(), answers) if which in ("all", q["set"])]
    doc = sum(a["file"] == q["file"] for q, a in pairs)
    page = sum(a["file"] == q["file"] and a["page"] is not None and a["page"] <= q["page"] <= a["page_end"] for q, a in pairs)
    return doc / max(len(pairs), 1), page / max(len(pairs), 1), len(pairs)


def report(before: dict, after: dict, answers: dict) -> None:
    print(
        f"{'file':28s} {'pages':>5s} | {'headers kept':>13s} | {'moved words':>13s} | {'split/breaks':>13s} | {'interleaved':>11s} | {'seconds':>13s}"
    )
    for name in before["files"]:
        b, a = before["files"][name], after["files"][name]
        print(
            f"{name[:28]:28s} {b['pages']:5d} | {b['kept']:3d} → {a['kept']:3d}/{b['have']:<3d} | "
            f"{b['moved']:5d} → {a['moved']:5d} | {b['split']:3d} → {a['split']:3d}/{b['breaks']:<4d} | "
            f"{b['interleaved']:2d} → {a['interleaved']:2d}/{b['twocol']:<2d} | {b['seconds']:5.2f} → {a['seconds']:5.2f}"
        )
    b, a = before["total"], after["total"]
    print(
        f"pages {b['pages']}, pages with running lines {b['have']}: kept on {b['kept']} ({b['kept'] / b['have']:.1%})"
        f" → {a['kept']} ({a['kept'] / a['have']:.1%}); removed on {1 - a['kept'] / a['have']:.1%}"
    )
    print(
        f"words out of order {b['moved']} / {b['words']} ({1000 * b['moved'] / b['words']:.1f}‰) → {a['moved']} / "
        f"{a['words']} ({1000 * a['moved'] / a['words']:.1f}‰); pages with > 3: {b['moved_pages']} → {a['moved_pages']}"
    )
    print(
        f"split hyphens per 1,000 line-end hyphens {1000 * b['split'] / max(b['breaks'], 1):.2f} → "
        f"{1000 * a['split'] / max(a['breaks'], 1):.2f} ({b['split']} → {a['split']} of {b['breaks']})"
    )
    print(f"two-column pages interleaved {b['interleaved']} → {a['interleaved']} of {b['twocol']}")
    print(
        f"extraction {b['pages'] / b['seconds']:.1f} → {a['pages'] / a['seconds']:.1f} pages/s "
        f"({b['seconds']:.2f} → {a['seconds']:.2f} s, {a['seconds'] / b['seconds'] - 1:+.1%})"
    )
    for which in ("original", "extra", "all"):
        for label, got in answers.items():
            doc, page, n = page_at_1(got, which)
            if n:
                print(f"{label}: doc@1 {doc:.3f}  page@1 {page:.3f}  ({n} questions, {which})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", default=BEFORE)
    parser.add_argument("--workdir", type=Path, default=OUT / "pdfdata")
    parser.add_argument("--no-pages", action="store_true", help="skip page@1 (indexing the set twice)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    args.workdir = args.workdir.resolve()  # the children run elsewhere
    args.workdir.mkdir(parents=True, exist_ok=True)
    manual = generated(args.workdir, evaldata_dir())
    files = [*debian_set(args.workdir), args.workdir / GENERATED]
    refs = references(files, manual)
    print(f"{len(files)} PDFs; {machine_line()}")
    with tempfile.TemporaryDirectory(prefix="lodex-pdfq-") as tmp:
        src = export(args.before, Path(tmp) / "before")
        runs: dict[str, list[dict]] = {"before": [], "after": []}
        for round_ in range(args.rounds):
            for label, where in (("before", src), ("after", None)):
                asked = round_ == 0 and not args.no_pages
                runs[label].append(run_child(where, files, Path(tmp) / f"{label}{round_}.json", asked))
    answers = {label: got[0]["answers"] for label, got in runs.items() if "answers" in got[0]}
    for got in runs.values():  # each file's fastest read
        for name, entry in got[0]["files"].items():
            entry["seconds"] = min(run["files"][name]["seconds"] for run in got)
    report(score(runs["before"][0], refs, manual), score(runs["after"][0], refs, manual), answers)


if __name__ == "__main__":
    main()
