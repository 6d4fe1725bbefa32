"""Ask a question set of bench/data/langdata of indexes that bench/languages/languages.py built and kept, without indexing again:
top-1 / top-3 / MRR@10 per mode and per label, optionally over a sweep of one search setting.

usage: python bench/languages/languages_ask.py --langs zh,ja --labels minilm,e5 [--set SUFFIX] [--work DIR]
                                     [--modes dense,bm25,hybrid] [--sweep search.dense_weight=0.4,0.6,0.8] [--out FILE]
Each index is work/index-LANG-LABEL (as bench/languages/languages.py names them); LABEL "e5" opens with encoder.model =
"multilingual", any other with the configured model (the index refuses another than the one that built it). --set
picks bench/data/langdata/LANG-SUFFIX.json (e.g. "paraphrase": questions sharing no word with their target) instead of
LANG.json; sets joined by "+" are asked as one ("main+extra": LANG.json and LANG-extra.json together). Every question's target must hold its evidence in the built folder (checked, as bench/languages/languages.py does).
"""

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from bench.harness import publish, result_block  # noqa: E402
from bench.languages.langdata import MANUALS, build_folder  # noqa: E402
from bench.languages.languages import check_targets, parse_value, scores  # noqa: E402

MODEL = {"e5": "multilingual"}  # a label's encoder.model


def ask(data: Path, label: str, qs: list[dict[str, str]], modes: list[str], overrides: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Each mode's scores on `qs` of the index in `data`, opened with `overrides` (section__key form)."""
    import lodex

    settings = {"encoder__model": MODEL[label]} if label in MODEL else {}
    index = lodex.open(data, **settings, **{key.replace(".", "__"): value for key, value in overrides.items()})
    out = {}
    for mode in modes:
        ranked = [[Path(hit.path).name for hit in index.search(q["question"], k=10, mode=mode).results] for q in qs]  # type: ignore[arg-type]
        out[mode] = scores(ranked, [q["target"] for q in qs])
    return out


def question_set(lang: str, suffix: str) -> list[dict[str, str]]:
    """The questions of bench/data/langdata/LANG-SUFFIX.json (LANG.json for "main")."""
    name = lang if suffix == "main" else f"{lang}-{suffix}"
    return json.loads((HERE.parent / "data" / "langdata" / f"{name}.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--langs", default="zh,ja")
    parser.add_argument("--labels", default="minilm,e5")
    parser.add_argument("--set", default="", help='question set suffix: bench/data/langdata/LANG-SUFFIX.json ("main+extra": two as one)')
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "lodex-bench-languages")
    parser.add_argument("--modes", default="bm25,dense,hybrid")
    parser.add_argument("--sweep", default="", help="KEY=V1,V2,...: ask again with each value of one setting")
    parser.add_argument("--out", type=Path, default=None, help="append the Markdown results to this file")
    args = parser.parse_args()
    key, _, values = args.sweep.partition("=")
    sweep: list[dict[str, Any]] = [{key: parse_value(v)} for v in values.split(",")] if key else [{}]
    modes = args.modes.split(",")
    lines = result_block(f"question set {args.set or 'main'}")
    for lang in args.langs.split(","):
        name = f"{lang}-{args.set}" if args.set else lang
        qs = [q for suffix in (args.set or "main").split("+") for q in question_set(lang, suffix)]
        folder, _ = build_folder(lang, args.work)
        stale = check_targets(folder, qs)
        if stale:
            raise SystemExit(f"{len(stale)} {name} targets lack their evidence:\n  " + "\n  ".join(stale))
        lines += [
            f"### {name} — {MANUALS[lang].package}, {len(qs)} questions",
            "",
            "| index | setting | mode | top-1 | top-3 | MRR@10 |",
            "|---|---|---|---|---|---|",
        ]
        for label in args.labels.split(","):
            for overrides in sweep:
                result = ask(args.work / f"index-{lang}-{label}", label, qs, modes, overrides)
                setting = ", ".join(f"{k}={v}" for k, v in overrides.items()) or "default"
                for mode, m in result.items():
                    lines.append(f"| {label} | {setting} | {mode} | {m['top1']:.2f} | {m['top3']:.2f} | {m['mrr10']:.2f} |")
                print(lines[-1], file=sys.stderr)
        lines.append("")
    publish(lines, args.out)


if __name__ == "__main__":
    main()
