"""A deterministic fake encoder for fast plumbing tests: hashed bag of words, same contract as the real one."""

import functools
import hashlib
import math
import os
import re
import select
import signal
import threading
from collections import Counter
from pathlib import Path

import numpy as np

from lodex.encoders.encoder import Encoder
from lodex.encoders.window import Window

_WORD = re.compile(r"\w+|[^\w\s]")


ROWS = 4096  # a word's vector is the sum of 3 of these rows of one fixed random table: normal, and two words share a row
# at a chance of about 1 in 450 (a random generator per word, seeded by its hash, was most of a plumbing test's time)


@functools.cache
def _table(dim: int) -> np.ndarray:
    """ROWS fixed random rows of `dim` numbers, scaled so that a sum of three has unit variance per number."""
    return (np.random.default_rng(0).standard_normal((ROWS, dim)) / math.sqrt(3)).astype(np.float32)


@functools.lru_cache(maxsize=1 << 16)
def _rows(word: str) -> tuple[int, int, int]:
    """The three table rows of a word (by a hash of it, case folded)."""
    digest = hashlib.blake2b(word.lower().encode(), digest_size=6).digest()
    return (int.from_bytes(digest[0:2], "little") % ROWS, int.from_bytes(digest[2:4], "little") % ROWS, int.from_bytes(digest[4:6], "little") % ROWS)


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

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        width = max(min(len(s) + 2, self.max_length) for s in self.token_spans(texts))
        self.batches.append(width * len(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        table = _table(self.dim)
        for i, text in enumerate(texts):
            rows = [_rows(match.group()) for match in list(_WORD.finditer(text))[: self.max_length - 2]]
            if rows:
                out[i] = table[np.array(rows).ravel()].sum(axis=0)
        return out

    def embed_windows(self, windows: list[Window], leads: list[str] | None = None) -> list[np.ndarray]:
        """Late chunking, faked: each chunk's own words (through `embed`, once per call, so that the hooks of the test
        encoders below see late chunking's groups as they see plain ones), plus a quarter of its window's (its context)."""
        leads = leads or [""] * len(windows)
        own = self.embed([lead + w.text[a:b] for w, lead in zip(windows, leads) for a, b in w.spans], kind="document")
        context = self._normalized(self.embed_batch([w.text for w in windows])) * 0.25
        out, at = [], 0
        for w, around in zip(windows, context):
            out.append(self._normalized(own[at : at + len(w.spans)] + around))
            at += len(w.spans)
        return out


class CrashingEncoder(FakeEncoder):
    """For crash tests (killed in a subprocess, or restarted in the test's own): logs every text it encodes to
    $LODEX_TEST_ENCODE_LOG, and when $LODEX_TEST_KILL_AFTER is set, SIGKILLs its own process that many embed calls in,
    after $LODEX_TEST_KILL_DELAY_MS (so the kill lands in the store commit that follows the encode)."""

    def __init__(self) -> None:
        super().__init__()
        self.log = os.environ["LODEX_TEST_ENCODE_LOG"]
        self.kill_after = int(os.environ.get("LODEX_TEST_KILL_AFTER", "0"))
        self.delay = float(os.environ.get("LODEX_TEST_KILL_DELAY_MS", "0")) / 1000
        self.calls = 0

    def embed(self, texts: list[str], kind: str = "document", lengths: list[int] | None = None) -> np.ndarray:
        out = super().embed(texts, kind, lengths)
        with open(self.log, "a", encoding="utf-8") as log:  # written before any kill
            log.write("".join(" ".join(t.split()) + "\n" for t in texts))
        self.calls += 1
        if self.kill_after and self.calls == self.kill_after:
            threading.Timer(self.delay, os.kill, (os.getpid(), signal.SIGKILL)).start()
        return out


def crashing_encoder(cfg: object) -> CrashingEncoder:
    """encoder.backend = "tests.fakes:crashing_encoder"."""
    return CrashingEncoder()


GATE_ENV = "LODEX_TEST_EMBED_GATE"


class EncodeGate:
    """The test's side of a model whose every document batch (in another process: a server, a Ray actor) waits until
    the test lets it through: the encoder says it has a batch on one FIFO (`asks`) and waits for a permit on another
    (`permits`), so the test decides, at each batch, whether the work goes on, and stops it where it likes. Closing
    the permits (`open_for_good`) lets every batch through from then on."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        for name in ("asks", "permits"):
            os.mkfifo(folder / name)
        # read-write ends: opening them does not wait for the other side, and the encoder's opens never wait either
        self._asks = os.open(folder / "asks", os.O_RDWR)
        self._permits: int | None = os.open(folder / "permits", os.O_RDWR)
        self.env = {GATE_ENV: str(folder)}
        self.granted = 0

    def next_ask(self, timeout: float) -> bool:
        """Until the encoder asks to encode a batch (True), at most `timeout` seconds (False)."""
        if not select.select([self._asks], [], [], timeout)[0]:
            return False
        os.read(self._asks, 1)
        return True

    def grant(self) -> None:
        """Let one batch through."""
        assert self._permits is not None, "the gate is open for good"
        os.write(self._permits, b"+")
        self.granted += 1

    def open_for_good(self) -> None:
        """Every batch from now on goes through (the encoder reads the permits' end)."""
        if self._permits is not None:
            os.close(self._permits)
            self._permits = None

    def close(self) -> None:
        self.open_for_good()
        os.close(self._asks)


class GatedEncoder(FakeEncoder):
    """A FakeEncoder whose document batches each wait for the test's permit when `folder` (else $LODEX_TEST_EMBED_GATE)
    names an `EncodeGate`'s folder (a model busy for as long as the test decides, in a process the test does not run)."""

    def __init__(self, folder: str | None = None) -> None:
        super().__init__()
        folder = folder or os.environ.get(GATE_ENV)
        self._gate: tuple[int, int] | None = None
        if folder:
            permits = os.open(os.path.join(folder, "permits"), os.O_RDONLY | os.O_NONBLOCK)  # never waits for a writer
            os.set_blocking(permits, True)
            self._gate = (os.open(os.path.join(folder, "asks"), os.O_WRONLY), permits)

    def embed(self, texts: list[str], kind: str = "document", lengths: list[int] | None = None) -> np.ndarray:
        if kind == "document" and self._gate is not None:
            asks, permits = self._gate
            try:
                os.write(asks, b"?")
            except BrokenPipeError:
                pass  # the test has gone: its permits say the rest
            if os.read(permits, 1) == b"":  # the permits' end closed: open for good
                self._gate = None
        return super().embed(texts, kind, lengths)


GATE_MODEL = "gate:"  # encoder.model = "gate:FOLDER": the gate's folder, carried by the settings themselves


def fake_encoder(cfg: object) -> GatedEncoder:
    """encoder.backend = "tests.fakes:fake_encoder" (for CLI runs in a subprocess); encoder.model = "gate:FOLDER" gates
    it there (the settings reach each Ray actor with the encoder it builds, in whatever worker process it runs)."""
    model = str(getattr(cfg, "model", "") or "")  # resolved as a path: "<config folder>/gate:FOLDER"
    return GatedEncoder(model.split(GATE_MODEL, 1)[1] if GATE_MODEL in model else None)


class DyingEncoder(FakeEncoder):
    """For a Ray actor killed mid-run: the first embed call of a run in any process kills that process (SIGKILL)
    unless the file $LODEX_TEST_DIE_ONCE exists; it is created first, so only one actor dies and its restart lives."""

    def embed(self, texts: list[str], kind: str = "document", lengths: list[int] | None = None) -> np.ndarray:
        marker = os.environ.get("LODEX_TEST_DIE_ONCE", "")
        if kind == "document" and marker:
            try:
                with open(marker, "x", encoding="utf-8") as out:
                    out.write(str(os.getpid()))
            except FileExistsError:
                pass
            else:
                os.kill(os.getpid(), signal.SIGKILL)
        return super().embed(texts, kind, lengths)


def dying_encoder(cfg: object) -> DyingEncoder:
    """encoder.backend = "tests.fakes:dying_encoder" (a Ray actor that dies once)."""
    return DyingEncoder()


class ReferenceBM25:
    """Lance's BM25 (k1 = 1.2, b = 0.75, its idf) over rows of terms, written out, to check the scores lodex and the
    full-text index give."""

    def __init__(self, rows: list[list[str]]) -> None:
        self.rows = rows
        self.df = Counter(term for row in rows for term in set(row))
        self.mean = sum(map(len, rows)) / len(rows)

    def __call__(self, query: list[str], row: list[str]) -> float:
        tf, n = Counter(row), len(self.rows)
        return sum(
            math.log(1 + (n - self.df[t] + 0.5) / (self.df[t] + 0.5)) * tf[t] * 2.2 / (tf[t] + 1.2 * (0.25 + 0.75 * len(row) / self.mean))
            for t in query
            if tf[t]
        )
