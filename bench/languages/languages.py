"""Retrieval quality in Chinese, Japanese and German: lodex bm25 / dense / hybrid next to a segmenter + BM25 baseline.

usage: python bench/languages/languages.py [--langs zh,ja,de,ja-faq] [--work DIR] [--config FILE] [--variant LABEL:KEY=VALUE,...]
                                 [--no-baseline] [--out FILE]
Builds each language's folder from Debian's debian-reference package (bench/languages/langdata.py: one file per <h2> section of
the manual, the .deb fetched with apt-get into --work), indexes it with lodex through its public Python API (the same
write role of the application object the CLI's `lodex index` opens; settings from --config or ./config.toml), asks the committed questions
(bench/data/langdata/LANG.json, one target file each) in each search mode, and prints top-1 / top-3 / MRR@10 next to the
hand-rolled baselines of bench/languages/lang_baseline.py measured in the same run. A --variant indexes the folder again with
settings overridden (e.g. `--variant "de-stem:index.language=de"` once lodex has such a key); keys this lodex does not
know are reported and the variant skipped, so the script runs unchanged on older and newer code.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from bench.harness import result_block  # noqa: E402
from bench.languages.lang_baseline import PassageBM25, baselines  # noqa: E402
from bench.languages.langdata import MANUALS, build_folder, questions  # noqa: E402

MODES = ("bm25", "dense", "hybrid")


def scores(ranked: list[list[str]], targets: list[str]) -> dict[str, float]:
    """top-1, top-3 and MRR@10 of ranked file names against one target each."""
    top1 = top3 = rr = 0.0
    for names, target in zip(ranked, targets):
        rank = names.index(target) + 1 if target in names[:10] else 0
        top1 += rank == 1
        top3 += 0 < rank <= 3
        rr += 1 / rank if rank else 0.0
    n = max(len(targets), 1)
    return {"top1": top1 / n, "top3": top3 / n, "mrr10": rr / n}


def parse_value(text: str) -> Any:
    """A --variant value: JSON when it parses (numbers, booleans, lists), else the string itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_variant(spec: str) -> tuple[str, dict[str, Any]]:
    """LABEL:section.key=value,section.key=value → (label, overrides); LABEL alone: no overrides."""
    label, _, rest = spec.partition(":")
    overrides = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        overrides[key.strip()] = parse_value(value.strip())
    return label, overrides


def run_lodex(folder: Path, data: Path, config: Path | None, overrides: dict[str, Any], qs: list[dict[str, str]]) -> dict[str, Any]:
    """Index `folder` into `data` as `lodex index` does, optimize, then every question in every mode."""
    from lodex.api.factory import build_searcher, open_app
    from lodex.api.settings import load_settings

    settings = load_settings(config, {"index.data_dir": str(data)} | overrides)
    started = time.perf_counter()
    with open_app(settings, "write", folder.resolve(), rebuild=True) as side:
        summary = side.indexer.run(folder.resolve())
        side.store.maybe_optimize(force=True)
        index_s = time.perf_counter() - started
        searcher = build_searcher(settings, side.encoder, side.store)
        searcher.passages = 0
        out: dict[str, Any] = {"index_s": index_s, "files": getattr(summary, "added", None), "chunks": getattr(summary, "chunks", None), "modes": {}}
        for mode in MODES:
            began = time.perf_counter()
            ranked = [[Path(hit.path).name for hit in searcher.search(q["question"], k=10, mode=mode).results] for q in qs]
            ms = (time.perf_counter() - began) * 1000 / max(len(qs), 1)
            out["modes"][mode] = scores(ranked, [q["target"] for q in qs]) | {"query_ms": ms}
    return out


