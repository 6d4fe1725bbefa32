"""Copies of a tokenizer lent to one thread at a time, kept for the next borrower when given back."""

import copy
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class TokenizerCopies:
    """One copy per concurrent caller, made once. A Hugging Face fast tokenizer must not be shared: each call sets
    padding and truncation on the Rust tokenizer before encoding, so a concurrent call (the reader chunking while the
    writer encodes, or a query meanwhile) could be encoded with the other's settings. A copy per thread is not
    enough either: each indexing run reads on a new thread, and copying the tokenizer took ~0.1 s of CPU a run (a
    third of a small watcher commit's own work)."""

    def __init__(self, tokenizer: Any) -> None:
        self.original = tokenizer
        self._spare: list[Any] = []
        self._lock = threading.Lock()
        self.made = 0  # copies made so far (tests count them)

    @contextmanager
    def borrow(self) -> Iterator[Any]:
        """A copy no other thread uses until the block ends."""
        with self._lock:
            if self._spare:
                tokenizer = self._spare.pop()
            else:
                tokenizer = copy.deepcopy(self.original)
                self.made += 1
        try:
            yield tokenizer
        finally:
            with self._lock:
                self._spare.append(tokenizer)
