"""The indexer hands the encoder groups of its own whole batches (no short batch at each group's end), side by side
when the encoder runs calls in parallel, and tokenizes a document once for its chunks and its windows."""

import random
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from lodex.indexer.chunking.chunker import Chunk
from lodex.indexer.chunking.late_chunking import late_chunking, plan_windows
from lodex.indexer.encoding_jobs import GROUP_BATCHES, job_groups
from lodex.indexer.prepared import Prepared
from lodex.indexer.scanner import scan
from tests.conftest import make_pipeline
from tests.fakes import FakeEncoder


def test_groups_are_whole_encoder_batches() -> None:
    rng = random.Random(7)
    encoder = FakeEncoder()
    for group_tokens in (0, 3 * encoder.batch_tokens):
        encoder.group_tokens = group_tokens
        jobs = [SimpleNamespace(length=rng.randint(3, 130)) for _ in range(500)]
        batches = [[jobs[i] for i in batch] for batch in encoder.plan_batches([job.length for job in jobs])]
        groups = list(job_groups(encoder, jobs))  # type: ignore[arg-type]
        assert [job for group in groups for job in group] == [job for batch in batches for job in batch]  # all, in order
        starts = {id(batch[0]) for batch in batches}
        assert all(id(group[0]) in starts for group in groups)  # each group begins a batch, so it ends one too
        assert len(groups) < len(batches)  # several batches a group
        for group in groups[:-1]:
            assert sum(1 for job in group if id(job) in starts) >= GROUP_BATCHES
            assert sum(len(b) * b[0].length for b in batches if id(b[0]) in {id(j) for j in group}) >= group_tokens


class SideBySide(FakeEncoder):
    """Runs embed() calls side by side like fast mode's sessions (parallel_calls 2) and records how many ran at once.
    Without a gate, the first call holds until a second one runs beside it (a rendezvous: overlap is shown, not timed);
    with one, every call holds until the test opens it (the work lasts as long as the test decides)."""

    parallel_calls = 2

    def __init__(self, gate: threading.Event | None = None) -> None:
        super().__init__(batch_tokens=256)
        self.gate, self.running, self.most, self.after_stop = gate, 0, 0, 0
        self.met = threading.Event()  # set once two calls ran at once
        self.stop: threading.Event | None = None  # the indexer's: calls begun once it is set are counted
        self._lock = threading.Lock()

    def embed(self, texts, kind="document", lengths=None) -> np.ndarray:  # noqa: ANN001
        with self._lock:
            self.after_stop += bool(self.stop and self.stop.is_set())
            self.running += 1
            self.most = max(self.most, self.running)
            if self.running >= 2:
                self.met.set()
        try:
            if self.gate is not None:
                assert self.gate.wait(30), "the test never opened the gate"
            elif not self.met.wait(10):  # calls one at a time: only the first waits, and the test fails on `most`
                self.met.set()
            return super().embed(texts, kind, lengths)
        finally:
            with self._lock:
                self.running -= 1


def _folder(root: Path) -> Path:
    root.mkdir()
    for i in range(6):
        (root / f"d{i}.txt").write_text("\n\n".join(f"Paragraph {k} of file {i}: lift, drag and heat at station {k * i}." for k in range(40)))
    return root


def _vectors(store) -> dict[tuple[str, int], np.ndarray]:  # noqa: ANN001
    rows = store.chunks_of_documents([r.id for r in store.document_records().values()], ["document_id", "ordinal", "vector"]).to_pylist()
    return {(r["document_id"], r["ordinal"]): np.asarray(r["vector"]) for r in rows}


def test_groups_run_side_by_side_for_an_encoder_with_parallel_calls(tmp_path: Path) -> None:
    root = _folder(tmp_path / "docs")
    serial, side = FakeEncoder(batch_tokens=256), SideBySide()
    results = []
    for name, encoder in (("serial", serial), ("side", side)):
        store, indexer, _ = make_pipeline(tmp_path / name, encoder, max_tokens=24)
        indexer.run(root)
        results.append(_vectors(store))
    assert side.most == 2  # two groups in flight: a core done with one group's last batch starts the next group's
    assert serial.texts_encoded == side.texts_encoded  # every chunk once, none twice
    assert results[0].keys() == results[1].keys()
    for key, vector in results[0].items():
        np.testing.assert_allclose(results[1][key], vector, atol=1e-6)  # each vector the same as one call at a time


def test_a_stop_during_side_by_side_groups_ends_the_run_soon(tmp_path: Path) -> None:
    root = _folder(tmp_path / "docs")
    gate = threading.Event()
    encoder = SideBySide(gate)
    _, indexer, _ = make_pipeline(tmp_path / "data", encoder, max_tokens=24)
    indexer.flush_tokens, encoder.stop = 1 << 20, indexer.cancel  # one flush: only the checks between groups can stop it
    done: list = []
    run = threading.Thread(target=lambda: done.append(indexer.run(root)))
    run.start()
    assert encoder.met.wait(30) and encoder.running == 2, "two groups in flight, held in the encoder"
    indexer.cancel.set()  # the stop comes while both groups are being encoded
    started = time.monotonic()
    gate.set()
    run.join(30)
    [summary] = done
    assert summary.interrupted and summary.added == 0  # nothing of the flush committed
    assert time.monotonic() - started < 1.5  # the groups already in flight finish; none after them starts
    assert encoder.after_stop <= encoder.parallel_calls


def test_a_document_is_tokenized_once_for_its_chunks_and_its_windows(tmp_path: Path) -> None:
    encoder = FakeEncoder()
    text = "\n\n".join(f"Paragraph {k}: the boundary layer of a swept wing at Mach {k}." for k in range(60))
    (root := tmp_path / "docs").mkdir()
    (root / "doc.txt").write_text(text)
    store, indexer, _ = make_pipeline(tmp_path / "data", encoder, max_tokens=24)
    indexer.late = late_chunking(True, 96, 8, 24, encoder.max_length)
    seen: list[str] = []
    spans = encoder.token_spans
    encoder.token_spans = lambda texts: (seen.extend(texts), spans(texts))[1]  # type: ignore[method-assign]
    indexer.chunker.tokenize = encoder.token_spans
    prepared = indexer.preparer().prepare(scan(root, indexer.rules).files[0], None, {}, 0.0)
    assert isinstance(prepared, Prepared) and prepared.windows
    assert sum(len(t) for t in seen if len(t) > 200) == len(text)  # the document's text tokenized once (the rest: leads)
    planned = plan_windows(
        text,
        [
            Chunk(i, s, e, n, t)
            for i, (s, e, n, t) in enumerate(
                zip(prepared.rows["char_start"], prepared.rows["char_end"], prepared.rows["token_count"], prepared.rows["text"])
            )
        ],
        spans,
        96 - encoder.special_tokens,
        8,
    )
    assert [(w.text, w.chunks, w.spans) for w in prepared.windows] == [(w.text, w.chunks, w.spans) for w in planned]
