"""`lodex mcp` over stdio and /mcp on `lodex serve` over streamable HTTP, driven by the official SDK's clients:
search answers as GET /search does, read widens a passage (by offsets and by PDF page), list_documents pages with a
cursor, a bad argument is a tool error on a session that goes on; /mcp has the JSON API's key and Host checks."""

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from typer.testing import CliRunner

from lodex.api.cli import app
from tests.test_serve import REPO, Server

pytestmark = pytest.mark.slow  # a `lodex serve` and a `lodex mcp` process over 500 documents (the fake encoder)

KEY = "sesame"
FAKE = {"LODEX_ENCODER__BACKEND": "tests.fakes:fake_encoder"}
QUERIES = [f"note {i} about topic{i}" for i in range(0, 400, 25)] + ["wings and lift", "page 7", "results of the survey", "topic42 wings"]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """500 notes, a 40-page PDF and a Markdown file, indexed, and a `lodex serve` of them with an API key."""
    base = tmp_path_factory.mktemp("mcp")
    root = base / "docs"
    (root / "notes").mkdir(parents=True)
    for i in range(500):
        (root / "notes" / f"{i:03d}.txt").write_text(f"note {i} about wings and lift topic{i}. " * 3)
    shutil.copy(REPO / "tests" / "fixtures" / "pdf" / "forty_pages.pdf", root / "report.pdf")
    (root / "wings.md").write_text("# Wings\n\n## Sweep\n\nSwept wings delay the drag rise at transonic Mach numbers. " * 6)
    data = base / "data"
    old = {name: os.environ.get(name) for name in FAKE}
    os.environ.update(FAKE)
    try:
        assert CliRunner().invoke(app, ["index", str(root), "--data-dir", str(data)]).exit_code == 0
    finally:
        for name, value in old.items():
            os.environ.pop(name) if value is None else os.environ.__setitem__(name, value)
    server = Server(root, data, "--no-watch", env={**FAKE, "LODEX_API__API_KEY": KEY})
    try:
        server.wait_ready(120, path="/health")
        yield server, data
    finally:
        server.stop()


def _data(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    if isinstance(result.structured_content, dict):
        content = result.structured_content
        return content["result"] if set(content) == {"result"} else content
    return json.loads(result.content[0].text)


async def _exercise(session: Any, url: str) -> None:
    await session.initialize()
    tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == {"search", "read", "list_documents", "status"}  # read-only by default
    assert tools["search"].description and "citation" in tools["search"].description
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {KEY}"}) as api:
        for query in QUERIES:
            got = _data(await session.call_tool("search", {"query": query, "k": 5}))
            expected = (await api.get("/search", params={"q": query, "k": 5})).json()
            assert [(r["id"], r["path"], r["score"]) for r in got["results"]] == [(r["doc_id"], r["path"], r["score"]) for r in expected["results"]]
            for hit, want in zip(got["results"], expected["results"]):
                assert [{k: p[k] for k in ("text", "char_start", "char_end", "score", "page", "section")} for p in hit["passages"]] == [
                    {k: p[k] for k in ("text", "char_start", "char_end", "score", "page", "section")} for p in want["passages"]
                ]
    # read: a passage by its citation, then widened, then its PDF page
    hit = _data(await session.call_tool("search", {"query": "page 7", "k": 1, "ext": ["pdf"]}))["results"][0]
    passage = hit["passages"][0]
    assert hit["path"] == "report.pdf" and passage["page"] is not None
    assert passage["citation"] == f"lodex://documents/{hit['id']}#chars={passage['char_start']}-{passage['char_end']}"
    cited = _data(await session.call_tool("read", {"document": passage["citation"]}))
    assert (cited["start"], cited["end"], cited["text"]) == (passage["char_start"], passage["char_end"], passage["text"])
    wider = _data(
        await session.call_tool("read", {"document": hit["id"], "start": max(0, passage["char_start"] - 300), "end": passage["char_end"] + 300})
    )
    assert passage["text"] in wider["text"] and wider["start"] == max(0, passage["char_start"] - 300)
    page = _data(await session.call_tool("read", {"document": hit["id"], "page": passage["page"], "max_chars": 20000}))
    assert page["page"] == passage["page"] and page["start"] <= passage["char_start"] < page["end"]
    short = _data(await session.call_tool("read", {"document": hit["id"], "max_chars": 100}))
    assert len(short["text"]) == 100 and "start=100" in short["more"]
    # list_documents pages through everything with its cursor
    seen, cursor, total = [], None, None
    while True:
        page_of = _data(await session.call_tool("list_documents", {"limit": 120, **({"cursor": cursor} if cursor else {})}))
        seen += [d["path"] for d in page_of["documents"]]
        total, cursor = page_of["total"], page_of["next_cursor"]
        if cursor is None:
            break
    assert total == 502 and len(seen) == 502 and seen == sorted(set(seen))
    assert _data(await session.call_tool("list_documents", {"ext": ["pdf"]}))["total"] == 1
    # bad arguments: tool errors with the fix; the session goes on
    bad = await session.call_tool("search", {"query": "wings", "k": 0})
    assert bad.is_error
    wrong = await session.call_tool("read", {"document": "not-a-document"})
    assert wrong.is_error and "citation" in wrong.content[0].text and "Traceback" not in wrong.content[0].text
    gone = await session.call_tool("read", {"document": "0123456789abcdef"})
    assert gone.is_error and "no document" in gone.content[0].text
    assert _data(await session.call_tool("status", {}))["documents"] == 502
    resource = await session.read_resource(f"lodex://documents/{hit['id']}")
    first = _data(await session.call_tool("read", {"document": hit["id"], "max_chars": 20000}))
    assert resource.contents[0].text == first["text"] and len(first["text"]) > 1000


def test_lodex_mcp_over_stdio(served: Any) -> None:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    server, data = served
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "lodex.api.cli", "mcp", "--data-dir", str(data)],
        cwd=str(REPO),
        env={**FAKE, "HF_HUB_OFFLINE": "1", "HOME": os.environ["HOME"]},
    )

    async def main() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await _exercise(session, server.url)

    anyio.run(main)


