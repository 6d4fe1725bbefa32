"""The terms keyword search makes of a text. lodex makes them itself (`keyword_terms`) and gives Lance's full-text
index them ready, joined by spaces (the chunks' `keywords` column, split at spaces by the index): words split at every
character that is not a letter or digit, lower-cased, stemmed by the text's language's Snowball stemmer (its stop
words dropped after stemming), words of 40 bytes or more dropped, accents folded; runs of Chinese,
Japanese, Korean and other spaceless scripts cut into words (`script_words`); a chunk's section heading adds its terms
HEADING_WEIGHT times (questions name the topic of a section). `terms` are those Lance's own English
tokenizer makes of raw text, as an index made before lodex 0.x tokenized it (over `text`). lodex scores the chunk rows
the index does not hold yet with them (`keyword_delta`), as the index will once it does."""

import re
import threading
import unicodedata
from functools import lru_cache

import Stemmer  # PyStemmer: the Snowball stemmers, as Lance's (rust-stemmers)

from lodex.text.languages import SNOWBALL
from lodex.text.script_words import SPACELESS, run_words, split_runs

# Lance's English stop words, found by asking its index for each word (`tests/test_keyword_delta.py` checks them):
# they are matched after stemming, so "does" (stem "doe") and "during" ("dure") are words, "doing" ("do") is not.
STOP_WORDS = frozenset(
    """i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her
hers herself it its itself they them their theirs themselves what which who whom this that these those am is are was were be
been being have has had having do does did doing a an the and but if or because as until while of at by for with about
against between into through during before after above below to from up down in out on off over under again further then once
here there when where why how all any both each few more most other some such no nor not only own same so than too very s t
can will just don should now d ll m o re ve y ain aren couldn didn doesn hadn hasn haven isn ma mightn mustn needn shan
shouldn wasn weren won wouldn""".split()
)
MAX_BYTES = 40  # words this long or longer are left out
# The terms' version a new index records in its origin (`keyword_terms`); an index that records none holds version 1
# (before section headings, Chinese character pairs and Japanese parts of speech), one that records 2 holds no Japanese
# compounds; each is searched and extended with its own version's terms.
TERMS_VERSION = 3
HEADING_WEIGHT = 2  # a chunk's keywords hold its section heading's terms this many times (version 2)
_WORD = re.compile(r"[^\W_]+")
_FOLDS = str.maketrans({"æ": "ae", "œ": "oe", "ø": "o", "đ": "d", "ð": "d", "ł": "l", "þ": "th", "ı": "i"})
_local = threading.local()


def _stemmer(algorithm: str = "english") -> "Stemmer.Stemmer":
    """This thread's stemmer for a Snowball algorithm (a PyStemmer stemmer is not to be shared between threads)."""
    stemmers = getattr(_local, "stemmers", None)
    if stemmers is None:
        stemmers = _local.stemmers = {}
    stemmer = stemmers.get(algorithm)
    if stemmer is None:
        stemmer = stemmers[algorithm] = Stemmer.Stemmer(algorithm)
    return stemmer


def _fold(word: str) -> str:
    """Accents and ligatures folded to ASCII letters, as Lance's folding does (ß stays)."""
    if word.isascii():
        return word
    word = unicodedata.normalize("NFKD", word.translate(_FOLDS))
    return "".join(c for c in word if not unicodedata.combining(c))


def words_and_terms(text: str) -> list[tuple[str, str]]:
    """Each word of the text the index keeps, with its term (stemmed, folded), in text order."""
    words = [w for w in _WORD.findall(text.lower()) if len(w.encode()) < MAX_BYTES]
    return [(w, _fold(s)) for w, s in zip(words, _stemmer().stemWords(words)) if s not in STOP_WORDS]


def terms(text: str) -> list[str]:
    """The terms of a text, in text order (repeats kept)."""
    return [term for _, term in words_and_terms(text)]


def _latin_terms(text: str, algorithm: str) -> list[tuple[str, str]]:
    """(word, term) of text in scripts with spaces, stemmed by this Snowball algorithm (English: stop words out)."""
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)  # full-width letters and digits (ＰＨＰ７) as their plain forms
    words = [w for w in _WORD.findall(text.lower()) if len(w.encode()) < MAX_BYTES]
    stems = _stemmer(algorithm).stemWords(words)
    stop = _stop_terms(algorithm)
    return [(w, _fold(s)) for w, s in zip(words, stems) if s not in stop]


@lru_cache(maxsize=64)
def _stop_terms(algorithm: str) -> frozenset[str]:
    """A Snowball language's stop words as terms (stemmed and folded, as they are matched): English's are Lance's own;
    the other languages' come from the stop-words package's lists (none where it has no list)."""
    if algorithm == "english":
        return STOP_WORDS
    from stop_words import StopWordError, get_stop_words

    try:
        words = [w.lower() for w in get_stop_words(algorithm) if _WORD.fullmatch(w.lower())]
    except StopWordError:
        return frozenset()
    return frozenset(_fold(s) for s in Stemmer.Stemmer(algorithm).stemWords(words))


def keyword_words_and_terms(text: str, language: str | None = None, query: bool = False, terms_version: int = TERMS_VERSION) -> list[tuple[str, str]]:
    """Each word of the text keyword search keeps, with its term, in text order: words of spaceless scripts as
    `script_words` cuts them (a query's Chinese as its words, a document's also as the words inside its long ones),
    the others stemmed by `language`'s Snowball stemmer (English for a language Snowball lacks, or none given);
    `terms_version`: that of the index (`TERMS_VERSION`)."""
    algorithm = SNOWBALL.get(language or "en", "english")
    if SPACELESS.search(text) is None:
        return _latin_terms(text, algorithm)
    out: list[tuple[str, str]] = []
    for piece, spaceless in split_runs(text):
        if spaceless:
            out += [(w, w) for w in run_words(piece, language, query, terms_version) if len(w.encode()) < MAX_BYTES]
        else:
            out += _latin_terms(piece, algorithm)
    return out


def keyword_terms(text: str, language: str | None = None, query: bool = False, terms_version: int = TERMS_VERSION) -> list[str]:
    """The terms of `keyword_words_and_terms`, in text order (repeats kept)."""
    return [term for _, term in keyword_words_and_terms(text, language, query, terms_version)]


def keyword_text(text: str, language: str | None = None, heading: str | None = None, terms_version: int = TERMS_VERSION) -> str:
    """What a chunk's `keywords` column holds: its terms joined by spaces, as the full-text index splits them, then
    (version 2) the terms of its section `heading` (the heading path, "2 Methods › 2.3 Sampling"), HEADING_WEIGHT
    times: a chunk deep in a section still says what the section is about."""
    got = keyword_terms(text, language, terms_version=terms_version)
    if heading and terms_version >= 2:
        got += keyword_terms(heading, language, terms_version=terms_version) * HEADING_WEIGHT
    return " ".join(got)
