"""Words of the scripts written without spaces: Chinese by jieba's dictionary (rjieba), Japanese by Sudachi's (small
dictionary), Korean and the others (Thai, Lao, Khmer, Myanmar) as overlapping character pairs; keyword search makes
its terms of these words (`fts_terms`)."""

import re
import threading
from collections.abc import Iterator
from typing import Any

# Han ideographs (with 々〆ー, which join Japanese words) and the kana: a run of these is Chinese or Japanese text.
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f\u3005\u3006\u3007"
_KANA = "\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f\u30fc"
_HANGUL = "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"
_OTHER = "\u0e00-\u0e7f\u0e80-\u0eff\u1780-\u17ff\u1000-\u109f"  # Thai, Lao, Khmer, Myanmar: no spaces between words
SPACELESS = re.compile(f"([{_HAN}{_KANA}]+|[{_HANGUL}]+|[{_OTHER}]+)")
_KANA_CHAR = re.compile(f"[{_KANA}]")
_PAIRED = re.compile(f"[{_HANGUL}{_OTHER}]")  # a run of these scripts is cut into character pairs
_HIRAGANA_ONLY = re.compile("^[\u3040-\u309f]{1,2}$")  # particles and endings (の, を, する): dropped like stop words
# Chinese function words that carry nothing to search for (BM25 would weigh them near zero; they only cost postings).
CHINESE_STOP_WORDS = frozenset("的 了 是 在 和 与 及 或 也 就 都 而 着 之 于 把 被 吗 呢 吧 啊 这 那 这个 那个 一个 我们 你们 他们 它们 以及 "
                               "如果 因为 所以 但是 可以 并 其 该 为 对 从 等 个 中 上 下 不".split())
_local = threading.local()


def _japanese() -> Any:
    """This thread's Sudachi tokenizer (split mode A: the shortest units, as a search index wants)."""
    tokenizer = getattr(_local, "japanese", None)
    if tokenizer is None:
        from sudachipy import Dictionary, SplitMode

        tokenizer = _local.japanese = Dictionary(dict="small").tokenizer(mode=SplitMode.A)
    return tokenizer


def _pairs(run: str) -> list[str]:
    """Overlapping character pairs of a run (the run itself when one character)."""
    return [run] if len(run) < 2 else [run[i:i + 2] for i in range(len(run) - 1)]


def chinese_words(run: str, query: bool) -> list[str]:
    """A run of Han characters as words: a document's in search mode (long words and the dictionary words inside
    them: 系统管理员 → 系统, 管理, 管理员, 系统管理员), a query's as its words alone."""
    import rjieba

    words = rjieba.cut(run, hmm=True) if query else rjieba.cut_for_search(run, hmm=True)
    return [w for w in words if w not in CHINESE_STOP_WORDS]


def japanese_words(run: str) -> list[str]:
    """A run of Japanese text (kanji and kana) as its words in Sudachi's normalized form, particles left out."""
    out = []
    for i in range(0, len(run), 8000):  # Sudachi takes at most ~49 kB at once
        for m in _japanese().tokenize(run[i:i + 8000]):
            word = m.normalized_form()
            if not _HIRAGANA_ONLY.match(m.surface()) and word.strip():
                out.append(word.lower())
    return out


def run_words(run: str, language: str | None, query: bool) -> list[str]:
    """The words of one run of a spaceless script (`SPACELESS`); `language`, the text's (ISO 639-1), decides whether
    kanji alone are Japanese."""
    if _PAIRED.match(run):
        return _pairs(run)
    if language == "ja" or _KANA_CHAR.search(run):
        return japanese_words(run)
    return chinese_words(run, query)


def split_runs(text: str) -> Iterator[tuple[str, bool]]:
    """The text as (piece, spaceless) in order: runs of spaceless scripts and the text between them."""
    for i, piece in enumerate(SPACELESS.split(text)):
        if piece:
            yield piece, bool(i % 2)


def surface_words(run: str) -> list[str]:
    """A run of a spaceless script as consecutive pieces that make it up exactly: its words for Chinese and Japanese
    (where a passage may be cut), its characters for the others."""
    if _PAIRED.match(run):
        return list(run)
    if _KANA_CHAR.search(run):
        return [m.surface() for i in range(0, len(run), 8000) for m in _japanese().tokenize(run[i:i + 8000])]
    import rjieba

    return list(rjieba.cut(run, hmm=True))


def word_starts(text: str) -> list[int]:
    """Offsets in `text` where a word of a spaceless script starts (none when it has no such script)."""
    out = []
    for m in SPACELESS.finditer(text):
        at = m.start()
        for word in surface_words(m.group()):
            out.append(at)
            at += len(word)
    return out


def highlight_words(run: str) -> list[str]:
    """A query's run of a spaceless script as the pieces to mark in passages: its words as written (particles and
    Chinese function words left out), the character pairs of Korean and the other paired scripts."""
    if _PAIRED.match(run):
        return _pairs(run)
    return [w for w in surface_words(run) if w not in CHINESE_STOP_WORDS and not _HIRAGANA_ONLY.match(w)]
