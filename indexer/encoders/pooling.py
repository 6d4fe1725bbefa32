"""From a model's token states to what lodex keeps: one vector per sequence, the char spans of a text's tokens, and the
cosine of two sets of vectors row by row."""

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
