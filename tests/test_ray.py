"""`lodex index --ray` on a local Ray cluster (2 CPUs, one session for the module): the index it builds and updates is the
local path's (documents, chunks by (document, ordinal), texts, offsets, vectors, top passages), its actors writing the
chunk rows as fragments (index.ray_writes "fragments") or sending them back ("driver": an actor killed mid-run included),
and a driver killed at each of four points of its commits converges on a rerun."""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

import lodex
from lodex.api.factory import open_app, open_reader
from lodex.api.settings import Settings
from lodex.indexer.pipeline import RunSummary
from lodex.store.errors import ConfigError, LodexError
from lodex.store.lance_store import LanceStore
from tests.fakes import FakeEncoder
from tests.invariants import check_index
from tests.waiting import Wake, wait_until

ray = pytest.importorskip("ray", reason="Ray Data is in the cluster extra")
import lance  # noqa: E402 - pylance, with lancedb

REPO = Path(__file__).resolve().parents[1]
CHUNK_COLUMNS = ["document_id", "ordinal", "text", "char_start", "char_end", "token_count", "page", "page_end", "section", "vector"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local Ray cluster with 2 CPUs whose workers import tests.fakes; yields the die-once marker of DyingEncoder."""
    marker = tmp_path_factory.mktemp("ray") / "died"
    # The cluster's processes, its workers too, take this environment (not a runtime_env's env_vars: a worker of a job
    # with a runtime_env starts through Ray's setup_worker, a third more CPU for each of the module's ~25 workers).
    # Ray keeps its cluster's auth token in ~/.ray: not the user's home.
    with pytest.MonkeyPatch.context() as patch:
        environment = {"HOME": str(marker.parent), "PYTHONPATH": str(REPO), "LODEX_TEST_DIE_ONCE": str(marker), "HF_HUB_OFFLINE": "1"}
        for name, value in environment.items():
            patch.setenv(name, value)
        ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    yield marker
    ray.shutdown()


def _folder(root: Path, large_parts: int = 120) -> Path:
    """Markdown, plain text and HTML files, two with one content, a large file (streamed in parts), a bad file."""
    root.mkdir()
    words = "lift drag wing boundary layer heat transfer shock wave pressure nozzle flow turbulence".split()
    for i in range(9):
        text = "\n\n".join(" ".join(words[(i * 7 + j * 3 + k) % len(words)] for k in range(40 + i)) + "." for j in range(5 + i))
        (root / ("sub" if i % 3 == 0 else "")).mkdir(exist_ok=True)
        (root / ("sub" if i % 3 == 0 else "") / f"doc{i}.{['md', 'txt', 'html'][i % 3]}").write_text(
            f"<html><body><h1>Doc {i}</h1><p>{text}</p></body></html>" if i % 3 == 2 else f"# Doc {i}\n\n{text}\n"
        )
    (root / "copy.md").write_text((root / "sub" / "doc0.md").read_text())
    (root / "large.txt").write_text("\n\n".join(f"Part {j}: " + " ".join(words[(j + k) % len(words)] for k in range(60)) for j in range(large_parts)))
    (root / "bad.txt").write_bytes(b"\x00\x01\x02binary" * 200)
    return root


def _settings(tmp_path: Path, name: str, engine: str, backend: str = "tests.fakes:fake_encoder") -> Settings:
    settings = Settings(base_dir=tmp_path)
    settings.index.data_dir = str(tmp_path / name)
    settings.index.stream_above_mb = 0.02  # large.txt (~50 KB) is streamed in parts
    settings.index.flush_tokens = 2048  # several commits per run
    settings.index.engine = engine  # type: ignore[assignment]
    settings.index.ray_actors, settings.index.ray_cpus_per_actor = 2, 0.75
    settings.encoder.backend = backend
    return settings


def _index(settings: Settings, root: Path, encoder: Any = None) -> tuple[RunSummary, dict[str, Any]]:
    with open_app(settings, "write", root, encoder=encoder) as side:
        summary = side.indexer.run(root)
        check_index(side.store)  # (the folder holds a bad file too: the identity with the local index says the rest)
        return summary, _contents(side.store)


def _contents(store: Any) -> dict[str, Any]:
    """Documents by id and chunks by (document id, ordinal): every column but the random chunk ids and the times."""
    docs = store.scan_documents(["id", "path", "content_hash", "size", "format", "title", "chunk_count", "token_count", "vector"])
    chunks = store.chunks.search().select(CHUNK_COLUMNS).limit(None).to_arrow().to_pylist()
    return {
        "documents": {row.pop("id"): row for row in docs.to_pylist()},
        "chunks": {(row.pop("document_id"), row.pop("ordinal")): row for row in chunks},
    }


def _assert_same(ray_index: dict[str, Any], local: dict[str, Any], atol: float = 1e-5) -> None:
    for kind in ("documents", "chunks"):
        assert ray_index[kind].keys() == local[kind].keys(), kind
        for key, row in local[kind].items():
            other = dict(ray_index[kind][key])
            np.testing.assert_allclose(other.pop("vector"), row["vector"], atol=atol, err_msg=f"{kind} {key}")
            assert other == {k: v for k, v in row.items() if k != "vector"}, f"{kind} {key}"


QUERIES = [
    "lift",
    "drag on the wing",
    "boundary layer",
    "heat transfer",
    "shock wave pressure",
    "nozzle flow",
    "turbulence",
    "wing lift and drag",
    "pressure in the nozzle",
    "a new paragraph",
]


def _top_passages(settings: Settings) -> list[tuple[str, str, int]]:
    """The best document and passage of each of QUERIES, by vectors alone (the FAISS index)."""
    with lodex.open(Path(settings.index.data_dir), encoder__backend="tests.fakes:fake_encoder") as index:
        return [
            (hit.path, hit.passages[0].text, hit.passages[0].char_start)
            for hit in (index.search(query, 1, mode="dense").results[0] for query in QUERIES)
        ]


def _counts(summary: RunSummary) -> dict[str, Any]:
    return {k: v for k, v in summary.to_dict().items() if k not in ("seconds", "phases")}  # times differ


def test_ray_index_is_the_local_index_and_updates_alike(cluster: Path, tmp_path: Path) -> None:
    root = _folder(tmp_path / "docs")
    local, on_ray = _settings(tmp_path, "local", "local"), _settings(tmp_path, "ray", "ray")
    (local_summary, local_index), (ray_summary, ray_index) = _index(local, root), _index(on_ray, root)
    assert _counts(ray_summary) == _counts(local_summary)
    assert ray_summary.added == 11 and ray_summary.failed == 1 and len(ray_index["chunks"]) > 40
    _assert_same(ray_index, local_index, atol=1e-6)
    assert _top_passages(on_ray) == _top_passages(local)  # the vector index the fragments' commits left: the same answers

    (root / "doc1.txt").write_text((root / "doc1.txt").read_text() + "\n\nA new closing paragraph about nozzles.\n")  # edited
    (root / "sub" / "doc3.md").unlink()  # deleted
    (root / "new.md").write_text("# New\n\nA new file about shock waves and pressure.\n")  # added
    (root / "moved.md").write_text((root / "doc4.txt").read_text())  # a copy under another format: encoded
    (root / "copy2.md").write_text((root / "sub" / "doc0.md").read_text())  # a copy: its vectors re-used
    os.utime(root / "doc5.html", (1_000_000, 1_000_000))  # touched: same content
    on_ray.index.ray_actors = 1  # (the three files encoded need no second actor: the run above had two write fragments)
    (local_summary, local_index), (ray_summary, ray_index) = _index(local, root), _index(on_ray, root)
    assert _counts(ray_summary) == _counts(local_summary)
    assert (ray_summary.added, ray_summary.updated, ray_summary.reused, ray_summary.deleted, ray_summary.unchanged) == (2, 1, 1, 1, 9)
    _assert_same(ray_index, local_index)


def test_cli_index_ray_on_a_running_cluster_with_an_actor_killed_mid_run_gives_the_local_index(
    cluster: Path, tmp_path: Path, cli_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`lodex index --ray` on the cluster this process runs, the vectors sent back to this process (index.ray_writes
    "driver": the other tests have the actors write them), one of its two actors killed mid-run (Ray restarts it and
    runs its calls again): the summary says 11 added, 1 failed, not interrupted, and the index is the local path's."""
    from lodex.api.cli import app

    root = _folder(tmp_path / "docs")
    _, local_index = _index(_settings(tmp_path, "local", "local"), root)
    settings = {"ENCODER__BACKEND": "tests.fakes:dying_encoder", "INDEX__RAY_WRITES": "driver", "INDEX__RAY_CPUS_PER_ACTOR": "0.75"}
    settings |= {"INDEX__STREAM_ABOVE_MB": "0.02", "INDEX__FLUSH_TOKENS": "2048"}  # as _settings's
    for name, value in settings.items():
        monkeypatch.setenv(f"LODEX_{name}", value)
    data = tmp_path / "ray"
    result = CliRunner().invoke(app, ["index", str(root), "--ray", "--ray-actors", "2", "--data-dir", str(data), "--json"])
    assert result.exit_code == 0, result.output
    assert cluster.exists(), "no actor was killed"
    summary = json.loads(result.stdout.splitlines()[-1])  # (Ray may print a line of its own before it)
    assert (summary["added"], summary["failed"], summary["interrupted"]) == (11, 1, False)
    _assert_same(_contents(LanceStore(data, FakeEncoder.dim)), local_index)


_DRIVER = """
import os, sys, ray
from pathlib import Path
from lodex.api.factory import open_app
from lodex.api.settings import load_settings
from lodex.indexer.pipeline import Indexer
from lodex.indexer.ray_engine import RayIndexer
from lodex.store import fragments
from lodex.store.lance_store import LanceStore

address, data_dir, root, point, log = sys.argv[1:6]


def die_at(owner, name, after=0):  # the driver dies (os._exit, as kill -9: nothing cleaned up) as `name` is called,
    original, calls = getattr(owner, name), [0]  # or once it has returned `after` times

    def wrapped(*args, **kwargs):
        if not after:
            os._exit(9)
        result = original(*args, **kwargs)
        calls[0] += 1
        if calls[0] == after:
            os._exit(9)
        return result
    setattr(owner, name, wrapped)


owner, name, after = {"flush": (Indexer, "_flush", 0), "chunks": (fragments, "commit_fragments", 1),
                      "commits": (LanceStore, "commit_fragments", 3), "last": (LanceStore, "after_run", 0)}[point]
die_at(owner, name, after)
gathered = RayIndexer._gathered


def logged(self, *args):  # the files the actors encoded in this run
    with open(log, "a") as out:
        for item in gathered(self, *args):
            if getattr(item, "written", None) is not None:
                out.write(item.entry.path + "\\n")
                out.flush()
            yield item


RayIndexer._gathered = logged
ray.init(address=address, logging_level="ERROR", log_to_driver=False)  # its workers take the cluster's environment
settings = load_settings(None, {"index.data_dir": data_dir, "index.engine": "ray", "index.ray_actors": 1,
                                "index.flush_tokens": 256, "index.stream_above_mb": 0.02, "encoder.backend": "tests.fakes:fake_encoder"})
with open_app(settings, "write", Path(root)) as side:
    side.indexer.background_commits = False  # a commit per flush, in turn: the kill points fall where they are named
    side.indexer.run(Path(root))
"""
# Where the driver dies, in turn, each run resuming what the one before left: at its first flush (its actors have
# written fragments, nothing is committed); inside its first commit, the chunk fragments appended and the document rows
# not (the commit point); after its third commit, before that commit's job records (mid-way through several: some files
# committed, the fragments of later ones written and not; the run first collected the chunk rows the kill before left);
# after its last commit (before the finishing collection, optimize and vector index save). (A kill right after the
# first commit left the state the one after the third leaves, with fewer files committed.)
KILL_POINTS = ["flush", "chunks", "commits", "last"]


def test_a_driver_killed_at_each_point_converges_on_a_rerun(cluster: Path, tmp_path: Path) -> None:
    # The driver's actor needs a CPU the tests before may still hold (their actors are let go asynchronously).
    wait_until(
        lambda: ray.available_resources().get("CPU", 0) >= ray.cluster_resources().get("CPU", 0),
        Wake(),
        120,
        "the cluster's CPUs released by the tests before",
        ray.available_resources,
    )
    root = _folder(tmp_path / "docs")
    on_ray = _settings(tmp_path, "ray", "ray")
    on_ray.index.flush_tokens = 256  # as the driver's: a commit every file or so
    committed = []
    for point in KILL_POINTS:
        before = _committed(on_ray)
        log = tmp_path / f"encoded-{point}.log"
        driver = subprocess.run(
            [sys.executable, "-c", _DRIVER, ray.get_runtime_context().gcs_address, on_ray.index.data_dir, str(root), point, str(log)],
            env={**os.environ, "PYTHONPATH": str(REPO), "HOME": str(cluster.parent)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=300,
        )
        assert driver.returncode == 9, f"{point}: the driver was not killed there: {driver.stderr.decode()[-2000:]}"
        encoded = set(log.read_text().split()) if log.exists() else set()
        assert encoded and not encoded & before, f"{point}: no file encoded, or a committed one encoded again"
        committed.append(len(_committed(on_ray)))
    assert committed[0] == committed[1] == 0 and 0 < committed[2] < committed[3] == 11, committed
    summary, ray_index = _index(on_ray, root)
    assert (summary.unchanged, summary.added, summary.failed) == (11, 0, 1)
    _, local_index = _index(_settings(tmp_path, "local", "local"), root)
    _assert_same(ray_index, local_index, atol=1e-6)
    chunks = str(Path(on_ray.index.data_dir) / "lance" / "chunks.lance")
    referenced = {
        f.path
        for v in lance.dataset(chunks).versions()
        for fragment in lance.dataset(chunks, version=v["version"]).get_fragments()
        for f in fragment.metadata.files
    }
    assert {p.name for p in (Path(chunks) / "data").iterdir()} == referenced, "fragments of the killed runs are left"


def _committed(settings: Settings) -> set[str]:
    """The paths of the documents committed so far in the settings' index (none before there is one)."""
    try:
        return set(open_reader(settings, FakeEncoder.dim).document_records())
    except (LodexError, OSError, ValueError):
        return set()


@pytest.mark.slow
def test_real_model_on_ray_gives_the_local_index(cluster: Path, tmp_path: Path, real_encoder: Any) -> None:
    root = _folder(tmp_path / "docs", large_parts=60)  # half the large file (about 25 KB), encoded twice
    local, on_ray = _settings(tmp_path, "local", "local", backend="transformers"), _settings(tmp_path, "ray", "ray", backend="transformers")
    for settings in (local, on_ray):
        settings.index.flush_tokens = 1024  # the large file still streamed in several parts (of 2,048 tokens)
    _, local_index = _index(local, root, real_encoder)  # the run's model (as the settings build it: exact, the run's cache)
    on_ray.index.ray_actors = 1  # one model load in an actor (the tests above run two actors)
    _, ray_index = _index(on_ray, root)
    _assert_same(ray_index, local_index)
    whole = [doc_id for doc_id in ray_index["documents"] if _not_the_mean(ray_index, doc_id)]
    assert whole, "no short document got its whole text's vector (chunking.document_vector)"  # the actors encoded them


def _not_the_mean(index: dict[str, Any], doc_id: str) -> bool:
    vectors = np.asarray([row["vector"] for (owner, _), row in index["chunks"].items() if owner == doc_id], np.float32)
    mean = vectors.mean(axis=0)
    return not np.allclose(index["documents"][doc_id]["vector"], mean / np.linalg.norm(mean), atol=1e-4)


def test_without_ray_the_fix_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lodex.indexer.ray_engine import import_ray

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ConfigError) as raised:
        import_ray()
    assert raised.value.one_line().endswith("— pip install lodex[cluster]") and "\n" not in raised.value.one_line()
