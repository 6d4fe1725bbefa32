"""Copies of a tokenizer lent to one thread at a time, kept for the next borrower when given back."""

import copy
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

LARGE_VOCABULARY = 100_000  # pieces from which a tokenizer is lent one copy at a time (XLM-R: 250,002; BERT: 30,522)


class TokenizerCopies:
    """One copy per concurrent caller, made once. A Hugging Face fast tokenizer must not be shared: each call sets
    padding and truncation on the Rust tokenizer before encoding, so a concurrent call (the reader chunking while the
    writer encodes, or a query meanwhile) could be encoded with the other's settings. A copy per thread is not
    enough either: each indexing run reads on a new thread, and copying the tokenizer took ~0.1 s of CPU a run (a
    third of a small watcher commit's own work). A large vocabulary is lent one copy at a time: a copy of
    multilingual-e5-small's (250k Unigram pieces) holds ~300 MB, where tokenizing is a small share of encoding."""

    def __init__(self, tokenizer: Any, most: int | None = None) -> None:
        """`most`: the copies made at most (callers beyond wait for one); None: as many as callers at once, and one
        when the vocabulary holds LARGE_VOCABULARY pieces or more."""
        self.original = tokenizer
        self.most = most if most is not None else (1 if len(tokenizer) >= LARGE_VOCABULARY else None)
        self._spare: list[Any] = []
        self._given_back = threading.Condition()
        self.made = 0  # copies made so far (tests count them)

    @contextmanager
    def borrow(self) -> Iterator[Any]:
        """A copy no other thread uses until the block ends."""
        with self._given_back:
            while not self._spare and self.most is not None and self.made >= self.most:
                self._given_back.wait()
            if self._spare:
                tokenizer = self._spare.pop()
            else:
                tokenizer = copy.deepcopy(self.original)
                self.made += 1
        try:
            yield tokenizer
        finally:
            with self._given_back:
                self._spare.append(tokenizer)
                self._given_back.notify()
