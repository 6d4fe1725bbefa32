"""The hand-rolled baseline of bench/languages/languages.py: a word segmenter per language + BM25 over ~200-character passages.

Chinese: jieba; Japanese: SudachiPy (sudachidict_core, split mode A), character bigrams when it is not installed;
German (and any space-delimited language): a regex word tokenizer, with or without PyStemmer's Snowball stemmer.
A document's score is its best passage's (rank-bm25's BM25Okapi over every passage of the folder).
"""

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from selectolax.lexbor import LexborHTMLParser

Tokenizer = Callable[[str], list[str]]
_WORD = re.compile(r"\w+", re.UNICODE)
_HAS_WORD = re.compile(r"\w", re.UNICODE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")


def html_text(path: Path) -> str:
    """A file's visible text, whitespace runs collapsed (the baseline's own extraction, not lodex's)."""
    tree = LexborHTMLParser(path.read_text(encoding="utf-8"))
    for node in tree.css("script, style, head"):
        node.decompose()
    body = tree.body
    return re.sub(r"\s+", " ", body.text(separator=" ") if body else "").strip()


def passages(text: str, size: int = 200, stride: int = 100) -> list[str]:
    """Windows of `size` characters every `stride` characters (the last one reaching the end)."""
    if len(text) <= size:
        return [text] if text else []
    starts = list(range(0, len(text) - size, stride)) + [len(text) - size]
    return [text[s : s + size] for s in starts]


def jieba_tokens() -> Tokenizer:
    """Chinese: jieba's accurate mode, lower-cased, punctuation and spaces dropped."""
    import jieba

    jieba.setLogLevel(60)
    return lambda text: [t.lower() for t in jieba.lcut(text) if _HAS_WORD.search(t)]


def sudachi_tokens() -> Tokenizer | None:
    """Japanese: SudachiPy split mode A, normalized forms, lower-cased (None when not installed)."""
    try:
        from sudachipy import Dictionary, SplitMode
    except ImportError:
        return None
    tokenizer = Dictionary(dict="core").create()

    def tokens(text: str) -> list[str]:
        out: list[str] = []
        for start in range(0, len(text), 4000):  # Sudachi refuses inputs over ~49 KB
            out += [m.normalized_form().lower() for m in tokenizer.tokenize(text[start : start + 4000], SplitMode.A) if _HAS_WORD.search(m.surface())]
        return out

    return tokens


def bigram_tokens(text: str) -> list[str]:
    """Any script: words of non-CJK characters, and overlapping character bigrams of CJK runs."""
    out: list[str] = []
    for word in _WORD.findall(text.lower()):
        runs = re.split(f"({_CJK.pattern}+)", word)
        for run in runs:
            if not run:
                continue
            if _CJK.match(run):
                out += [run[i : i + 2] for i in range(max(len(run) - 1, 1))]
            else:
                out.append(run)
    return out


def regex_tokens(stemmer_language: str | None) -> Tokenizer:
    """Space-delimited languages: \\w+ words, lower-cased, Snowball-stemmed in `stemmer_language` (None: unstemmed)."""
    if stemmer_language is None:
        return lambda text: _WORD.findall(text.lower())
    import Stemmer

    stem = Stemmer.Stemmer(stemmer_language)
    return lambda text: stem.stemWords(_WORD.findall(text.lower()))


def baselines(lang: str) -> dict[str, Tokenizer]:
    """The baselines measured for `lang`: {label: tokenizer}."""
    if lang == "zh":
        return {"jieba + BM25": jieba_tokens(), "char bigrams + BM25": bigram_tokens}
    if lang == "ja":
        sudachi = sudachi_tokens()
        return ({"sudachi + BM25": sudachi} if sudachi else {}) | {"char bigrams + BM25": bigram_tokens}
    stemmer = {"de": "german", "fr": "french"}.get(lang, "english")
    return {
        f"regex + {stemmer} stemming + BM25": regex_tokens(stemmer),
        "regex + english stemming + BM25": regex_tokens("english"),
        "regex, no stemming + BM25": regex_tokens(None),
    }


@dataclass
class PassageBM25:
    """BM25 over every passage of a folder; documents ranked by their best passage."""

    owners: list[str]
    tokenize: Tokenizer
    seconds: float
    index: object

    @classmethod
    def build(cls, folder: Path, tokenize: Tokenizer) -> "PassageBM25":
        from rank_bm25 import BM25Okapi

        started = time.perf_counter()
        owners, corpus = [], []
        for path in sorted(folder.iterdir()):
            for passage in passages(html_text(path)):
                owners.append(path.name)
                corpus.append(tokenize(passage))
        return cls(owners, tokenize, time.perf_counter() - started, BM25Okapi(corpus))

    def rank(self, query: str, k: int = 10) -> list[str]:
        """The top `k` documents for `query`, best passage first."""
        scores = self.index.get_scores(self.tokenize(query))  # type: ignore[attr-defined]
        best: dict[str, float] = {}
        for owner, score in zip(self.owners, scores):
            if score > best.get(owner, float("-inf")):
                best[owner] = float(score)
        return sorted(best, key=lambda name: -best[name])[:k]
