"""Token-aware chunking: windows of model tokens cut at paragraph, sentence or word boundaries (words of Chinese and
Japanese by their dictionaries)."""

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lodex.text.script_words import SPACELESS, word_starts

# Tokenizes a list of texts; returns, per text, an (n, 2) int array of token (start, end) char spans.
TokenSpans = Callable[[list[str]], list[np.ndarray]]

_PARAGRAPH = re.compile(r"\n[ \t]*\n\s*")
# a sentence ends at . ! ? before a space, and at the full stops of scripts written without spaces (Chinese and Japanese
# 。！？；… and their half- and full-width relatives, with any closing quote or bracket after them)
_SENTENCE = re.compile(r"(?:(?<=[.!?])[\"')\]]*\s+|[。！？；…｡︒﹒﹖﹗！？；](?:[」』”’）》〉】〕\"')\]]*))")
_SEGMENT_CHARS = 32_768
_SEGMENTS_PER_CALL = 8  # tokenizer calls stay small, so a huge file does not hold all encodings at once
# A token spanning more characters (an unknown "word" of thousands of letters: base64, minified text) counts as one
# token per this many characters, so a chunk's text stays bounded (max_tokens x this) whatever the input.
MAX_TOKEN_CHARS = 100


@dataclass(frozen=True)
class Chunk:
    """One passage of a document: its place in the document's text and its length in tokens."""

    ordinal: int
    char_start: int
    char_end: int
    token_count: int
    text: str


def _segments(text: str) -> list[tuple[int, int]]:
    """Split `text` into pieces of at most ~32k chars, cut at whitespace where there is some."""
    bounds: list[tuple[int, int]] = []
    start, n = 0, len(text)
    while start < n:
        end = min(start + _SEGMENT_CHARS, n)
        if end < n:
            cut = max(text.rfind(" ", end - 2048, end), text.rfind("\n", end - 2048, end))
            end = cut + 1 if cut > start else end
        bounds.append((start, end))
        start = end
    return bounds


def token_spans_of(text: str, tokenize: TokenSpans) -> np.ndarray:
    """Token spans of a whole text, tokenized in segments so a huge one-line file stays linear."""
    bounds = _segments(text)
    if not bounds:
        return np.zeros((0, 2), dtype=np.int64)
    parts: list[np.ndarray] = []
    for i in range(0, len(bounds), _SEGMENTS_PER_CALL):
        group = bounds[i : i + _SEGMENTS_PER_CALL]
        spans = tokenize([text[a:b] for a, b in group])
        parts += [s.astype(np.int64) + a for s, (a, _) in zip(spans, group) if len(s)]
    return _split_long(np.concatenate(parts)) if parts else np.zeros((0, 2), dtype=np.int64)


