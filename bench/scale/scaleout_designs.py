"""The two designs bench/scale/scaleout.py compares, each run with N simulated machines (threads whose encoder sleeps) against
one faulty moto S3 server, both through lodex's own store: today's single writer (every encoded document gathered to one
committer, which commits a flush of index.flush_tokens at a time: LanceStore.commit) and fragment writes (each machine
writes its flushes as chunk fragments itself, store/fragments.py; one committer commits all fragments waiting in one
Append, then their document rows: LanceStore.commit_fragments)."""

import queue
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.scale import scaleout_fragments as fragments
from bench.scale.scaleout_s3 import Endpoint
from bench.scale.scaleout_work import Doc, Workload, batches, chunk_rows, document_rows, document_table, encode, machine_docs, verify
from lodex.store import fragments as lodex_fragments
from lodex.store.errors import StoreError
from lodex.store.fragments import FragmentTarget, write_chunk_fragments
from lodex.store.lance_store import LanceStore
from lodex.store.object_store import ObjectStore
from lodex.store.origin import make_origin

RETRIES = {"client_max_retries": "10"}  # the object-store client's own retries of a failed request (Lance's default: 3)


@dataclass
class Commit:
    """One commit of the committer: its seconds (both tables), fragments, chunk rows and documents."""

    seconds: float
    fragments: int
    rows: int
    docs: int
    chunks_s: float = 0.0  # of which the chunks table's commit (the Append of fragments, or LanceDB's add)
    ended: float = field(default_factory=time.perf_counter)  # when it ended (the run's clock: `Point.started`)


@dataclass
class Point:
    """One run: a design with N machines."""

    design: str
    machines: int
    docs: int = 0
    tokens: int = 0
    started: float = 0.0
    seconds: float = 0.0
    commits: list[Commit] = field(default_factory=list)
    check: dict[str, Any] = field(default_factory=dict)
    tries: dict[str, int] = field(default_factory=dict)
    rival: list[Doc] = field(default_factory=list)
    manifest_bytes: int = 0  # the chunks table's latest manifest: what each commit writes (it lists every fragment)
    cpu_s: dict[str, float] = field(default_factory=dict)  # CPU seconds of this process and of the S3 server

    @property
    def docs_per_s(self) -> float:
        return self.docs / self.seconds if self.seconds else 0.0

    def steady_docs_per_s(self) -> float:
        """Documents/s committed between the commits that took the run past 10% and 90% of its documents (the start,
        where machines fill their first flush, and the end, where they all write their last, left out)."""
        done, marks = 0, []
        for commit in self.commits:
            done += commit.docs
            marks.append((done, commit.ended - self.started))
        (d0, t0), (d1, t1) = next(m for m in marks if m[0] >= 0.1 * self.docs), next(m for m in marks if m[0] >= 0.9 * self.docs)
        return (d1 - d0) / (t1 - t0) if t1 > t0 else self.docs_per_s


class Rival:
    """Another writer committing a one-chunk document (its chunk, then its document row) every `every_s` seconds while
    the run goes on, so that the committer's commits race its commits and Lance must rebase them."""

    def __init__(self, uris: tuple[str, str], options: dict[str, str], every_s: float, dim: int) -> None:
        self.uris, self.options, self.every_s, self.dim = uris, options, every_s, dim
        self.docs: list[Doc] = []
        self.tries = fragments.Tries()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        rng = np.random.default_rng(7)
        while not self.stop.wait(self.every_s):
            doc = Doc(f"rival-{len(self.docs):05d}", (64,))
            rows, vectors = chunk_rows([doc], self.dim, rng)
            for uri, table in zip(self.uris, (rows, document_table([doc], vectors, self.dim))):
                written = fragments.write(table, uri, self.options, self.tries)
                fragments.append(uri, written, fragments.dataset(uri, self.options).version, self.options, self.tries)
            self.docs.append(doc)

    def __enter__(self) -> "Rival":
        if self.every_s > 0:
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join()


def run_point(design: str, machines: int, work: Workload, endpoint: Endpoint, prefix: str, rival_every_s: float = 0.0) -> Point:
    """Run `design` ("single" or "fragments") with `machines` simulated machines on a fresh prefix; check the index."""
    options = {**endpoint.options, **RETRIES}
    point = Point(design, machines)
    docs = [machine_docs(work, m) for m in range(machines)]
    cpu = (time.process_time(), endpoint.cpu_seconds())
    with tempfile.TemporaryDirectory(prefix="lodex-scaleout-") as cache:
        run = _single_writer if design == "single" else _fragment_writes
        chunks_uri, documents_uri, tries, settle, close = run(point, docs, work, f"s3://bench/{prefix}", options, Path(cache), rival_every_s)
        _cpu_during(point, endpoint, cpu)
        try:
            settle()
            ds_chunks, ds_docs = fragments.dataset(chunks_uri, options), fragments.dataset(documents_uri, options)
            point.check = verify(
                ds_chunks.to_table(columns=["id", "document_id", "ordinal"]),
                ds_docs.to_table(columns=["id"]),
                [d for per in docs for d in per] + point.rival,
            )
            point.manifest_bytes = endpoint.newest_size(f"bench/{prefix}/lance/chunks.lance/_versions")
        finally:
            close()
    point.tries = tries()
    return point


