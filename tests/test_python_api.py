"""The typed Python API: `lodex.open` answers as `lodex search --json` does, and `lodex.Client` against a real
`lodex serve` answers with equal objects; `import lodex` stays light."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import lodex
from lodex.api.cli import app
from tests.test_serve import REPO, Server

runner = CliRunner()
QUERIES = ["swept wings lift", "heat transfer boundary layer", "terns migrate", "note 7 topic7", "drag rise transonic"]


def _folder(root: Path) -> Path:
    root.mkdir()
    (root / "wings.md").write_text("# Wings\n\nLift and drag of swept wings at transonic speed.\n\n## Drag\n\n" + "The drag rise. " * 40)
    (root / "heat.txt").write_text("Heat transfer through a hypersonic boundary layer. " * 20)
    (root / "terns.txt").write_text("Arctic terns migrate from the Arctic to the Antarctic and back every year.\n")
    for i in range(12):
        (root / f"note{i}.txt").write_text(f"note {i} about wings and lift topic{i} " * 4)
    return root


def _without_time(response: lodex.SearchResponse) -> dict:
    body = json.loads(json.dumps(response.to_dict()))  # as JSON carries it (highlights: lists, not tuples)
    body.pop("took_ms")
    return body


@pytest.fixture
def indexed(cli_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LODEX_ENCODER__BACKEND", "tests.fakes:fake_encoder")
    root = _folder(cli_home / "docs")
    assert runner.invoke(app, ["index", str(root)]).exit_code == 0
    return cli_home / ".lodex"


def test_open_searches_as_the_cli_json_does(indexed: Path) -> None:
    with lodex.open(indexed, encoder__backend="tests.fakes:fake_encoder") as index:
        for query in QUERIES:
            for mode in ("dense", "hybrid", "bm25"):
                cli = runner.invoke(app, ["search", query, "-k", "5", "--mode", mode, "--json", "--local"])
                assert cli.exit_code == 0, cli.output
                expected = json.loads(cli.stdout)
                expected.pop("took_ms")
                assert _without_time(index.search(query, 5, mode=mode)) == expected  # type: ignore[arg-type]
        hit = index.search("swept wings lift", 3).results[0]
        assert isinstance(hit, lodex.DocumentHit) and isinstance(hit.passages[0], lodex.Passage)
        only = index.search("wings", 10, path_glob="note*", ext=["txt"])
        assert only.results and all(r.path.startswith("note") for r in only.results)
        page = index.documents(0, 5)
        assert isinstance(page, lodex.DocumentPage) and page.total == 15 and [d.path for d in page.documents][:2] == ["heat.txt", "note0.txt"]
        assert index.documents(0, 50, ext=["md"]).total == 1
        passage = hit.passages[0]
        window = index.read(hit.doc_id, passage.char_start, passage.char_end)
        assert isinstance(window, lodex.TextWindow) and window.text == passage.text[: len(window.text)]
        wider = index.read(hit.doc_id, max(0, passage.char_start - 50), passage.char_end + 50)
        assert passage.text in wider.text or wider.start == 0
        status = index.status()
        assert (status.documents, status.model, status.failed) == (15, "fake-bag-of-words", 0)
        with pytest.raises(lodex.LodexError, match="no document"):
            index.read("0" * 16)


def test_client_against_a_real_server_gives_equal_objects(indexed: Path, cli_home: Path) -> None:
    server = Server(cli_home / "docs", indexed, "--no-watch", env={"LODEX_ENCODER__BACKEND": "tests.fakes:fake_encoder"})
    try:
        server.wait_ready(120)
        with lodex.Client(server.url) as client, lodex.open(indexed, encoder__backend="tests.fakes:fake_encoder") as index:
            for query in QUERIES:
                remote, here = client.search(query, 4, mode="hybrid"), index.search(query, 4, mode="hybrid")
                assert isinstance(remote, lodex.SearchResponse) and _without_time(remote) == _without_time(here)
            assert client.search("wings", 10, path_glob="note*").results == index.search("wings", 10, path_glob="note*").results
            assert client.documents(5, 7) == index.documents(5, 7)
            assert client.documents(0, 50, path_glob="note1*", ext=["txt"]) == index.documents(0, 50, path_glob="note1*", ext=["txt"])
            doc = index.documents(0, 1).documents[0]
            assert client.document(doc.id) == index.document(doc.id)
            assert client.read(doc.id, 10, 60) == index.read(doc.id, 10, 60)
            assert client.status().model_dump(exclude={"data_dir"}) == index.status().model_dump(exclude={"data_dir"})
            with pytest.raises(lodex.RemoteError, match="no document") as caught:
                client.read("0" * 16)
            assert caught.value.status == 404
            pushed = client.push("memo.md", "Albatross gliding flight over the southern ocean. " * 5, title="Memo")
            assert (pushed.path, pushed.status) == ("@api/memo.md", "indexed") and client.document(pushed.id).title == "Memo"
            with pytest.raises(lodex.RemoteError, match="watched folder") as refused:
                client.delete(doc.id)
            assert (refused.value.status, refused.value.code) == (409, "conflict")
            assert client.delete(pushed.id).deleted == pushed.id and client.reindex().unchanged == 15
            with pytest.raises(lodex.LodexError, match="open for reading"):
                index.push("memo.md", "text")
    finally:
        server.stop()


def test_import_lodex_is_light() -> None:
    code = "import sys, lodex; assert lodex.__version__; print(sorted(m for m in ('torch', 'httpx', 'lancedb', 'fastapi') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr
