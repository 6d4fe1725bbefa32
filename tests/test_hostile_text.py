"""Text analysis on hostile text: CJK with no space, a script change at every character, control characters, lone
surrogates. Language detection, keyword terms, word starts and highlights answer without an exception, in work that
grows with the text (counted, not timed), and highlighting keeps no memory of the passages it has marked."""

import gc
import tracemalloc

import pytest

from lodex.search.highlight import highlight_spans, query_stems
from lodex.text.languages import detect
from lodex.text.script_words import word_starts
from lodex.text.terms import keyword_terms

HAN = "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(4000))  # Chinese characters, no space, few repeats
MIXED = "a漢한ไあ"  # Latin, Han, Hangul, Thai, kana: a new script at every character
HOSTILE = {
    "controls": "\x00\x01\x1b[31m wings\x7f\x85\u200b\u202e lift\ufeff",
    "surrogates": "wings \ud800 lift \udfff漢字\ud800テスト",
    "mixed": MIXED * 200,
    "han": HAN,
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_text_is_analysed_without_an_exception(name: str) -> None:
    text = HOSTILE[name]
    detect(text)
    detect(text, "en")
    for language in ("en", "zh", "ja", None):
        keyword_terms(text, language)
        keyword_terms(text, language, query=True)
    assert all(0 <= at < len(text) for at in word_starts(text))
    spans = highlight_spans(text, query_stems(text[:200] + " wings"))
    assert all(0 <= a < b <= len(text) for a, b in spans)


def test_work_grows_with_the_text_not_faster() -> None:
    """Twice the text, twice the terms and word starts (a CJK run of 40,000 characters without a space, and a script
    change at every character)."""
    for unit in (HAN, MIXED * 800):
        small, large = unit * (40_000 // len(unit)), unit * (80_000 // len(unit))
        for count in (lambda t: len(keyword_terms(t, "zh")), lambda t: len(word_starts(t))):
            assert 1.8 <= count(large) / count(small) <= 2.2


def test_highlighting_remembers_no_passage() -> None:
    """1,000 passages of one long "word" each (text with no space: 1,500 letters here): the stems remembered
    between searches are those of words, not of whole passages (the caches hold 65,536 entries each)."""
    stems = query_stems("wings lift")
    passages = [f"{i:05d}" + "é" * 1500 for i in range(1000)]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for passage in passages:
            assert highlight_spans(passage, stems) == []
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 400_000, f"{kept} bytes kept after highlighting"
