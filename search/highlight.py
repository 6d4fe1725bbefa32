"""Which words of a passage match the query: character spans to highlight (light stemming, no stop words; the words
of Chinese and Japanese, and the character pairs of Korean and other spaceless scripts, found where they stand)."""

import re
import unicodedata
from collections.abc import Callable
from functools import lru_cache, wraps
from typing import TypeVar

from lodex.text.script_words import SPACELESS, highlight_words, split_runs

T = TypeVar("T")
_WORD = re.compile(r"\w+", re.UNICODE)
_STOP = frozenset(
    """a an and are as at be been but by can could did do does for from had has have how i if in into is it
its me my no not of on or our so such than that the their them then there these they this those to was we were what when
where which while who whom why will with would you your""".split()
)
# Words longer than this (a run of Chinese text with no space, a hash, a hostile document's 10,000-letter "word") are
# stemmed without being remembered: the caches hold 65,536 words each, and would otherwise hold that many passages
MAX_REMEMBERED = 64
_SUFFIXES = ("ational", "ations", "ation", "ingly", "edly", "ness", "ment", "ing", "ed", "ly")


def _fold(word: str) -> str:
    """Lower case, accents removed."""
    return "".join(c for c in unicodedata.normalize("NFKD", word.lower()) if not unicodedata.combining(c))


def _remembering_short_words(fn: Callable[[str], T]) -> Callable[[str], T]:
    """`fn`, its answers remembered (65,536 of them) for words of at most MAX_REMEMBERED characters."""
    remembered = lru_cache(maxsize=1 << 16)(fn)

    @wraps(fn)
    def call(word: str) -> T:
        return remembered(word) if len(word) <= MAX_REMEMBERED else fn(word)

    return call


@_remembering_short_words
def stem(word: str) -> str:
    """A light English stem, the same for "flow"/"flows", "heat"/"heated"/"heating", "wave"/"waves"."""
    word = _fold(word)
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("es") and word[:-2].endswith(("s", "x", "z", "ch", "sh")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        word = word[:-1]
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiouls":
        word = word[:-1]  # stopped → stop
    return word[:-1] if len(word) > 3 and word.endswith("e") else word


@_remembering_short_words
def _content_stem(word: str) -> str | None:
    """A word's stem, or None for a stop word (remembered: passages repeat their words, and this runs per word shown)."""
    return None if _fold(word) in _STOP else stem(word)


def query_stems(query: str) -> set[str]:
    """The stems of a query's content words, and the words of its spaceless scripts as they are written."""
    stems: set[str] = set()
    for piece, spaceless in split_runs(query):
        if spaceless:
            stems.update(highlight_words(piece))
        else:
            stems.update(s for w in _WORD.findall(piece) if (s := _content_stem(w)) is not None)
    return stems


@lru_cache(maxsize=1024)
def _candidates(stems: frozenset[str]) -> re.Pattern[str]:
    """Words that could have one of these stems: a stem less its last letter ("flies" → "fly") starts the
    lower-cased word, so only words with one of those beginnings need stemming."""
    starts = sorted({s[:-1] if len(s) > 1 else s for s in stems}, key=len, reverse=True)
    return re.compile(r"\b(?:" + "|".join(map(re.escape, starts)) + r")\w*")


def highlight_spans(text: str, stems: set[str]) -> list[tuple[int, int]]:
    """[start, end) character spans of the words in `text` whose stem is one of `stems`."""
    if not stems:
        return []
    written = [s for s in stems if SPACELESS.search(s)]
    if written:
        return _merged(_found(text, written) + highlight_spans(text, stems - set(written)))
    # accents are folded away before stemming: only plain-ASCII text can be narrowed down by word beginnings
    words = _candidates(frozenset(stems)).finditer(text.lower()) if text.isascii() else _WORD.finditer(text)
    return [(m.start(), m.end()) for m in words if _content_stem(m.group()) in stems]


def _found(text: str, words: list[str]) -> list[tuple[int, int]]:
    """Every place in `text` where one of these words (of a spaceless script) stands."""
    spans = []
    for word in words:
        at = text.find(word)
        while at >= 0:
            spans.append((at, at + len(word)))
            at = text.find(word, at + 1)
    return spans


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Spans in order, those that overlap or touch made one."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out