def _cpu_during(point: Point, endpoint: Endpoint, since: tuple[float, float]) -> None:
    point.cpu_s = {"harness": time.process_time() - since[0], "s3": endpoint.cpu_seconds() - since[1]}


# (the chunks and documents tables' URIs, the retries made, what to do before the check, what to do after it)
Opened = tuple[str, str, Callable[[], dict[str, int]], Callable[[], Any], Callable[[], None]]


def _machines(count: int, work: Workload, docs: list[list[Doc]], flush: int, deliver: Callable[[int, list[Doc]], None]) -> None:
    """Run the machines: each encodes its documents in turn and hands each flush of `flush` tokens (its first a random
    fraction of one, so that machines do not flush in step; 1: each document) to `deliver`."""

    def machine(m: int) -> None:
        first = int(np.random.default_rng([work.seed, m, 1]).uniform(0.05, 1.0) * flush)
        for batch in batches(docs[m], flush, first):
            for doc in batch:
                encode(doc, work)
            deliver(m, batch)

    with ThreadPoolExecutor(count, thread_name_prefix="machine") as pool:
        for done in [pool.submit(machine, m) for m in range(count)]:
            done.result()


def _open_store(uri: str, options: dict[str, str], cache: Path, dim: int) -> LanceStore:
    """lodex's own store on the S3 prefix `uri`, as `lodex index` opens it there."""
    origin = make_origin({"model_id": "scaleout-standin", "dim": dim, "pooling": "mean", "normalize": True}, 128, 16)
    return LanceStore.open(cache, origin, create=True, remote=ObjectStore(uri, options))


def _collect(store: LanceStore) -> None:
    """The collection that ends every run (not timed): the chunks a failed commit left go. The rival's documents are
    seen first: a collection trusts its view of the documents table (one writer, the lease, is what keeps that true)."""
    store.refresh()
    store.collect_garbage()


def _single_writer(
    point: Point, docs: list[list[Doc]], work: Workload, uri: str, options: dict[str, str], cache: Path, rival_every_s: float
) -> Opened:
    """Today's design: the machines' documents gathered to one LanceStore, committed a flush at a time."""
    store = _open_store(uri, options, cache, work.dim)
    chunks_s: list[float] = []
    store.chunks.add = _timed(store.chunks.add, chunks_s)  # type: ignore[method-assign]
    gathered: queue.Queue[list[Doc] | None] = queue.Queue()
    failed = {"commits": 0}
    rng = np.random.default_rng([work.seed, 99])

    def commit(pending: list[Doc]) -> None:
        for attempt in range(fragments.ATTEMPTS):  # a failed commit is what a rerun does: new chunk ids, committed again
            chunks, vectors = chunk_rows(pending, work.dim, rng)
            rows = document_rows(pending, vectors)
            started = time.perf_counter()
            chunks_s.clear()
            try:
                store.commit(chunks, rows, [])
                break
            except StoreError:
                failed["commits"] += 1
                if attempt == fragments.ATTEMPTS - 1:
                    raise
        point.commits.append(Commit(time.perf_counter() - started, 1, chunks.num_rows, len(pending), sum(chunks_s)))

    def committer() -> None:
        pending: list[Doc] = []
        while (batch := gathered.get()) is not None:
            for doc in batch:  # a flush once index.flush_tokens are pending, as the driver's own flushes
                pending.append(doc)
                if sum(d.total for d in pending) >= work.flush_tokens:
                    commit(pending)
                    pending = []
        if pending:
            commit(pending)

    _run_both(
        point,
        docs,
        work,
        1,
        lambda m, batch: gathered.put([*batch]),
        committer,
        lambda: gathered.put(None),
        Rival(_uris(uri), options, rival_every_s, work.dim),
    )
    return *_uris(uri), lambda: {"failed commits (made again)": failed["commits"]}, lambda: _collect(store), store.close


def _uris(uri: str) -> tuple[str, str]:
    """The chunks and documents tables under an index's prefix."""
    return f"{uri}/lance/chunks.lance", f"{uri}/lance/documents.lance"


