"""Chunk rules on folders of real long documents the rules were not chosen on: git's HTML documentation, real PDFs and
the German Debian reference, each with labelled questions; dense and hybrid nDCG@10 (one target document each), top-1
and MRR@10 per rule and precision, every cell its own index of the same folder, and each cell's change against the
first one with its 95% paired bootstrap interval over the questions.

usage: python bench/quality/late_heldout.py [--folders html,pdf,de,zh,ja,ja-faq,cranfield,cisi@25,scifact,...] [--rules plain,late-long,whole,...]
           [--precision fast|exact|fast,exact] [--questions all|original|extra] [--keep DIR] [--work DIR] [--json FILE]
A collection (cranfield, cisi, med, scifact; `NAME@25` for bundles of 25) is written as one .txt per document and asked
its queries with their graded judgements. The questions: the folder's original set (git-doc.json, de.json, the PDFs'
questions) and, for git-doc, the German reference and the PDFs, a larger second set written later from the same files
(git-doc-extra.json, de-extra.json, data/pdfdata/questions-extra.json); `all` (the default) asks both. `--keep DIR` keeps
each cell's index under DIR and reuses it on the next run (the index does not depend on the questions). Quality, not timing: contention does not change the figures. Needs `pip install -e .[bench]`,
`apt-get`, `dpkg-deb` (the folders are built as bench/indexing/pipelines.py and bench/languages/languages.py build them).
"""

import argparse
import contextlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.harness import OUT, machine_line  # noqa: E402
from bench.indexing.pipeline_folders import Folder, build, written  # noqa: E402
from bench.languages.langdata import MANUALS, build_folder, questions  # noqa: E402
from bench.quality.chunk_rules import VARIANTS  # noqa: E402
from bench.quality.paired import changed, paired_delta  # noqa: E402
from bench.readers.pdf_set import evaldata_dir  # noqa: E402
from lodex.search.metrics import evaluate, ndcg_at  # noqa: E402
from lodex.search.names import Mode  # noqa: E402


def overrides(variant: str) -> dict[str, Any]:
    """bench/quality/chunk_rules.py's variant as the dotted settings `load_settings` takes (LODEX_CHUNKING__LATE_FOR → chunking.late_for)."""
    if variant not in VARIANTS:
        raise SystemExit(f"unknown rule {variant}: choose among {', '.join(VARIANTS)}")
    return {key.removeprefix("LODEX_").lower().replace("__", "."): value for key, value in VARIANTS[variant].items()}


MODES: tuple[Mode, ...] = ("dense", "hybrid")
COLLECTIONS = ("cranfield", "cisi", "med", "scifact")
EXTRA = {
    "html": Path(__file__).resolve().parents[1] / "data" / "pipelinedata" / "git-doc-extra.json",
    "de": Path(__file__).resolve().parents[1] / "data" / "langdata" / "de-extra.json",
    "pdf": Path(__file__).resolve().parents[1] / "data" / "pdfdata" / "questions-extra.json",
}  # judged by file here


def manual(lang: str, work: Path) -> Folder:
    """A Debian manual of bench/data/langdata (de, zh, ja: the Debian reference split at its sections; ja-faq: the Japanese
    Debian FAQ, an entry a file) with bench/data/langdata/LANG.json's questions."""
    folder, version = build_folder(lang, work)
    qs = questions(lang)
    return Folder(
        lang,
        folder,
        {f"q{i}": q["question"] for i, q in enumerate(qs)},
        {f"q{i}": {q["target"]: 1} for i, q in enumerate(qs)},
        f"{lang}: {MANUALS[lang].package} {version}",
    )


def collection(name: str, work: Path) -> Folder:
    """A BEIR collection (`cisi`, or `cisi@25` for bundles of 25 shuffled documents) as a folder of .txt files, from
    ../shared/evaldata or, for SciFact, bench/out/evaldata (bench/quality/scifact.py builds it)."""
    base, _, bundle = name.partition("@")
    source = next((d / base for d in (evaldata_dir(), OUT / "evaldata") if (d / base).is_dir()), None)
    if source is None:
        raise SystemExit(f"collection {base} not found in {evaldata_dir()} or bench/out/evaldata")
    folder = work / "collections" / name.replace("@", "-bundle-")
    queries, qrels = written(source, folder, int(bundle or 1))
    return Folder(name, folder, queries, qrels, f"{name}: {source}", graded=True)


def folder_of(name: str, work: Path, which: str = "original") -> Folder:
    """The folder `name` with its original questions (`which` = original), its second set (extra) or both (all)."""
    if name.partition("@")[0] in COLLECTIONS:
        return collection(name, work)
    folder = manual(name, work / "languages") if name in MANUALS else build(name, work / "pipelines")
    if which == "original":
        return folder
    extra = json.loads(EXTRA[name].read_text(encoding="utf-8")) if name in EXTRA and EXTRA[name].exists() else []
    queries = {} if which == "extra" else dict(folder.queries)
    qrels = {} if which == "extra" else dict(folder.qrels)
    for i, q in enumerate(extra):
        target = q.get("target") or q["file"]  # the PDFs' questions name a page of a file: the file is the target here
        if (folder.path / target).is_file():
            queries[f"x{i}"] = q["question"]
            qrels[f"x{i}"] = {target: 1}
    return Folder(folder.name, folder.path, queries, qrels, folder.source)


def _relative(path: str, root: Path) -> str:
    """A hit's path relative to the folder indexed (lodex gives it relative to the folder, or absolute)."""
    p = Path(path)
    return (p.relative_to(root) if p.is_absolute() else p).as_posix()


Cell = dict[str, dict[str, Any]]  # mode → {"ndcg@10", "mrr@10", "top1": float, "per_question": {qid: nDCG@10}}


