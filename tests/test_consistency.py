"""Readers never see a torn index: searches during writes see each document at exactly one version."""

import re
import threading
from pathlib import Path

from lodex.indexer.pipeline import document_id
from lodex.search.searcher import Searcher
from lodex.store.lance_store import LanceStore
from tests.conftest import make_pipeline
from tests.fakes import FakeEncoder

TAG = re.compile(r"\bver(\d+)\b")


def _write_all(root: Path, version: int) -> None:
    for i in range(20):
        body = "\n\n".join(f"ver{version} file{i} paragraph {j} " + " ".join(f"w{i}x{j}x{k}" for k in range(30)) for j in range(6))
        (root / f"f{i:02d}.txt").write_text(body)


def test_searches_during_writes_see_one_version_per_document(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    _write_all(root, 0)
    encoder = FakeEncoder()
    store, indexer, _ = make_pipeline(tmp_path / "data", encoder)
    indexer.flush_tokens = 300  # many small commits: many intermediate versions to look at
    indexer.run(root)
    reader = Searcher(LanceStore(tmp_path / "data", encoder.dim), FakeEncoder(), passages=6)
    done = threading.Event()

    def write() -> None:
        for version in range(1, 6):
            _write_all(root, version)
            indexer.run(root)
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    searches = 0
    while not done.is_set() or searches < 5:
        response = reader.search("paragraph file", k=20)
        paths = [hit.path for hit in response.results]
        assert len(paths) == len(set(paths)) == 20, "a document missing or doubled"
        for hit in response.results:
            versions = {v for p in hit.passages for v in TAG.findall(p.text)}
            assert len(versions) == 1, f"{hit.path} mixes versions {versions}"
        searches += 1
    writer.join()
    assert searches >= 5
    final = reader.search("paragraph file", k=20)
    assert all(set(TAG.findall(h.passages[0].text)) == {"5"} for h in final.results)


def test_mean_vectors_follow_document_versions_reading_only_what_changed(tmp_path: Path, monkeypatch) -> None:
    import numpy as np

    root = tmp_path / "docs"
    root.mkdir()
    for i in range(5):
        (root / f"d{i}.txt").write_text(f"document {i} " + " ".join(f"w{i}x{j}" for j in range(40)))
    store, indexer, searcher = make_pipeline(tmp_path / "data", FakeEncoder())
    indexer.run(root)

    def check() -> tuple[np.ndarray, list[str]]:
        snap = searcher.snapshot()
        rows = np.arange(len(snap.docs))
        vectors, found = snap.mean_vectors(rows)
        table = store.documents.search().select(["id", "vector"]).limit(None).to_arrow().to_pylist()
        stored = {r["id"]: np.asarray(r["vector"], np.float32) for r in table}
        ids = snap.docs.rows(rows.tolist(), "ids")
        assert found.all() and np.allclose(vectors, np.stack([stored[i] for i in ids]))
        return vectors, ids

    before, ids = check()
    full_reads = []
    scan_documents = store.scan_documents
    monkeypatch.setattr(store, "scan_documents", lambda *args: full_reads.append(args) or scan_documents(*args))
    (root / "d3.txt").write_text("rewritten entirely " + " ".join(f"z{j}" for j in range(40)))
    indexer.run(root)
    after, ids_after = check()
    assert all("vector" not in (args[0] if args else []) for args in full_reads)  # only the changed document was read
    moved = [doc for i, doc in enumerate(ids_after) if not np.allclose(after[i], before[ids.index(doc)])]
    assert moved == [document_id("d3.txt")]