def test_mcp_over_streamable_http_on_serve(served: Any) -> None:
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    server, _ = served

    async def main() -> None:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as http,
            streamable_http_client(server.url + "/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await _exercise(session, server.url)

    anyio.run(main)
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    no_key = httpx.post(server.url + "/mcp", json=hello, headers=accept)
    assert no_key.status_code == 401 and no_key.json()["error"]["code"] == "unauthorized"
    foreign = httpx.post(server.url + "/mcp", json=hello, headers={**accept, "Authorization": f"Bearer {KEY}", "Host": "evil.example"})
    assert foreign.status_code == 403 and "Host" in foreign.json()["error"]["message"]


def test_lodex_mcp_with_the_real_model(tmp_path: Path) -> None:
    """End to end with the bundled model: the tool's answer is `lodex.open(...).search`'s, its citation reads back."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    import lodex

    root = tmp_path / "docs"
    root.mkdir()
    for name in ("wind-tunnel-report.pdf", "flow-physics-notes.txt"):
        shutil.copy(REPO / "samples" / name, root / name)
    data = tmp_path / "data"
    assert CliRunner().invoke(app, ["index", str(root), "--data-dir", str(data)]).exit_code == 0
    query = "pressure distribution on a swept wing"
    with lodex.open(data) as index:
        expected = index.search(query, 2)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "lodex.api.cli", "mcp", "--data-dir", str(data)],
        cwd=str(REPO),
        env={"HF_HUB_OFFLINE": "1", "HOME": os.environ["HOME"], "LODEX_ENCODER__CACHE_DIR": os.environ["LODEX_ENCODER__CACHE_DIR"]},
    )  # the run's

    async def main() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            got = _data(await session.call_tool("search", {"query": query, "k": 2}))
            assert [(r["id"], r["score"], [p["text"] for p in r["passages"]]) for r in got["results"]] == [
                (h.doc_id, h.score, [p.text for p in h.passages]) for h in expected.results
            ]
            best = got["results"][0]["passages"][0]
            cited = _data(await session.call_tool("read", {"document": best["citation"]}))
            assert cited["text"] == best["text"] and cited["page"] == best["page"]

    anyio.run(main)


def test_mcp_off_loopback_needs_the_key(served: Any) -> None:
    """A server bound to every address (a read-only replica of the same index, with its key): /mcp without the key
    is 401, with it the session starts."""
    _, data = served
    server = Server(data.parent / "docs", data, "--read-only", "--host", "0.0.0.0", env={**FAKE, "LODEX_API__API_KEY": KEY})
    try:
        server.wait_ready(120, path="/health")
        hello = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}},
        }
        accept = {"Accept": "application/json, text/event-stream"}
        refused = httpx.post(server.url + "/mcp", json=hello, headers=accept)
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
        allowed = httpx.post(server.url + "/mcp", json=hello, headers={**accept, "Authorization": f"Bearer {KEY}"})
        assert allowed.status_code == 200, allowed.text
    finally:
        server.stop()
