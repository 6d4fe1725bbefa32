"""Checks the paraphrase question sets (bench/data/langdata/LANG-paraphrase.json): no question shares a word with its target.

usage: python bench/languages/paraphrase_check.py zh|ja [--questions FILE] [--work DIR] [--folder DIR] [--verbose]

Each question of the file ([{question, target, evidence}], target a section file of the folder that bench/languages/langdata.py
builds under --work: docs-LANG-VERSION) must be a reader's paraphrase: none of its content words may occur in the
target's text. The target's text is its HTML with the tags stripped (the standard library's html.parser, entities
unescaped), compared NFKC-normalized, lower-cased and with whitespace removed. The question is segmented into words
(Chinese: jieba's accurate mode, `jieba.lcut`; Japanese: SudachiPy split mode A with sudachidict_core); punctuation,
whitespace and a short stop list of function words (STOP_WORDS, printed on each run) are dropped, and for Japanese
also the tokens Sudachi tags as particles or auxiliaries (助詞 / 助動詞). Every remaining word breaks the rule when it
occurs as a substring of the target's text; for Japanese its dictionary form and normalized form are looked up too,
and the normalized form also among the normalized forms of the target's own Sudachi words (what a Sudachi + BM25
keyword search matches on). Each evidence string must occur in the target's text (whitespace runs collapsed to one
space).

Exits 1 when a question breaks either rule (its words printed), 2 when the file or folder is missing; nothing of
lodex is imported.
"""

import argparse
import json
import re
import sys
import tempfile
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Function words only (particles, auxiliaries, question words, pronouns, the commonest adverbs of a question);
# a content word never goes here.
STOP_WORDS: dict[str, frozenset[str]] = {
    "zh": frozenset(
        """
        的 了 吗 呢 吧 啊 呀 着 过 得 地 么
        我 你 他 她 它 我们 你们 自己 这 那 这个 那个 这些 那些 这样 一个
        怎么 怎样 怎么样 怎么办 如何 什么 啥 哪 哪个 哪些 哪里 哪儿 为什么 多少 几 谁 是否 能不能
        可以 能 能够 不能 会 要 想 应该 该 是 有 没有 没 不 别 里
        在 和 与 或 或者 还是 跟 把 被 让 给 从 就 都 也 还 又 再 才 很 太 最 如果 但 但是 而 所以 因为
        """.split()
    ),
    "ja": frozenset(
        """
        は が を に で と の も か ね よ へ や な
        です ます する ある いる なる できる こと もの ため よう とき
        どう どの どれ どこ どんな 何 なに なぜ いつ 誰
        私 自分 これ それ あれ この その あの ここ そこ いい など ください
        """.split()
    ),
}
_JA_FUNCTION_POS = ("助詞", "助動詞", "補助記号", "空白")
_SKIP = re.compile(r"^[\s\W_]*$", re.UNICODE)  # punctuation and whitespace only


class _TextParser(HTMLParser):
    """Collects the data of an HTML document, leaving out <script>, <style> and <head>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style", "head"):
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "head") and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def html_text(path: Path) -> str:
    """The visible text of an HTML file, entities unescaped, whitespace runs collapsed to one space."""
    parser = _TextParser()
    parser.feed(path.read_text(encoding="utf-8"))
    parser.close()
    return re.sub(r"\s+", " ", unescape("".join(parser.parts))).strip()


def fold(text: str) -> str:
    """The form words are compared in: NFKC (full-width Latin and digits folded), lower-cased, whitespace removed."""
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text).lower())


@dataclass
class Word:
    """A content word of a question: its surface and the other forms looked up (Japanese: dictionary, normalized)."""

    surface: str
    forms: list[str] = field(default_factory=list)


def chinese_words(question: str) -> Iterator[Word]:
    """jieba's accurate-mode words of a Chinese question, stop words and punctuation left out."""
    import jieba

    jieba.setLogLevel(60)
    for token in jieba.lcut(question):
        token = token.strip()
        if token and not _SKIP.match(token) and token not in STOP_WORDS["zh"]:
            yield Word(token, [token])


