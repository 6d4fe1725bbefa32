"""Checks a paraphrase question set with lodex's own keyword terms: no question may share a keyword term with its
target section, but for function words.

usage: python bench/languages/paraphrase_terms.py zh|ja --questions FILE [--work DIR] [--verbose]

A question's terms are those keyword search asks for (`text.terms.keyword_words_and_terms`, query side, the
question's language); the target's are those its chunks are indexed with (document side) of the section's text
(`paraphrase_check.html_text`). Shared terms are allowed only when they are function words: a term in
paraphrase_check.STOP_WORDS, or a Chinese character pair (·XY) of two characters each of which is one. Exits 1 when a
question shares any other term (printed), 2 when the file or folder is missing.
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from bench.languages.paraphrase_check import STOP_WORDS, find_folder, html_text  # noqa: E402
from lodex.text.terms import keyword_terms  # noqa: E402


def function_word(term: str, lang: str) -> bool:
    """Whether a shared term is allowed: a function word, or a character pair of two."""
    stop = STOP_WORDS[lang]
    if term.startswith("·"):
        return all(c in stop for c in term[1:])
    return term in stop


def shared_terms(question: str, target_text: str, lang: str) -> list[str]:
    """The question's keyword terms that the target's text also has, function words left out."""
    document = set(keyword_terms(target_text, lang))
    return sorted({t for t in keyword_terms(question, lang, query=True) if t in document and not function_word(t, lang)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("lang", choices=sorted(STOP_WORDS))
    parser.add_argument("--questions", type=Path, required=True)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "lodex-bench-languages")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    if not args.questions.is_file():
        print(f"no file {args.questions}", file=sys.stderr)
        raise SystemExit(2)
    folder = find_folder(args.lang, args.work)
    failed = 0
    for number, q in enumerate(json.loads(args.questions.read_text(encoding="utf-8")), 1):
        text = html_text(folder / q["target"])
        shared = shared_terms(q["question"], text, args.lang)
        evidence = " ".join(q["evidence"].split()) in " ".join(text.split())
        if shared or not evidence:
            failed += 1
            print(f"FAIL {number:2d} {q['target']}: shares {' '.join(shared) or '-'}" + ("" if evidence else "; evidence not found"))
        elif args.verbose:
            print(f"ok   {number:2d} {q['target']}")
    print(f"{failed} of {number} questions break the rule")
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
