"""The terms Lance's full-text index makes of a text, as lodex configures it (`lance_bridge.ensure_text_index`): words
split at every character that is not a letter or digit, lower-cased, stemmed (English Snowball), then stop words and
words of 40 bytes or more dropped, accents folded. lodex scores the chunk rows the index does not hold yet with them
(`keyword_delta`), as the index will once it does."""

import re
import threading
import unicodedata

import Stemmer  # PyStemmer: the Snowball stemmers, as Lance's (rust-stemmers)

# Lance's English stop words, found by asking its index for each word (`tests/test_keyword_delta.py` checks them):
# they are matched after stemming, so "does" (stem "doe") and "during" ("dure") are words, "doing" ("do") is not.
STOP_WORDS = frozenset("""i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her
hers herself it its itself they them their theirs themselves what which who whom this that these those am is are was were be
been being have has had having do does did doing a an the and but if or because as until while of at by for with about
against between into through during before after above below to from up down in out on off over under again further then once
here there when where why how all any both each few more most other some such no nor not only own same so than too very s t
can will just don should now d ll m o re ve y ain aren couldn didn doesn hadn hasn haven isn ma mightn mustn needn shan
shouldn wasn weren won wouldn""".split())
MAX_BYTES = 40  # words this long or longer are left out
_WORD = re.compile(r"[^\W_]+")
_FOLDS = str.maketrans({"æ": "ae", "œ": "oe", "ø": "o", "đ": "d", "ð": "d", "ł": "l", "þ": "th", "ı": "i"})
_local = threading.local()


def _stemmer() -> "Stemmer.Stemmer":
    """This thread's stemmer (a PyStemmer stemmer is not to be shared between threads)."""
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = Stemmer.Stemmer("english")
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
