"""A text's language (ISO 639-1 code), detected offline by py3langid with the script deciding for Chinese, Japanese
and Korean; and the Snowball stemmer each language has."""

import re
from functools import lru_cache
from typing import TYPE_CHECKING

from lodex.text.script_words import SPACELESS

if TYPE_CHECKING:
    from py3langid.langid import LanguageIdentifier

SAMPLE_CHARS = 1200  # a document's language is detected from this many characters, taken from its start, middle, end
# ISO 639-1 code → PyStemmer's Snowball algorithm (the languages Snowball has a stemmer for)
SNOWBALL = {
    "ar": "arabic",
    "hy": "armenian",
    "eu": "basque",
    "ca": "catalan",
    "cs": "czech",
    "da": "danish",
    "nl": "dutch",
    "en": "english",
    "eo": "esperanto",
    "et": "estonian",
    "fi": "finnish",
    "fr": "french",
    "de": "german",
    "el": "greek",
    "hi": "hindi",
    "hu": "hungarian",
    "id": "indonesian",
    "ga": "irish",
    "it": "italian",
    "lt": "lithuanian",
    "ne": "nepali",
    "no": "norwegian",
    "nb": "norwegian",
    "nn": "norwegian",
    "fa": "persian",
    "pl": "polish",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sr": "serbian",
    "es": "spanish",
    "sv": "swedish",
    "ta": "tamil",
    "tr": "turkish",
    "yi": "yiddish",
}
NAMES = {
    "en": "English",
    "zh": "Chinese",
    "ja": "Japanese",
    "ko": "Korean",
    "de": "German",
    "fr": "French",
    "es": "Spanish",
    "ru": "Russian",
    "it": "Italian",
    "pt": "Portuguese",
    "nl": "Dutch",
}
# Languages written in scripts an English (Latin-script) model's vocabulary barely knows: its vectors are near random
# there, so when the model does not declare them, keyword search alone answers their hybrid queries
OTHER_SCRIPT_LANGUAGES = frozenset({"zh", "ja", "ko", "th", "lo", "km", "my"})
_KANA = re.compile("[\u3040-\u30ff]")
_HANGUL = re.compile("[\uac00-\ud7af]")
_LETTER = re.compile(r"[^\W\d_]")
_ENGLISH = frozenset("the of and to in is that for with are on as by this be it was from which at an or".split())
# the classifier's normalized probability below which its answer is a guess (sentences score 0.99 and more; a few
# words 0.04-0.5), and the caller's fallback language counts instead
MIN_CONFIDENCE = 0.9
MIN_LETTERS = 12  # a shorter text (most queries) is not told apart by its letters: the caller's fallback language counts


def name_of(code: str | None) -> str:
    """A language's English name (its code when lodex knows no name for it)."""
    return NAMES.get(code or "", code or "unknown")


def _sample(text: str) -> str:
    if len(text) <= SAMPLE_CHARS:
        return text
    third = SAMPLE_CHARS // 3
    middle = len(text) // 2 - third // 2
    return " ".join((text[:third], text[middle : middle + third], text[-third:]))


def detect(text: str, fallback: str | None = None) -> str | None:
    """`detect_text`, remembered for short texts (queries come again)."""
    return _remembered(text, fallback) if len(text) <= 1000 else detect_text(text, fallback)


@lru_cache(maxsize=4096)
def _remembered(text: str, fallback: str | None) -> str | None:
    return detect_text(text, fallback)


def detect_text(text: str, fallback: str | None = None) -> str | None:
    """The language of a text (ISO 639-1), or `fallback` when it has too few letters to tell (or none). Kana make it
    Japanese and Hangul Korean; Han characters with neither, Chinese, when they are most of its letters."""
    sample = _sample(text)
    letters = len(_LETTER.findall(sample))
    if not letters:
        return fallback
    spaceless = 0 if sample.isascii() else sum(len(run) for run in SPACELESS.findall(sample))
    if spaceless and spaceless * 4 >= letters:  # CJK text (even with English words in it): its script says which
        kana, hangul = len(_KANA.findall(sample)), len(_HANGUL.findall(sample))
        if hangul * 2 >= spaceless:
            return "ko"
        if kana:
            return "ja"
        if fallback in ("zh", "ja") and spaceless < MIN_LETTERS:
            return fallback  # a few kanji alone may be either
        if spaceless * 2 >= letters:
            return "zh"
    if letters < MIN_LETTERS and fallback is not None:
        return fallback
    if sample.isascii() and _plainly_english(sample):
        return "en"  # most documents: no need to ask the classifier (~1 ms a document)
    code, confidence = _identifier().classify(sample)
    if confidence < MIN_CONFIDENCE:
        return fallback  # a few words: the classifier guesses ("madagascar vanilla farming": Swedish at 0.09)
    return "zh" if code in ("zh", "yue", "wuu") else code


@lru_cache(maxsize=1)
def _identifier() -> "LanguageIdentifier":
    """py3langid's model with probabilities normalized (so that a guess can be told from a finding)."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def _plainly_english(sample: str) -> bool:
    """Whether English function words ("the" among them) are over a tenth of the sample's words."""
    words = sample.lower().split()
    common = sum(w in _ENGLISH for w in words)
    return len(words) >= 20 and common >= 0.1 * len(words) and "the" in words