class JapaneseWords:
    """SudachiPy (sudachidict_core, split mode A) words of a Japanese text."""

    def __init__(self) -> None:
        from sudachipy import dictionary, tokenizer

        self._mode = tokenizer.Tokenizer.SplitMode.A
        self._tokenizer = dictionary.Dictionary(dict="core").tokenizer(mode=self._mode)

    def normalized(self, text: str) -> set[str]:
        """Every normalized form of a text's words (the keyword baseline's terms), folded."""
        out: set[str] = set()
        for start in range(0, len(text), 4000):  # Sudachi refuses inputs over ~49 KB
            out |= {fold(m.normalized_form()) for m in self._tokenizer.tokenize(text[start : start + 4000], self._mode)}
        out.discard("")
        return out

    def words(self, question: str) -> Iterator[Word]:
        """The content words of a question: particles, auxiliaries, punctuation and stop words left out."""
        for m in self._tokenizer.tokenize(question, self._mode):
            surface = m.surface().strip()
            if not surface or _SKIP.match(surface) or m.part_of_speech()[0] in _JA_FUNCTION_POS:
                continue
            if surface in STOP_WORDS["ja"] or m.dictionary_form() in STOP_WORDS["ja"]:
                continue
            forms = list(dict.fromkeys([surface, m.dictionary_form(), m.normalized_form()]))
            yield Word(surface, forms)


def find_folder(lang: str, work: Path) -> Path:
    """The built folder docs-LANG-VERSION under `work` (the newest version when several)."""
    found = sorted(p for p in work.glob(f"docs-{lang}-*") if p.is_dir() and p.name[len(lang) + 6 :][:1].isdigit())  # not docs-ja-faq-…
    if not found:
        raise SystemExit(f"no docs-{lang}-* folder under {work}: build it with bench/languages/langdata.py's build_folder")
    return found[-1]


def check(lang: str, questions: list[dict[str, str]], folder: Path, verbose: bool = False) -> int:
    """Prints each question's verdict; returns the number of questions breaking a rule."""
    japanese = JapaneseWords() if lang == "ja" else None
    texts: dict[str, tuple[str, str, set[str]]] = {}
    bad = 0
    for number, item in enumerate(questions, 1):
        question, target, evidence = item["question"], item["target"], item["evidence"]
        path = folder / target
        problems: list[str] = []
        if not path.is_file():
            print(f"FAIL {number:2d} {target}: no such file in {folder}")
            bad += 1
            continue
        if target not in texts:
            raw = html_text(path)
            texts[target] = (raw, fold(raw), japanese.normalized(raw) if japanese else set())
        raw, folded, doc_terms = texts[target]
        words = list(japanese.words(question) if japanese else chinese_words(question))
        shared: list[str] = []
        for word in words:
            hits = [form for form in word.forms if fold(form) and fold(form) in folded]
            if japanese and fold(word.forms[-1]) in doc_terms and word.forms[-1] not in hits:
                hits.append(word.forms[-1] + " (a word of the target)")
            if hits:
                shared.append(word.surface if hits == [word.surface] else f"{word.surface} [{', '.join(hits)}]")
        if shared:
            problems.append("shares " + " ".join(shared))
        if evidence not in raw:
            problems.append(f"evidence {evidence!r} not in the target's text")
        status = "FAIL" if problems else "ok  "
        bad += bool(problems)
        print(f"{status} {number:2d} {target} {question}")
        if verbose:
            print(f"         words: {' / '.join(w.surface for w in words)}")
        for problem in problems:
            print(f"         {problem}")
    return bad


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lang", choices=sorted(STOP_WORDS))
    parser.add_argument("--questions", type=Path, help="default: bench/data/langdata/LANG-paraphrase.json")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "lodex-bench-languages")
    parser.add_argument("--folder", type=Path, help="the section files (default: docs-LANG-* under --work)")
    parser.add_argument("--verbose", action="store_true", help="print each question's words")
    args = parser.parse_args()
    path = args.questions or HERE.parent / "data" / "langdata" / f"{args.lang}-paraphrase.json"
    if not path.is_file():
        print(f"no question file {path}", file=sys.stderr)
        sys.exit(2)
    questions = json.loads(path.read_text(encoding="utf-8"))
    folder = args.folder or find_folder(args.lang, args.work)
    if not folder.is_dir():
        print(f"no folder {folder}", file=sys.stderr)
        sys.exit(2)
    print(f"stop words ({args.lang}): {' '.join(sorted(STOP_WORDS[args.lang]))}")
    if args.lang == "ja":
        print(f"also dropped: tokens tagged {' / '.join(_JA_FUNCTION_POS)}")
    print(f"questions: {path} ({len(questions)}), folder: {folder}")
    bad = check(args.lang, questions, folder, args.verbose)
    print(f"{len(questions) - bad} of {len(questions)} questions pass")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