def run(folder: Folder, overrides: dict[str, Any], precision: str, keep: Path | None = None) -> Cell:
    """Index `folder` with `overrides` (afresh, or reuse the index kept under `keep`), then ask its questions in each
    mode: documents ranked by path."""
    from lodex.api.factory import open_app
    from lodex.api.settings import load_settings

    root = folder.path.resolve()
    with contextlib.ExitStack() as stack:
        data = keep or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="lodex-late-")))
        done = data / ".bench-complete"
        built = overrides | {"precision": precision}
        if done.exists() and json.loads(done.read_text()) != built:  # kept with another rule: built again
            done.unlink()
        settings = load_settings(None, {"index.data_dir": str(data), "encoder.precision": precision, "search.passages": 0} | overrides)
        out: Cell = {}
        with open_app(settings, "write", root, rebuild=not done.exists()) as side:
            if not done.exists():
                side.indexer.run(root)
                side.store.maybe_optimize(force=True)
                done.write_text(json.dumps(built))
            searcher = side.searcher
            for mode in MODES:
                runs = {
                    qid: [_relative(hit.path, root) for hit in searcher.search(text, k=10, mode=mode).results] for qid, text in folder.queries.items()
                }
                scores = evaluate(runs, folder.qrels)
                top1 = sum(1 for qid, ranked in runs.items() if ranked[:1] and folder.qrels[qid].get(ranked[0], 0) > 0)
                out[mode] = {
                    "ndcg@10": scores["ndcg@10"],
                    "mrr@10": scores["mrr@10"],
                    "top1": top1 / len(runs),
                    "per_question": {qid: ndcg_at(ranked, folder.qrels[qid]) for qid, ranked in runs.items()},
                }
    return out


def summarize(paths: list[Path], baseline: str) -> None:
    """Each folder's cells from --json files, as points against the `baseline` cell (a rule, or rule:precision) of the
    same folder, with the 95% paired bootstrap interval; the last line a folder has for a cell counts."""
    cells: dict[str, dict[str, dict[str, Any]]] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            cell = json.loads(line)
            cells.setdefault(cell["folder"], {})[f"{cell['rule']}:{cell['precision']}"] = cell
    print(f"{'folder':14s} {'cell':22s} {'n':>4s} {'dense':>7s} {'hybrid':>7s}   points vs {baseline} [95% paired bootstrap]")
    for folder, by_cell in cells.items():
        base = next((c for key, c in by_cell.items() if key == baseline or key.split(":")[0] == baseline), None)
        for key, cell in by_cell.items():
            line = f"{folder:14s} {key:22s} {len(cell['dense']['per_question']):4d} {cell['dense']['ndcg@10']:7.4f} {cell['hybrid']['ndcg@10']:7.4f}"
            if base is not None and cell is not base:
                for mode in MODES:
                    mean, low, high = paired_delta(base[mode]["per_question"], cell[mode]["per_question"])
                    line += f"  {mode} {100 * mean:+.2f} [{100 * low:+.2f}, {100 * high:+.2f}]"
            print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folders", default="html,pdf,de")
    parser.add_argument("--rules", default="plain,late-long")
    parser.add_argument("--precision", default="fast", help="fast, exact, or both in order (fast,exact)")
    parser.add_argument("--questions", default="all", choices=("all", "original", "extra"))
    parser.add_argument("--keep", type=Path, help="keep each cell's index under this folder and reuse it")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "lodex-bench-late")
    parser.add_argument("--json", type=Path, help="append each cell's result as one JSON line to this file")
    parser.add_argument(
        "--summarize", type=Path, nargs="+", metavar="JSON", help="instead of running: print the cells of these --json files against --baseline"
    )
    parser.add_argument("--baseline", default="plain", help="--summarize: the cell others are compared with (rule or rule:precision)")
    args = parser.parse_args()
    if args.summarize:
        return summarize(args.summarize, args.baseline)
    precisions = args.precision.split(",")
    if not set(precisions) <= {"fast", "exact"}:
        parser.error("--precision takes fast, exact or fast,exact")
    print(f"{machine_line()}; questions: {args.questions}")
    print(
        f"{'folder':8s} {'rule':16s} {'prec':5s} {'n':>4s} {'dense nDCG@10':>14s} {'hybrid nDCG@10':>15s} "
        f"{'top-1 d/h':>11s}   change vs the folder's first cell, points [95% paired bootstrap]"
    )
    for name in args.folders.split(","):
        folder = folder_of(name, args.work, args.questions)
        first: Cell | None = None
        for rule in args.rules.split(","):
            for precision in precisions:
                keep = args.keep / f"{name}-{rule}-{precision}" if args.keep else None
                result = run(folder, overrides(rule), precision, keep)
                d, h = result["dense"], result["hybrid"]
                delta = ""
                if first is None:
                    first = result
                else:
                    for mode in MODES:
                        mean, low, high = paired_delta(first[mode]["per_question"], result[mode]["per_question"])
                        up, down = changed(first[mode]["per_question"], result[mode]["per_question"])
                        delta += f"  {mode} {100 * mean:+.2f} [{100 * low:+.2f}, {100 * high:+.2f}] (+{up}/-{down})"
                print(
                    f"{name:8s} {rule:16s} {precision:5s} {len(folder.queries):4d} {d['ndcg@10']:14.4f} "
                    f"{h['ndcg@10']:15.4f} {d['top1']:5.3f}/{h['top1']:.3f}{delta}",
                    flush=True,
                )
                if args.json:
                    with args.json.open("a") as fh:
                        fh.write(json.dumps({"folder": name, "rule": rule, "precision": precision, "questions": args.questions} | result) + "\n")


if __name__ == "__main__":
    main()
