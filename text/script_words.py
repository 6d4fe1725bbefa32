"""Words of the scripts written without spaces: Chinese by jieba's dictionary (rjieba) with the run's character pairs
alongside, Japanese by Sudachi's (core dictionary) with its function words left out by part of speech, Korean and the
others (Thai, Lao, Khmer, Myanmar) as overlapping character pairs; keyword search makes its terms of these words
(`terms`). `terms_version` 1 is how an index made before the pairs and parts of speech holds its words, 2 before
Japanese compounds (its words Sudachi's shortest units alone)."""

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
CHINESE_STOP_WORDS = frozenset(
    "的 了 是 在 和 与 及 或 也 就 都 而 着 之 于 把 被 吗 呢 吧 啊 这 那 这个 那个 一个 我们 你们 他们 它们 以及 "
    "如果 因为 所以 但是 可以 并 其 该 为 对 从 等 个 中 上 下 不".split()
)
# Sudachi's parts of speech that carry nothing to search for: particles, auxiliary verbs, symbols, pronouns (何, それ),
# suffixes (化, 者: the stem they follow is the word), and, at the second level, the verbs and adjectives that may
# stand for a function (する, ある, いる, いい): Lucene's Japanese analyzer drops the same classes
JAPANESE_FUNCTION_POS = frozenset({"助詞", "助動詞", "補助記号", "記号", "空白", "代名詞", "接尾辞"})
_DEPENDENT = "非自立可能"
PAIR_MARK = "\u00b7"  # a Chinese character pair's term is marked (·系统), apart from the dictionary word 系统
_local = threading.local()


def _japanese() -> Any:
    """This thread's Sudachi tokenizer: split mode B, words as a reader cuts them (日本語, 時刻同期 stays 時刻 + 同期),
    each of which splits into the shortest units (mode A: 日本 + 語) where a document's terms want them too."""
    tokenizer = getattr(_local, "japanese", None)
    if tokenizer is None:
        from sudachipy import Dictionary, SplitMode

        tokenizer = _local.japanese = Dictionary(dict="core").tokenizer(mode=SplitMode.B)
    return tokenizer


def _shortest(morpheme: Any) -> list[Any]:
    """A mode B word's shortest units (itself when it has one; sudachipy 0.7's `add_single` gives a morpheme whose
    surface panics)."""
    from sudachipy import SplitMode

    parts = morpheme.split(SplitMode.A)
    return list(parts) if len(parts) else [morpheme]


def _pairs(run: str) -> list[str]:
    """Overlapping character pairs of a run (the run itself when one character)."""
    return [run] if len(run) < 2 else [run[i : i + 2] for i in range(len(run) - 1)]


def chinese_words(run: str, query: bool, pairs: bool = True) -> list[str]:
    """A run of Han characters as words: a document's in search mode (long words and the dictionary words inside
    them: 系统管理员 → 系统, 管理, 管理员, 系统管理员), a query's as its words alone; with `pairs`, then the run's
    overlapping character pairs, marked (`PAIR_MARK`), which meet where the query and the document are cut into
    words differently (文本编辑器 in a question cut as 文本编辑 + 器)."""
    import rjieba

    words = rjieba.cut(run, hmm=True) if query else rjieba.cut_for_search(run, hmm=True)
    out = [w for w in words if w not in CHINESE_STOP_WORDS]
    return out + [PAIR_MARK + p for p in _pairs(run) if len(p) == 2] if pairs else out


def _content_word(m: Any, by_part_of_speech: bool) -> str | None:
    """A Sudachi morpheme's normalized form, lower-cased, or None for a particle (a short hiragana word; with
    `by_part_of_speech`, any word of `JAPANESE_FUNCTION_POS`)."""
    if by_part_of_speech:
        pos = m.part_of_speech()
        if pos[0] in JAPANESE_FUNCTION_POS or pos[1] == _DEPENDENT:
            return None
    word = m.normalized_form()
    return word.lower() if not _HIRAGANA_ONLY.match(m.surface()) and word.strip() else None


def japanese_words(run: str, by_part_of_speech: bool = True, query: bool = False, compounds: bool = True) -> list[str]:
    """A run of Japanese text (kanji and kana) as its words in Sudachi's normalized form, particles left out (short
    hiragana words; with `by_part_of_speech`, every word of `JAPANESE_FUNCTION_POS` too). With `compounds` a query
    keeps its words whole (日本語) and a document gives each word's shortest units and then the word (日本, 語, 日本語),
    so that a question's compound meets the same compound first and its parts still meet a text that splits it;
    without, the shortest units alone."""
    out = []
    for i in range(0, len(run), 8000):  # Sudachi takes at most ~49 kB at once
        for m in _japanese().tokenize(run[i : i + 8000]):
            if compounds and query:
                units = [m]  # a query's word whole: no need to split it
            else:
                parts = _shortest(m)
                units = parts + [m] if compounds and len(parts) > 1 else parts
            out += [w for u in units if (w := _content_word(u, by_part_of_speech)) is not None]
    return out


def run_words(run: str, language: str | None, query: bool, terms_version: int = 2) -> list[str]:
    """The words of one run of a spaceless script (`SPACELESS`); `language`, the text's (ISO 639-1), decides whether
    kanji alone are Japanese; `terms_version` 1 as an index made before version 2 holds them (no character pairs in
    Chinese, Japanese words not chosen by part of speech), 2 as one made before version 3 (no Japanese compounds)."""
    if _PAIRED.match(run):
        return _pairs(run)
    if language == "ja" or _KANA_CHAR.search(run):
        return japanese_words(run, terms_version >= 2, query, terms_version >= 3)
    return chinese_words(run, query, terms_version >= 2)


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
        return [m.surface() for i in range(0, len(run), 8000) for m in _japanese().tokenize(run[i : i + 8000])]
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
