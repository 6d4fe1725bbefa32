"""The encoder contract: a batch of texts in, float32 L2-normalized vectors out; batching lives here."""

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any, cast

import numpy as np

from lodex.encoders.errors import ModelError
from lodex.encoders.window import Window


class Encoder(ABC):
    """Base of every encoder: subclasses embed one prepared batch; sorting and token budgets live here."""

    model_id: str = "unknown"
    fingerprint: str = ""
    dim: int = 0
    max_length: int = 512  # tokens per input, special tokens included
    window_limit: int = 512  # the most tokens the model can read at once (its positions): late chunking's longest window
    special_tokens: int = 2  # tokens the model adds around each input
    pooling: str = "mean"
    normalize: bool = True
    precision: str = "exact"
    query_prefix: str = ""
    document_prefix: str = ""
    layer_weights: str = "fp32"  # a layer-streamed model's compressed layers ("int8", "int4"): recorded in the origin
    group_tokens: int = 0  # tokens the indexer should hand embed() at once; 0 = its default (a layer-streamed model wants many)
    parallel_calls: int = 1  # embed() calls worth running side by side (one per session in fast mode's "sessions" layout)

    def __init__(self, batch_tokens: int = 4_096, max_batch: int = 128) -> None:
        self.batch_tokens = batch_tokens
        self.max_batch = max_batch
        self.texts_encoded = 0  # how many texts went through the model: tests count re-encoding with it

    @abstractmethod
    def token_spans(self, texts: list[str]) -> list[np.ndarray]:
        """Per text, an (n, 2) array of the (start, end) char spans of its tokens, no special tokens."""

    @abstractmethod
    def embed_batch(self, texts: list[str]) -> np.ndarray:
        """Embed one batch (already sorted and budgeted, as `embed` cuts them) into an (n, dim) float32 array, pooled:
        the model's one run, what a backend implements (and bench/indexing/memory.py wraps to sample it)."""

    def _window_batch(self, texts: list[str], spans: list[list[tuple[int, int]]], starts: list[int]) -> list[np.ndarray]:
        """Late chunking: per text (a window, its lead included), one pooled vector per char span, from the token states
        of the whole text; `starts`: where each text's content begins (after its lead)."""
        raise ModelError(f"the {type(self).__name__} encoder cannot pool chunks from longer windows", "set chunking.late = false")

    def _query_batch(self, texts: list[str]) -> np.ndarray:
        """Embed one batch of queries; the same model as documents, maybe through a faster runtime for small batches."""
        return self.embed_batch(texts)

    def token_lengths(self, texts: list[str]) -> list[int]:
        """Model input length of each text, special tokens included, capped at max_length."""
        return [min(len(s) + self.special_tokens, self.max_length) for s in self.token_spans(texts)]

    def input_tokens(self, texts: list[str], kind: str = "document") -> list[int]:
        """How many tokens the model reads for each text embedded as `kind` (its prefix and special tokens included,
        cut at max_length as `embed` cuts it)."""
        prefix = self.query_prefix if kind == "query" else self.document_prefix
        return self.token_lengths([prefix + t for t in texts] if prefix else texts)

    @staticmethod
    def _similar_lengths(lengths: list[int], call_tokens: int = 8) -> list[list[int]]:
        """Indices grouped by length, shortest first: a text joins the group before it unless padding that group to
        its length costs more than `call_tokens` (what a separate call is worth, in tokens)."""
        order = sorted(range(len(lengths)), key=lambda i: lengths[i])
        groups = [[order[0]]]
        for i in order[1:]:
            group = groups[-1]
            if len(group) * (lengths[i] - lengths[group[-1]]) <= call_tokens:
                group.append(i)
            else:
                groups.append([i])
        return groups

    def plan_batches(self, lengths: list[int]) -> list[list[int]]:
        """Indices grouped into batches, longest first, each within the token budget once padded."""
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        batches: list[list[int]] = []
        current: list[int] = []
        for i in order:
            width = lengths[current[0]] if current else lengths[i]
            if current and ((len(current) + 1) * width > self.batch_tokens or len(current) >= self.max_batch):
                batches.append(current)
                current = []
            current.append(i)
        if current:
            batches.append(current)
        return batches

    def embed(self, texts: list[str], kind: str = "document", lengths: list[int] | None = None) -> np.ndarray:
        """Embed texts (documents' chunks, or queries with kind='query') as normalized float32 rows."""
        prefix = self.query_prefix if kind == "query" else self.document_prefix
        if prefix:
            texts = [prefix + t for t in texts]
            lengths = None
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        if lengths is None and len(texts) * self.max_length <= self.batch_tokens and len(texts) <= self.max_batch:
            # a few queries: one batch, or a few of similar lengths (padding a short query to a long one costs more
            # than another call: 8 Cranfield queries take 20% less CPU this way)
            batches = self._similar_lengths(self.token_lengths(texts)) if kind == "query" and len(texts) > 1 else [list(range(len(texts)))]
        else:
            batches = self.plan_batches(lengths if lengths is not None else self.token_lengths(texts))
        for batch, vectors in zip(batches, self._embed_batches([[texts[i] for i in batch] for batch in batches], kind)):
            out[batch] = vectors
            self.texts_encoded += len(batch)
        return self._normalized(out)

    def embed_windows(self, windows: list[Window], leads: list[str] | None = None) -> list[np.ndarray]:
        """Late chunking: per window, one vector per chunk of it (as `embed` would give them: normalized, with the
        document prefix), pooled from the token states of the whole window; `leads`: text put before each window
        (a title), given to its first chunk as a prefix is."""
        leads = [self.document_prefix + lead for lead in (leads or [""] * len(windows))]
        texts = [lead + w.text for lead, w in zip(leads, windows)]
        spans = [[(a + len(lead), b + len(lead)) for a, b in w.spans] for lead, w in zip(leads, windows)]
        lead_tokens = [len(s) for s in self.token_spans(leads)] if any(leads) else [0] * len(windows)
        lengths = [w.tokens + n + self.special_tokens for w, n in zip(windows, lead_tokens)]
        out: list[np.ndarray] = [np.zeros((0, self.dim), np.float32)] * len(windows)
        batches = self.plan_batches(lengths)
        inputs = [([texts[i] for i in b], [spans[i] for i in b], [len(leads[i]) for i in b]) for b in batches]
        for batch, pooled in zip(batches, self._window_batches(inputs)):
            for i, vectors in zip(batch, pooled):
                out[i] = self._normalized(vectors.astype(np.float32, copy=False))
            self.texts_encoded += sum(len(windows[i].chunks) for i in batch)
        # a chunk the window's tokenization cut off (text tokenizing longer than planned: a long unbroken run of
        # characters under a byte-level tokenizer) has no token states: encoded alone, as plain chunking would
        lost = [(i, k) for i, vectors in enumerate(out) for k in np.flatnonzero(~vectors.any(axis=1))]
        if lost:
            alone = self.embed([leads[i][len(self.document_prefix) :] + windows[i].text[slice(*windows[i].spans[k])] for i, k in lost])
            for (i, k), vector in zip(lost, alone):
                out[i][k] = vector
        return out

    def _window_batches(self, inputs: list[tuple[list[str], list[list[tuple[int, int]]], list[int]]]) -> Iterable[list[np.ndarray]]:
        """Each window batch's pooled vectors, in order (`_window_batch`'s arguments per batch): one batch after another
        here; a layer-streamed model takes them all at once."""
        return (self._window_batch(*args) for args in inputs)

    def _normalized(self, vectors: np.ndarray) -> np.ndarray:
        """Rows L2-normalized in place when the encoder normalizes (zero rows stay zero)."""
        if self.normalize:
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            np.divide(vectors, norms, out=vectors, where=norms > 0)
        return vectors

    def runtime(self) -> str:
        """How documents and queries are encoded here (precision and runtime), for the startup line and status."""
        return f"{self.precision} ({type(self).__name__})"

    def _embed_batches(self, batches: list[list[str]], kind: str) -> Iterable[np.ndarray]:
        """Each batch's vectors, in order: one batch after another here; a layer-streamed model takes them all at once."""
        run = self._query_batch if kind == "query" else self.embed_batch
        return (run(batch) for batch in batches)

    def release_memory(self) -> None:  # noqa: B027 - optional: a backend that keeps nothing has nothing to give back
        """Give back working memory kept from large batches (after a big run); the next batch grows it again."""

    def tokenizer_only(self) -> "Encoder":
        """A light, picklable stand-in with this encoder's token_spans and constants (no model), for reading and chunking
        files as this encoder's indexer would, elsewhere (a Ray task); this encoder itself when it is light already."""
        return self

    def embed_query(self, query: str) -> np.ndarray:
        """One query's vector, shape (dim,)."""
        return cast(np.ndarray, self.embed([query], kind="query")[0])

    def origin(self) -> dict[str, Any]:
        """What an index built with this encoder must record to be searched with it again."""
        return {
            "model_id": self.model_id,
            "model_fingerprint": self.fingerprint,
            "dim": self.dim,
            "pooling": self.pooling,
            "normalize": self.normalize,
            "max_length": self.max_length,
            "precision": self.precision,
            "query_prefix": self.query_prefix,
            "document_prefix": self.document_prefix,
        } | ({"layer_weights": self.layer_weights} if self.layer_weights != "fp32" else {})
