"""`lodex index --ray` on a local Ray cluster (2 CPUs, one session for the module): the index it builds and updates is the
local path's (documents, chunks by (document, ordinal), texts, offsets, vectors), an actor killed mid-run included."""

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from lodex.api.factory import open_reader
from lodex.api.write_side import WriteSide
from lodex.api.settings import Settings
from lodex.indexer.pipeline import RunSummary
from lodex.store.errors import ConfigError, LodexError
from tests.fakes import GATE_ENV, EncodeGate, FakeEncoder
from tests.invariants import check_index
from tests.waiting import Wake, wait_until

ray = pytest.importorskip("ray", reason="Ray Data is in the cluster extra")
REPO = Path(__file__).resolve().parents[1]
CHUNK_COLUMNS = ["document_id", "ordinal", "text", "char_start", "char_end", "token_count", "page", "page_end", "section", "vector"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local Ray cluster with 2 CPUs whose workers import tests.fakes; yields the die-once marker of DyingEncoder."""
    marker = tmp_path_factory.mktemp("ray") / "died"
    with pytest.MonkeyPatch.context() as patch:  # Ray keeps its cluster's auth token in ~/.ray: not the user's home
        patch.setenv("HOME", str(marker.parent))
        ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": str(REPO), "LODEX_TEST_DIE_ONCE": str(marker), "HF_HUB_OFFLINE": "1"}})
    yield marker
    ray.shutdown()


def _folder(root: Path) -> Path:
    """Markdown, plain text and HTML files, two with one content, a large file (streamed in parts), a bad file."""
    root.mkdir()
    words = "lift drag wing boundary layer heat transfer shock wave pressure nozzle flow turbulence".split()
    for i in range(9):
        text = "\n\n".join(" ".join(words[(i * 7 + j * 3 + k) % len(words)] for k in range(40 + i)) + "." for j in range(5 + i))
        (root / ("sub" if i % 3 == 0 else "")).mkdir(exist_ok=True)
        (root / ("sub" if i % 3 == 0 else "") / f"doc{i}.{['md', 'txt', 'html'][i % 3]}").write_text(
            f"<html><body><h1>Doc {i}</h1><p>{text}</p></body></html>" if i % 3 == 2 else f"# Doc {i}\n\n{text}\n")
    (root / "copy.md").write_text((root / "sub" / "doc0.md").read_text())
    (root / "large.txt").write_text("\n\n".join(f"Part {j}: " + " ".join(words[(j + k) % len(words)] for k in range(60)) for j in range(120)))
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


def _index(settings: Settings, root: Path) -> tuple[RunSummary, dict[str, Any]]:
    with WriteSide(settings, root) as side:
        summary = side.indexer.run(root)
        check_index(side.store)  # (the folder holds a bad file too: the identity with the local index says the rest)
        return summary, _contents(side.store)


def _contents(store: Any) -> dict[str, Any]:
    """Documents by id and chunks by (document id, ordinal): every column but the random chunk ids and the times."""
    docs = store.scan_documents(["id", "path", "content_hash", "size", "format", "title", "chunk_count", "token_count", "vector"])
    chunks = store.chunks.search().select(CHUNK_COLUMNS).limit(None).to_arrow().to_pylist()
    return {"documents": {row.pop("id"): row for row in docs.to_pylist()},
            "chunks": {(row.pop("document_id"), row.pop("ordinal")): row for row in chunks}}


def _assert_same(ray_index: dict[str, Any], local: dict[str, Any], atol: float = 1e-5) -> None:
    for kind in ("documents", "chunks"):
        assert ray_index[kind].keys() == local[kind].keys(), kind
        for key, row in local[kind].items():
            other = dict(ray_index[kind][key])
            np.testing.assert_allclose(other.pop("vector"), row["vector"], atol=atol, err_msg=f"{kind} {key}")
            assert other == {k: v for k, v in row.items() if k != "vector"}, f"{kind} {key}"


def _counts(summary: RunSummary) -> dict[str, Any]:
    return {k: v for k, v in summary.to_dict().items() if k not in ("seconds", "phases")}  # times differ


def test_ray_index_is_the_local_index_and_updates_alike(cluster: Path, tmp_path: Path) -> None:
    root = _folder(tmp_path / "docs")
    local, on_ray = _settings(tmp_path, "local", "local"), _settings(tmp_path, "ray", "ray")
    (local_summary, local_index), (ray_summary, ray_index) = _index(local, root), _index(on_ray, root)
    assert _counts(ray_summary) == _counts(local_summary)
    assert ray_summary.added == 11 and ray_summary.failed == 1 and len(ray_index["chunks"]) > 40
    _assert_same(ray_index, local_index)

    (root / "doc1.txt").write_text((root / "doc1.txt").read_text() + "\n\nA new closing paragraph about nozzles.\n")  # edited
    (root / "sub" / "doc3.md").unlink()  # deleted
    (root / "new.md").write_text("# New\n\nA new file about shock waves and pressure.\n")  # added
    (root / "moved.md").write_text((root / "doc4.txt").read_text())  # a copy under another format: encoded
    (root / "copy2.md").write_text((root / "sub" / "doc0.md").read_text())  # a copy: its vectors re-used
    os.utime(root / "doc5.html", (1_000_000, 1_000_000))  # touched: same content
    (local_summary, local_index), (ray_summary, ray_index) = _index(local, root), _index(on_ray, root)
    assert _counts(ray_summary) == _counts(local_summary)
    assert (ray_summary.added, ray_summary.updated, ray_summary.reused, ray_summary.deleted, ray_summary.unchanged) == (2, 1, 1, 1, 9)
    _assert_same(ray_index, local_index)


def test_an_actor_killed_mid_run_still_gives_the_local_index(cluster: Path, tmp_path: Path) -> None:
    root = _folder(tmp_path / "docs")
    _, local_index = _index(_settings(tmp_path, "local", "local"), root)
    ray_summary, ray_index = _index(_settings(tmp_path, "ray", "ray", backend="tests.fakes:dying_encoder"), root)
    assert cluster.exists(), "no actor was killed"
    assert ray_summary.failed == 1 and not ray_summary.interrupted
    _assert_same(ray_index, local_index)


def test_cli_index_ray_on_a_running_cluster(cluster: Path, tmp_path: Path, cli_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lodex.api.cli import app

    root = _folder(tmp_path / "docs")
    monkeypatch.setenv("LODEX_ENCODER__BACKEND", "tests.fakes:fake_encoder")
    result = CliRunner().invoke(app, ["index", str(root), "--ray", "--ray-actors", "1", "--json"])
    assert result.exit_code == 0, result.output
    assert '"added": 11' in result.stdout and '"failed": 1' in result.stdout


_DRIVER = """
import sys, ray
from pathlib import Path
from lodex.api.factory import open_reader
from lodex.api.write_side import WriteSide
from lodex.api.settings import load_settings
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": sys.argv[4]}})
settings = load_settings(None, {"index.data_dir": sys.argv[2], "index.engine": "ray", "index.ray_actors": 1,
                                "index.flush_tokens": 256, "index.stream_above_mb": 0.02, "encoder.backend": "tests.fakes:fake_encoder",
                                "encoder.model": "gate:" + sys.argv[5]})
with WriteSide(settings, Path(sys.argv[3])) as side:
    side.indexer.run(Path(sys.argv[3]))
"""


def test_a_driver_killed_mid_run_resumes_like_a_local_run(cluster: Path, tmp_path: Path) -> None:
    # The driver's actor needs a CPU the tests before may still hold (their actors are let go asynchronously).
    wait_until(lambda: ray.available_resources().get("CPU", 0) >= ray.cluster_resources().get("CPU", 0), Wake(), 120,
               "the cluster's CPUs released by the tests before", ray.available_resources)
    root = _folder(tmp_path / "docs")
    for attempt in range(ATTEMPTS):
        on_ray = _settings(tmp_path, f"ray{attempt}", "ray")
        on_ray.index.flush_tokens = 256  # as the driver below: a commit every file or so
        if _kill_the_driver_mid_run(on_ray, root, tmp_path / f"gate{attempt}", cluster.parent):
            break
    else:  # each run was complete and correct, but the test could not stop one mid-way: what it tests did not happen
        pytest.skip(f"{ATTEMPTS} times the driver finished without its actor asking the test's gate (driver.err in {tmp_path})")
    before = _committed(on_ray)
    assert 3 <= before < 11, "killed too late to test a resume"
    summary, ray_index = _index(on_ray, root)
    assert summary.unchanged == before and summary.added + summary.reused == 11 - before and summary.failed == 1
    _, local_index = _index(_settings(tmp_path, "local", "local"), root)
    _assert_same(ray_index, local_index)


ATTEMPTS = 4  # runs of the driver tried before the test gives up on stopping one mid-way (a skip, not a pass)


def _kill_the_driver_mid_run(on_ray: Settings, root: Path, gate_dir: Path, home: Path) -> bool:
    """Run a driver indexing `root` on the cluster, its actor's batches let through one at a time, and SIGKILL it after
    three commits, while its actor holds the next batch: True. False when the driver finished the whole run without its
    actor ever asking the gate (seen in about one run of this module in eight, whether the gate's folder came by an
    environment variable or by the settings; its cause is not found; the run itself was complete and correct): there
    was nothing to kill mid-way. Its stderr is then kept in `gate_dir`/driver.err."""
    address = ray.get_runtime_context().gcs_address
    gate = EncodeGate(gate_dir)  # the actor's batches go on only as the test lets them
    driver = subprocess.Popen([sys.executable, "-c", _DRIVER, address, on_ray.index.data_dir, str(root), str(REPO), gate.env[GATE_ENV]],
                              env={**os.environ, "PYTHONPATH": str(REPO), "HOME": str(home)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        while _committed(on_ray) < 3:  # a batch at a time until three commits; the batch asked for next is held
            if not any(gate.next_ask(5) for _ in range(36) if driver.poll() is None):  # 180 s, less once it has ended
                if driver.poll() == 0 and _committed(on_ray) == 11:
                    (gate_dir / "driver.err").write_bytes(driver.stderr.read() if driver.stderr else b"")
                    return False
                raise AssertionError(f"the driver's actor asked for no batch: {driver.stderr.read().decode()[-2000:] if driver.stderr else ''}")
            if _committed(on_ray) < 3:
                gate.grant()
        assert driver.poll() is None, f"the driver ended before it was killed: {driver.stderr.read().decode()[-2000:] if driver.stderr else ''}"
        driver.send_signal(signal.SIGKILL)  # mid-run: its actor holds a batch
        return True
    finally:
        driver.wait(30)
        gate.close()  # an actor left holding a batch lets it go


def _committed(settings: Settings) -> int:
    """Documents committed so far in the settings' index (0 before there is one)."""
    try:
        return open_reader(settings, FakeEncoder.dim).counts()["documents"]
    except (LodexError, OSError, ValueError):
        return 0


@pytest.mark.slow
def test_real_model_on_ray_gives_the_local_index(cluster: Path, tmp_path: Path) -> None:
    root = _folder(tmp_path / "docs")
    _, local_index = _index(_settings(tmp_path, "local", "local", backend="transformers"), root)
    on_ray = _settings(tmp_path, "ray", "ray", backend="transformers")
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
