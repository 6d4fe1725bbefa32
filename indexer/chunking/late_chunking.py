"""Late chunking: a document encoded in long windows, each chunk's vector pooled from the token states of its own span
inside its window, so that every chunk sees its context. Chunks (boundaries, ids, offsets) are those of plain chunking."""

from dataclasses import dataclass

import numpy as np

from lodex.encoders.window import Window
from lodex.indexer.chunking.chunker import Chunk, TokenSpans, token_spans_of
from lodex.store.errors import ConfigError


@dataclass(frozen=True)
class LateChunking:
    """How documents are encoded when chunking.late is on: windows of up to `window_tokens` model tokens (special
    tokens and prefixes included), reaching `margin` tokens of context past their first and last chunk."""

    window_tokens: int
    margin: int
    long_only: bool = False  # only documents longer than one window; shorter ones encode each chunk alone

    def origin(self) -> dict[str, int | str]:
        """What an index built this way records (its vectors differ from plain chunking's); an index late-chunking
        every document records no "for", as those from before chunking.late_for did."""
        return {"window_tokens": self.window_tokens, "margin": self.margin} | ({"for": "long"} if self.long_only else {})


def late_chunking(
    enabled: bool, window_tokens: int, margin: int, chunk_tokens: int, model_window: int, pooling: str = "mean", long_only: bool = False
) -> LateChunking | None:
    """The late-chunking plan of the settings, checked; None when off. Windows of `window_tokens`, or (0) of twice a
    chunk (measured best with MiniLM: 256-token windows beat 512 on every evaluation run), within the model's window."""
    if not enabled:
        return None
    if pooling == "cls":
        raise ConfigError(
            "late chunking pools each chunk from its own tokens: a model pooled by its first (CLS) token cannot",
            'set chunking.late = false, or encoder.pooling to "mean"',
        )
    window = window_tokens or min(2 * chunk_tokens, model_window)
    if window > model_window:
        raise ConfigError(
            f"encoder.window_tokens {window} is longer than the model reads at once ({model_window} tokens)",
            f"set encoder.window_tokens to at most {model_window} (0 = twice chunking.max_tokens)",
        )
    if window < chunk_tokens:
        raise ConfigError(
            f"encoder.window_tokens {window} is shorter than a chunk (chunking.max_tokens {chunk_tokens})",
            "raise encoder.window_tokens, lower chunking.max_tokens, or set chunking.late = false",
        )
    return LateChunking(window, margin, long_only)


def plan_windows(
    text: str, chunks: list[Chunk], tokenize: TokenSpans, budget: int, margin: int, pack: bool = True, spans: np.ndarray | None = None
) -> list[Window]:
    """Consecutive chunks of `text` grouped into windows of at most `budget` content tokens: each window holds as
    many whole chunks as fit with up to `margin` tokens of context on each side (less where the budget is short),
    or (`pack` false: windows no longer than a chunk) one chunk each. Chunks' offsets are in `text`; `spans`: its
    token spans by `tokenize`, when the chunker has them already."""
    if not chunks:
        return []
    spans = token_spans_of(text, tokenize) if spans is None else spans
    starts, ends = spans[:, 0], spans[:, 1]
    first = np.searchsorted(starts, [c.char_start for c in chunks], side="left")
    last = np.maximum(np.searchsorted(ends, [c.char_end for c in chunks], side="left"), first)  # inclusive
    n = len(spans)
    word = np.ones(n + 1, dtype=bool)  # token k starts a word (so a window starting or ending there tokenizes alike)
    word[1:n] = starts[1:] > ends[:-1]
    windows: list[Window] = []
    i = 0
    while i < len(chunks):
        j = i
        while pack and j + 1 < len(chunks) and _width(first[i], last[j + 1], n, margin) <= budget:
            j += 1
        lo, hi = int(first[i]), int(last[j]) + 1
        room = max(budget - (hi - lo), 0)
        before = min(margin, lo, max(room // 2, room - min(margin, n - hi)))
        after = min(margin, n - hi, room - before)
        first_chunk, last_chunk = lo, hi
        lo, hi = lo - before, hi + after
        while lo < first_chunk and not word[lo]:
            lo += 1
        while hi > last_chunk and not word[hi]:
            hi -= 1
        a = min(int(starts[lo]), chunks[i].char_start)
        b = max(int(ends[hi - 1]), *(c.char_end for c in chunks[i : j + 1]))
        members = list(range(i, j + 1))
        windows.append(Window(text[a:b], members, [(chunks[k].char_start - a, chunks[k].char_end - a) for k in members], hi - lo))
        i = j + 1
    return windows


def _width(lo: int, hi_inclusive: int, n: int, margin: int) -> int:
    """Tokens of a window over chunk tokens [lo, hi] with its context margins (as far as the document goes)."""
    return int(hi_inclusive) + 1 - int(lo) + min(margin, int(lo)) + min(margin, n - int(hi_inclusive) - 1)