def run_baselines(lang: str, folder: Path, qs: list[dict[str, str]]) -> dict[str, dict[str, float]]:
    """Each baseline of `lang` over the same folder and questions."""
    out = {}
    for label, tokenize in baselines(MANUALS[lang].lang).items():
        index = PassageBM25.build(folder, tokenize)
        began = time.perf_counter()
        ranked = [index.rank(q["question"]) for q in qs]
        ms = (time.perf_counter() - began) * 1000 / max(len(qs), 1)
        out[label] = scores(ranked, [q["target"] for q in qs]) | {"build_s": index.seconds, "query_ms": ms}
    return out


def check_targets(folder: Path, qs: list[dict[str, str]]) -> list[str]:
    """Questions whose target file is missing or no longer holds its evidence (another package version)."""
    from bench.languages.lang_baseline import html_text

    bad = []
    for q in qs:
        path = folder / q["target"]
        if not path.is_file() or q.get("evidence", "") not in html_text(path):
            bad.append(f"{q['target']}: {q['question']}")
    return bad


def table(lang: str, version: str, n: int, lodex: dict[str, dict[str, Any]], base: dict[str, dict[str, float]]) -> str:
    """One language's results as a Markdown table."""
    lines = [
        f"### {lang} — {MANUALS[lang].package} {version}, {n} questions",
        "",
        "| system | top-1 | top-3 | MRR@10 | notes |",
        "|---|---|---|---|---|",
    ]
    for variant, result in lodex.items():
        if "error" in result:
            lines.append(f"| lodex [{variant}] | – | – | – | {result['error']} |")
            continue
        for mode, m in result["modes"].items():
            note = f"{m['query_ms']:.0f} ms/query; index {result['index_s']:.0f} s, {result['chunks']} chunks"
            lines.append(f"| lodex {mode} [{variant}] | {m['top1']:.2f} | {m['top3']:.2f} | {m['mrr10']:.2f} | {note} |")
    for label, m in base.items():
        lines.append(f"| {label} | {m['top1']:.2f} | {m['top3']:.2f} | {m['mrr10']:.2f} | build {m['build_s']:.0f} s, {m['query_ms']:.0f} ms/query |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--langs", default=",".join(MANUALS))
    parser.add_argument(
        "--work",
        type=Path,
        default=Path(tempfile.gettempdir()) / "lodex-bench-languages",
        help="where the .deb files, the built folders and the indexes are kept",
    )
    parser.add_argument("--config", type=Path, default=None, help="lodex config.toml (default: ./config.toml when present)")
    parser.add_argument(
        "--variant", action="append", default=[], help="LABEL:section.key=value,... — index again with these settings (default: one, 'default')"
    )
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--out", type=Path, default=None, help="append the Markdown results to this file")
    args = parser.parse_args()
    variants = [parse_variant(v) for v in args.variant] or [("default", {})]
    commit = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    report = result_block(f"lodex {commit or '?'}")
    for lang in args.langs.split(","):
        folder, version = build_folder(lang, args.work)
        qs = questions(lang)
        stale = check_targets(folder, qs)
        if stale:
            print(f"warning: {len(stale)} {lang} targets lack their evidence in {version}:", *stale, sep="\n  ", file=sys.stderr)
        lodex: dict[str, dict[str, Any]] = {}
        for label, overrides in variants:
            data = args.work / f"index-{lang}-{label}"
            try:
                lodex[label] = run_lodex(folder, data, args.config, overrides, qs)
            except Exception as exc:  # an unknown key on this lodex: report it, go on with the rest
                lodex[label] = {"error": f"{type(exc).__name__}: {exc}".replace("|", "/")[:200]}
            print(f"{lang} [{label}]: {json.dumps(lodex[label], default=str)}", file=sys.stderr)
        base = {} if args.no_baseline else run_baselines(lang, folder, qs)
        report.append(table(lang, version, len(qs), lodex, base))
        print(report[-1])
    if args.out:
        with args.out.open("a", encoding="utf-8") as out:
            out.write("\n".join(report) + "\n")


if __name__ == "__main__":
    main()