def _split_long(spans: np.ndarray) -> np.ndarray:
    """Spans longer than MAX_TOKEN_CHARS cut into consecutive pieces of at most that many characters."""
    lengths = spans[:, 1] - spans[:, 0]
    if not len(spans) or lengths.max() <= MAX_TOKEN_CHARS:
        return spans
    pieces = -(-lengths // MAX_TOKEN_CHARS)
    owner = np.repeat(np.arange(len(spans)), pieces)
    first = np.cumsum(pieces) - pieces
    starts = spans[owner, 0] + (np.arange(len(owner)) - first[owner]) * MAX_TOKEN_CHARS
    ends = np.minimum(starts + MAX_TOKEN_CHARS, spans[owner, 1])
    return np.stack([starts, ends], axis=1)


def _marks(text: str, starts: np.ndarray, pattern: re.Pattern[str]) -> np.ndarray:
    """Boolean per token: a `pattern` match ends right before this token."""
    marks = np.zeros(len(starts), dtype=bool)
    ends = np.fromiter((m.end() for m in pattern.finditer(text)), dtype=np.int64)
    if len(ends):
        idx = np.searchsorted(starts, ends)
        idx = idx[idx < len(starts)]
        marks[idx] = True
    marks[0] = False
    return marks


def _last(flags: np.ndarray, lo: int, hi: int) -> int | None:
    """Largest index i in [lo, hi] with flags[i], or None."""
    if hi < lo:
        return None
    hits = np.flatnonzero(flags[lo : hi + 1])
    return lo + int(hits[-1]) if len(hits) else None


@dataclass(frozen=True)
class ChunkRule:
    """Where chunks end beyond their length: a text, or the rest of one, of up to max_tokens + `whole_slack` tokens is
    one chunk (a short document is not cut in two, a long one ends without a last chunk made mostly of overlap); with
    `overlap_at_breaks` false, a chunk cut at a sentence or paragraph end shares no tokens with the next (the overlap
    only bridges text a cut splits); a whole text (a document, a page) of up to `whole_tokens` tokens is one chunk,
    encoded whole (0: none beyond max_tokens + whole_slack). ChunkRule() is the rule of indexes built before these
    options (LEGACY_RULE)."""

    whole_slack: int = 0
    overlap_at_breaks: bool = True
    whole_tokens: int = 0

    def origin(self) -> dict[str, int | bool] | None:
        """What an index chunked this way records (None for the legacy rule, so older indexes compare equal)."""
        if self == LEGACY_RULE:
            return None
        return {"whole_slack": self.whole_slack, "overlap_at_breaks": self.overlap_at_breaks, "whole_tokens": self.whole_tokens}

    @classmethod
    def recorded(cls, origin: dict[str, int | bool] | None) -> "ChunkRule":
        """The rule an index's origin records (none: the legacy rule; no whole_tokens: an index from before it, 0)."""
        if not origin:
            return LEGACY_RULE
        return cls(int(origin["whole_slack"]), bool(origin["overlap_at_breaks"]), int(origin.get("whole_tokens", 0)))


LEGACY_RULE = ChunkRule()


class Chunker:
    """Cuts a document into chunks of at most `max_tokens` tokens (max_tokens + rule.whole_slack for a text's last
    chunk) with `overlap` tokens shared."""

    def __init__(self, tokenize: TokenSpans, max_tokens: int = 254, overlap: int = 32, rule: ChunkRule = LEGACY_RULE) -> None:
        if max_tokens < 8:
            raise ValueError("max_tokens must be at least 8")
        if not 0 <= overlap < max_tokens // 2:
            raise ValueError("overlap must be between 0 and half of max_tokens")
        if rule.whole_slack < 0 or rule.whole_tokens < 0:
            raise ValueError("whole_slack and whole_tokens must be at least 0")
        self.tokenize = tokenize
        self.max_tokens = max_tokens
        self.overlap = overlap
        self.rule = rule

    def chunk(self, text: str, spans: np.ndarray | None = None, whole_text: bool = True) -> list[Chunk]:
        """All chunks of `text`, in order, with exact character offsets; `spans`: its token spans, when already known;
        `whole_text` false: `text` is part of a longer one, so it is never one chunk for being short (rule.whole_tokens)."""
        spans = token_spans_of(text, self.tokenize) if spans is None else spans
        n = len(spans)
        if n == 0:
            return []
        starts, ends = spans[:, 0], spans[:, 1]
        if whole_text and n <= self.rule.whole_tokens:  # a short text is one chunk (its breaks are not needed)
            return [Chunk(0, int(starts[0]), int(ends[-1]), n, text[int(starts[0]) : int(ends[-1])])]
        word = np.ones(n, dtype=bool)
        word[1:] = starts[1:] > ends[:-1]
        if SPACELESS.search(text) is not None:  # Chinese, Japanese: a token that starts one of their words starts a word
            word |= np.isin(starts, word_starts(text))
        paragraph = _marks(text, starts, _PARAGRAPH)
        sentence = _marks(text, starts, _SENTENCE) | paragraph
        chunks: list[Chunk] = []
        s = 0
        whole = self.max_tokens + self.rule.whole_slack  # the rest of a text up to this long is its last chunk
        while True:
            e = n if n - s <= whole else s + self.max_tokens
            cut = e if e == n else self._cut(s, e, paragraph, sentence, word)
            a, b = int(starts[s]), int(ends[cut - 1])
            chunks.append(Chunk(len(chunks), a, b, cut - s, text[a:b]))
            if cut >= n:
                return chunks
            s = cut if not self.rule.overlap_at_breaks and sentence[cut] else self._next_start(s, cut, word)

    def chunk_parts(self, text: str, starts: list[int] | None = None, spans: np.ndarray | None = None) -> list[Chunk]:
        """Chunks of `text` that never cross the given part boundaries (offsets where each page or slide starts):
        each part is chunked on its own, so a passage's page is exact. Without parts, chunk(text, spans)."""
        if not starts:
            return self.chunk(text, spans)
        bounds = sorted({0, *starts, len(text)})
        chunks: list[Chunk] = []
        for a, b in zip(bounds, bounds[1:]):
            for c in self.chunk(text[a:b]):
                chunks.append(Chunk(len(chunks), c.char_start + a, c.char_end + a, c.token_count, c.text))
        return chunks

    def _cut(self, s: int, e: int, paragraph: np.ndarray, sentence: np.ndarray, word: np.ndarray) -> int:
        """Token index where the chunk [s, cut) ends: the latest good boundary inside the window."""
        half = s + self.max_tokens // 2
        for flags, lo in ((paragraph, half), (sentence, half), (word, s + self.overlap + 1)):
            found = _last(flags, lo, e)
            if found is not None:
                return found
        return e

    def _next_start(self, s: int, cut: int, word: np.ndarray) -> int:
        """First token of the next chunk: `overlap` tokens back from the cut, at a word start."""
        if self.overlap == 0:
            return cut
        lo = cut - self.overlap
        hits = np.flatnonzero(word[lo:cut])
        start = lo + int(hits[0]) if len(hits) else lo
        return max(start, s + 1)