def _run_both(
    point: Point,
    docs: list[list[Doc]],
    work: Workload,
    flush: int,
    deliver: Callable[[int, list[Doc]], None],
    committer: Callable[[], None],
    finish: Callable[[], None],
    rival: Rival,
) -> None:
    """Machines and committer together, the rival beside; the run's seconds end at its last commit."""
    point.docs, point.tokens = sum(len(d) for d in docs), sum(doc.total for d in docs for doc in d)
    thread_error: list[BaseException] = []

    def guarded() -> None:
        try:
            committer()
        except BaseException as exc:  # noqa: BLE001 - raised again on the caller's thread
            thread_error.append(exc)

    with rival:
        started = point.started = time.perf_counter()
        thread = threading.Thread(target=guarded, name="committer")
        thread.start()
        try:
            _machines(point.machines, work, docs, flush, deliver)
        finally:
            finish()
            thread.join()
        point.seconds = time.perf_counter() - started
    point.rival = rival.docs
    if thread_error:
        raise thread_error[0]


def _fragment_writes(
    point: Point, docs: list[list[Doc]], work: Workload, uri: str, options: dict[str, str], cache: Path, rival_every_s: float
) -> Opened:
    """The fragment design, through lodex's own path (store/fragments.py, LanceStore.commit_fragments): each machine
    writes its flushes' chunk rows as fragments; the committer commits every fragment waiting in one Append of the
    chunks table, then their documents' rows (the commit point)."""
    store = _open_store(uri, options, cache, work.dim)
    target = store.fragment_target()
    written: queue.Queue[tuple[list[Any], list[dict[str, Any]], int] | None] = queue.Queue()
    tries = fragments.Tries()

    def deliver(m: int, batch: list[Doc]) -> None:
        chunks, vectors = chunk_rows(batch, work.dim, np.random.default_rng())
        written.put((_write(target, chunks, tries), document_rows(batch, vectors), chunks.num_rows))

    def committer() -> None:
        ended = False
        while not ended:
            waiting = [written.get()]
            while not written.empty():
                waiting.append(written.get_nowait())
            ended = waiting[-1] is None
            ready = [w for w in waiting if w is not None]
            if ready:
                frags, rows = [f for w in ready for f in w[0]], [r for w in ready for r in w[1]]
                started = time.perf_counter()
                _commit(store, frags, rows, options, tries)
                point.commits.append(Commit(time.perf_counter() - started, len(frags), sum(w[2] for w in ready), len(rows), sum(chunks_s)))
                chunks_s.clear()

    rival = Rival(_uris(uri), options, rival_every_s, work.dim)
    chunks_s: list[float] = []
    kept = lodex_fragments.commit_fragments
    lodex_fragments.commit_fragments = _timed(kept, chunks_s)  # as LanceStore.commit_fragments calls it
    try:
        _run_both(point, docs, work, work.flush_tokens, deliver, committer, lambda: written.put(None), rival)
    finally:
        lodex_fragments.commit_fragments = kept
    return *_uris(uri), lambda: _tries(tries, rival.tries), lambda: _collect(store), store.close


def _write(target: FragmentTarget, chunks: Any, tries: fragments.Tries) -> list[Any]:
    """A machine's chunk rows written as fragments (lodex's write_chunk_fragments), written again when it fails."""
    for attempt in range(fragments.ATTEMPTS):
        try:
            return write_chunk_fragments(target, chunks)
        except StoreError:
            if attempt == fragments.ATTEMPTS - 1:
                raise
            tries.writes += 1
            time.sleep(0.1 * 2**attempt)
    raise AssertionError("unreachable")


def _commit(store: LanceStore, frags: list[Any], rows: list[dict[str, Any]], options: dict[str, str], tries: fragments.Tries) -> None:
    """LanceStore.commit_fragments, made again when it fails: when the failed one's fragments are in the latest version
    (its reply was lost, or its document rows failed after), only the document rows (an upsert) are made again."""
    for attempt in range(fragments.ATTEMPTS):
        try:
            store.commit_fragments(frags, [r["id"] for r in rows], rows, [])
            return
        except StoreError:
            if attempt == fragments.ATTEMPTS - 1:
                raise
            tries.commits += 1
            time.sleep(0.1 * 2**attempt)
            if frags and fragments.landed(store.fragment_target().uri, frags, options):
                tries.landed_unseen += 1
                frags = []
    raise AssertionError("unreachable")


def _timed(function: Callable[..., Any], sink: list[float]) -> Callable[..., Any]:
    """`function`, its seconds appended to `sink` at each call."""

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            sink.append(time.perf_counter() - started)

    return timed


def _tries(*kept: fragments.Tries) -> dict[str, int]:
    return {
        "writes made again": sum(t.writes for t in kept),
        "commits tried again": sum(t.commits for t in kept),
        "commits landed, reply lost": sum(t.landed_unseen for t in kept),
    }
