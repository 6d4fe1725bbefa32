"""An index on S3-compatible object storage (a moto server on loopback, started and stopped here): index, search,
incremental update and rebuild through the real CLI; one writer per index; a read-only replica in another process
answers from the latest committed version and refuses writes with 409."""

import json
import logging
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lodex.api.cli import app
from lodex.store.errors import StoreError
from lodex.store.object_store import ObjectStore, is_remote
from lodex.store.write_lock import WriteLock
from tests.test_serve import REPO, free_port
from tests.waiting import wait_until

runner = CliRunner()
BACKEND = "tests.fakes:fake_encoder"  # the same deterministic fake in this process and in a server subprocess


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    """A moto S3 server on a free loopback port, for this module's tests."""
    server_module = pytest.importorskip("moto.server", reason="moto[server] is in the test extra")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3(moto_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> str:
    """A fresh bucket on the moto server, the environment pointing lodex at it; returns the index's URI."""
    import pyarrow.fs as pafs

    monkeypatch.chdir(tmp_path)
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "LODEX_STORAGE__ENDPOINT": moto_endpoint,
        "LODEX_STORAGE__ALLOW_HTTP": "true",
        "LODEX_ENCODER__BACKEND": BACKEND,
        "LODEX_STORAGE__CACHE_DIR": str(tmp_path / "cache"),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    bucket = f"b{abs(hash(request.node.name)) % 10**9}"
    pafs.S3FileSystem(
        endpoint_override=moto_endpoint.removeprefix("http://"), scheme="http", region="us-east-1", allow_bucket_creation=True
    ).create_dir(bucket)
    return f"s3://{bucket}/team/index"


def _json(result: Any) -> dict[str, Any]:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def _folder(root: Path) -> Path:
    root.mkdir()
    (root / "wings.md").write_text("# Wings\n\nSwept wings delay the drag rise at transonic Mach numbers.\n")
    (root / "terns.txt").write_text("Arctic terns migrate from the Arctic to the Antarctic every year.\n")
    return root


def test_uri_detection() -> None:
    assert is_remote("s3://bucket/prefix") and is_remote("gs://b/p") and is_remote("az://c/p") and is_remote("s3+ddb://b/p")
    assert not is_remote("/data/index") and not is_remote("relative/s3://x") and not is_remote("http://host/x")
    with pytest.raises(StoreError, match="names no bucket"):
        ObjectStore("s3:///prefix")


def test_index_search_update_and_rebuild_on_s3(s3: str, tmp_path: Path) -> None:
    folder = _folder(tmp_path / "docs")
    first = _json(runner.invoke(app, ["index", str(folder), "--data-dir", s3, "--json"]))
    assert first["added"] == 2
    stored = ObjectStore(s3, {"aws_endpoint": os.environ["LODEX_STORAGE__ENDPOINT"], "allow_http": "true"})
    entries = stored.entries()
    assert {"origin.json", "jobs.sqlite", "lance"} <= set(entries) and any(e.endswith(".faiss") for e in entries), entries
    assert "writer.lease" not in entries  # released at the end of the run
    hit = _json(runner.invoke(app, ["search", "terns migrate", "-k", "1", "--data-dir", s3, "--json"]))
    assert hit["results"][0]["path"] == "terns.txt"

    (folder / "terns.txt").write_text("Penguins cannot fly but swim fast in cold water.\n")
    again = _json(runner.invoke(app, ["index", str(folder), "--data-dir", s3, "--json"]))
    assert again["updated"] == 1 and again["unchanged"] == 1  # incremental by content, on object storage too
    hit = _json(runner.invoke(app, ["search", "penguins swim", "-k", "1", "--data-dir", s3, "--json"]))
    assert hit["results"][0]["path"] == "terns.txt" and "Penguins" in hit["results"][0]["passages"][0]["text"]
    status = _json(runner.invoke(app, ["status", "--data-dir", s3, "--json"]))
    assert status["documents"] == 2 and status["data_dir"] == s3 and status["root"] == str(folder)

    local = _json(runner.invoke(app, ["index", str(folder), "--data-dir", str(tmp_path / "local"), "--json"]))
    assert local["added"] == 2
    here = _json(runner.invoke(app, ["search", "penguins swim", "-k", "2", "--data-dir", str(tmp_path / "local"), "--json"]))
    there = _json(runner.invoke(app, ["search", "penguins swim", "-k", "2", "--data-dir", s3, "--json"]))
    assert [(r["path"], round(r["score"], 5)) for r in here["results"]] == [(r["path"], round(r["score"], 5)) for r in there["results"]]

    rebuilt = _json(runner.invoke(app, ["index", str(folder), "--rebuild", "--data-dir", s3, "--json"]))
    assert rebuilt["added"] == 2


def test_a_fresh_cache_on_another_host_continues_the_index(s3: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _folder(tmp_path / "docs")
    _json(runner.invoke(app, ["index", str(folder), "--data-dir", s3, "--json"]))
    monkeypatch.setenv("LODEX_STORAGE__CACHE_DIR", str(tmp_path / "other-host"))
    again = _json(runner.invoke(app, ["index", str(folder), "--data-dir", s3, "--json"]))
    assert again["added"] == again["updated"] == 0 and again["unchanged"] == 2  # the job log and the tables came from the store
    assert runner.invoke(app, ["index", str(tmp_path), "--data-dir", s3]).exit_code == 2  # still mirrors docs/


def test_one_writer_per_index_on_object_storage(s3: str, tmp_path: Path) -> None:
    def store() -> ObjectStore:
        return ObjectStore(s3, {"aws_endpoint": os.environ["LODEX_STORAGE__ENDPOINT"], "allow_http": "true"})

    first = WriteLock(tmp_path / "host-a", store()).acquire()
    try:
        with pytest.raises(StoreError, match="another lodex process .* is writing to the index in s3://"):
            WriteLock(tmp_path / "host-b", store()).acquire()
        folder = _folder(tmp_path / "docs")
        refused = runner.invoke(app, ["index", str(folder), "--data-dir", s3])
        assert refused.exit_code == 2 and "is writing to the index" in refused.output and "Traceback" not in refused.output
    finally:
        first.release()
    WriteLock(tmp_path / "host-b", store()).acquire().release()  # free again once released


def test_unreachable_store_is_one_clear_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name, value in {
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_REGION": "us-east-1",
        "LODEX_STORAGE__ENDPOINT": f"http://127.0.0.1:{free_port()}",
        "LODEX_STORAGE__ALLOW_HTTP": "true",
        "LODEX_ENCODER__BACKEND": BACKEND,
        "AWS_MAX_ATTEMPTS": "1",
    }.items():
        monkeypatch.setenv(name, value)
    result = runner.invoke(app, ["status", "--data-dir", "s3://nowhere/index"])
    assert result.exit_code == 2 and "storage.endpoint" in result.output and "Traceback" not in result.output


def _call(method: str, url: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_read_only_replica_follows_new_versions_and_refuses_writes(s3: str, tmp_path: Path) -> None:
    folder = _folder(tmp_path / "docs")
    _json(runner.invoke(app, ["index", str(folder), "--data-dir", s3, "--json"]))
    port = free_port()
    env = {**os.environ, "LODEX_STORAGE__CACHE_DIR": str(tmp_path / "replica-cache"), "LODEX_SERVE__REFRESH_S": "0.5"}
    log = (tmp_path / "replica.log").open("w+")
    replica = subprocess.Popen(
        [sys.executable, "-m", "lodex.api.cli", "serve", "--read-only", "--data-dir", s3, "--port", str(port)],
        env=env,
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:

        def ready() -> bool:
            assert replica.poll() is None, (tmp_path / "replica.log").read_text()
            try:
                return _call("GET", url + "/ready")[0] == 200
            except OSError:
                return False

        wait_until(ready, [tmp_path], 120, "the replica to be ready", detail=(tmp_path / "replica.log").read_text)
        status, body = _call("GET", url + "/search?q=terns%20migrate&k=1")
        assert status == 200 and body["results"][0]["path"] == "terns.txt"

        (folder / "kites.txt").write_text("Kites fly on steady coastal winds above the dunes.\n")
        assert _json(runner.invoke(app, ["index", str(folder), "--data-dir", s3, "--json"]))["added"] == 1  # the writer
        wait_until(
            lambda: _call("GET", url + "/search?q=kites%20coastal%20winds&k=1")[1]["results"][0]["path"] == "kites.txt",
            [tmp_path],
            30,
            "the replica to see the new version",
        )  # its cache of the new version
        assert _call("GET", url + "/stats")[1]["documents"] == 3

        for method, target, payload in (
            ("POST", "/documents", {"name": "n.txt", "text": "hello"}),
            ("DELETE", "/documents/0123abcd", None),
            ("POST", "/reindex", None),
        ):
            status, body = _call(method, url + target, payload)
            assert status == 409 and body["error"]["code"] == "read_only" and "read-only replica" in body["error"]["message"], (target, body)
    finally:
        replica.terminate()
        replica.wait(timeout=60)
        log.close()


def test_concurrent_commits_on_s3_lose_nothing(s3: str) -> None:
    """What the writer lease leans on: Lance commits on S3 with conditional puts (If-None-Match), so commits racing
    from two connections are both kept (the later one retries on the next version), never overwritten."""
    import threading

    import lancedb
    import pyarrow as pa

    options = {"aws_endpoint": os.environ["LODEX_STORAGE__ENDPOINT"], "allow_http": "true"}
    lancedb.connect(f"{s3}/lance", storage_options=options).create_table("t", schema=pa.schema([("n", pa.int64())]))

    def append(first: int) -> None:
        table = lancedb.connect(f"{s3}/lance", storage_options=options).open_table("t")
        for n in range(first, first + 8):
            table.add(pa.table({"n": [n]}))

    threads = [threading.Thread(target=append, args=(first,)) for first in (0, 100)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    table = lancedb.connect(f"{s3}/lance", storage_options=options).open_table("t")
    assert sorted(table.to_arrow()["n"].to_pylist()) == [*range(8), *range(100, 108)]


def test_the_local_path_imports_nothing_of_the_cluster_extras(tmp_path: Path) -> None:
    """Indexing a folder locally imports none of boto3, moto, Ray or Flask (pyarrow's S3 module comes with lancedb itself)."""
    folder = _folder(tmp_path / "docs")
    code = (
        "import sys; from typer.testing import CliRunner; from lodex.api.cli import app; "
        f"r = CliRunner().invoke(app, ['index', {str(folder)!r}, '--data-dir', {str(tmp_path / 'data')!r}]); assert r.exit_code == 0, r.output; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore', 'moto', 'ray', 'flask')))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "LODEX_"))} | {"LODEX_ENCODER__BACKEND": BACKEND}
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_a_commit_store_uri_keeps_its_query_after_the_tables_folder(tmp_path: Path) -> None:
    store = ObjectStore("s3+ddb://bucket/team/index?ddbTableName=lodex-commits")
    assert store.lance_uri == "s3+ddb://bucket/team/index/lance?ddbTableName=lodex-commits" and store.base == "bucket/team/index"


def test_settings_of_an_index_on_object_storage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lodex.api.settings import load_settings

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    settings = load_settings(None, {"index.data_dir": "s3://bucket/team/index/", "storage.region": "eu-west-1", "storage.allow_http": True})
    assert settings.remote_uri == "s3://bucket/team/index" and str(settings.location) == "s3://bucket/team/index"
    assert settings.data_dir == (tmp_path / "xdg" / "lodex" / "indexes" / "s3" / "bucket" / "team" / "index").resolve()
    assert settings.storage_options() == {"aws_region": "eu-west-1", "allow_http": "true"}
    local = load_settings(None, {"index.data_dir": "idx"})
    assert local.remote_uri is None and local.data_dir == (tmp_path / "idx").resolve()


def test_a_writing_server_on_s3_sees_its_own_pushes_at_once(s3: str, tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from lodex.api.factory import open_app
    from lodex.api.http.app import create_app
    from lodex.api.settings import load_settings

    folder = _folder(tmp_path / "docs")
    settings = load_settings(None, {"index.data_dir": s3, "serve.refresh_s": 600.0})  # another host's commits: 10 min late
    service = open_app(settings, "serve", folder, watch=False).start()
    try:
        assert service.served.writer is not None
        service.served.writer.reconcile().result(timeout=60)
        with TestClient(create_app(service), base_url="http://127.0.0.1:8765") as client:
            assert client.get("/search", params={"q": "kites coastal winds", "k": 1}).json()["results"][0]["path"] != "@api/kites.txt"
            assert client.post("/documents?wait=true", json={"name": "kites.txt", "text": "Kites ride coastal winds."}).status_code == 201
            hits = client.get("/search", params={"q": "kites coastal winds", "k": 1}).json()["results"]
            assert hits[0]["path"] == "@api/kites.txt"  # this process's own commit: no wait for serve.refresh_s
    finally:
        service.close()


def test_chunk_fragments_written_elsewhere_commit_on_s3(s3: str, tmp_path: Path) -> None:
    """index.ray_writes "fragments" on object storage: a worker writes chunk fragments with the store's own options (the
    target travels pickled), the writer commits them with their documents, and a fragment never committed is swept."""
    import pickle

    from lodex.api.factory import open_app
    from lodex.api.settings import load_settings
    from lodex.store.fragments import write_chunk_fragments
    from tests.test_fragments import _document

    (tmp_path / "docs").mkdir()
    with open_app(load_settings(None, {"index.data_dir": s3}), "write", tmp_path / "docs") as side:
        store = side.store
        target = pickle.loads(pickle.dumps(store.fragment_target()))
        assert target.uri.startswith("s3://") and target.options
        (rows_a, doc_a), (rows_b, _) = _document(1, 3), _document(2, 2)
        store.commit_fragments(write_chunk_fragments(target, rows_a), [doc_a["id"]], [doc_a], [])
        write_chunk_fragments(target, rows_b)  # a run that died before its commit
        assert store.sweep_fragments() == 1
        assert store.counts() == {"documents": 1, "chunks": 3}
        assert sorted(store.vector_index().ids().tolist()) == rows_a["id"].to_pylist()
