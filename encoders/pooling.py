"""From a model's token states to what lodex keeps: one vector per sequence, one per char span of a window (late
chunking), the char spans of a text's tokens, and the cosine of two sets of vectors row by row."""

from typing import Any, cast

import numpy as np


def pool_states(hidden: np.ndarray, mask: np.ndarray, pooling: str) -> np.ndarray:
    """One vector per sequence from (batch, tokens, dim) hidden states: cls, last real token (left or right padding), or
    masked mean."""
    if pooling == "cls":
        return cast(np.ndarray, hidden[np.arange(hidden.shape[0]), np.argmax(mask, axis=1)])
    if pooling == "last":
        return cast(np.ndarray, hidden[np.arange(hidden.shape[0]), mask.shape[1] - 1 - np.argmax(mask[:, ::-1], axis=1)])
    weights = mask[..., None].astype(hidden.dtype)
    return cast(np.ndarray, (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9))


def token_offsets(tokenizer: Any, texts: list[str]) -> list[np.ndarray]:  # a transformers fast tokenizer
    """Per text, the char spans of its tokens, no special tokens."""
    encoded = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True, return_attention_mask=False)
    return [np.asarray(m, dtype=np.int64).reshape(-1, 2) for m in encoded["offset_mapping"]]


def row_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The cosine of each row of `a` to the same row of `b`."""
    return cast(np.ndarray, (a * b).sum(axis=1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12))


def pool_spans(
    hidden: np.ndarray,
    mask: np.ndarray,
    special: np.ndarray,
    offsets: np.ndarray,
    spans: list[tuple[int, int]],
    content: tuple[int, int],
    pooling: str,
) -> np.ndarray:
    """One vector per char span from one window's token states: (tokens, dim) `hidden`, `mask` marking its real
    tokens (not padding), `special` its special tokens, their char `offsets` in the window's text. A span touching the
    start (end) of the window's `content` also takes the real tokens before (after) it (special tokens, a prefix), so
    a window holding one chunk pools exactly as that chunk encoded alone. Pooling: the mean, the last token or the first."""
    real = np.flatnonzero(mask)
    words = mask & ~special & (offsets[:, 1] > offsets[:, 0])
    out = np.zeros((len(spans), hidden.shape[-1]), dtype=np.float32)
    for k, (a, b) in enumerate(spans):
        inside = np.flatnonzero(words & (offsets[:, 0] >= a) & (offsets[:, 1] <= b))
        if not len(inside) or not len(real):
            continue  # truncated away: cannot happen with planned windows
        lo = int(real[0]) if a <= content[0] else int(inside[0])
        hi = int(real[-1]) + 1 if b >= content[1] else int(inside[-1]) + 1
        if pooling == "last":
            out[k] = hidden[hi - 1]
        elif pooling == "cls":
            out[k] = hidden[lo]
        else:
            keep = mask[lo:hi].astype(hidden.dtype)[:, None]
            out[k] = (hidden[lo:hi] * keep).sum(axis=0) / max(float(keep.sum()), 1e-9)
    return out
