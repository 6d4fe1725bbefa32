"""A deterministic fake encoder for fast plumbing tests: hashed bag of words, same contract as the real one."""

import hashlib
import re

import numpy as np

from indexer.encoder import Encoder

_WORD = re.compile(r"\w+|[^\w\s]")


class FakeEncoder(Encoder):
    """Each word maps to a fixed random vector; a text is the sum of its words' vectors."""

    model_id = "fake-bag-of-words"
    fingerprint = "fake"
    dim = 256
    max_length = 130
    special_tokens = 2
    pooling = "mean"

    def __init__(self, batch_tokens: int = 1024, dim: int = 256) -> None:
        super().__init__(batch_tokens=batch_tokens)
        self.dim = dim
        self.batches: list[int] = []  # padded tokens of each batch, to check budgets

    def token_spans(self, texts: list[str]) -> list[np.ndarray]:
        return [np.array([m.span() for m in _WORD.finditer(t)], dtype=np.int64).reshape(-1, 2) for t in texts]

    def _word(self, word: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.blake2b(word.lower().encode(), digest_size=8).digest(), "little")
        return np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        width = max(min(len(s) + 2, self.max_length) for s in self.token_spans(texts))
        self.batches.append(width * len(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for match in list(_WORD.finditer(text))[: self.max_length - 2]:
                out[i] += self._word(match.group())
        return out
