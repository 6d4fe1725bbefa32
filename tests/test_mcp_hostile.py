"""Hostile clients of the MCP door, in-process over a real store: sessions opened by the thousand and never closed,
forged and borrowed cursors, reads past a document's end, arguments of the wrong type or size; each is answered in one
plain line with its fix, and the server stays bounded."""

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError, UnexpectedToolError
from mcp.server.streamable_http import StreamableHTTPServerTransport

from lodex.api.application import Application
from lodex.api.http.app import create_app
from lodex.api.mcp.server import add_write_tools, build_mcp
from lodex.api.request import Limits
from tests.test_api import _service

BASE = "http://127.0.0.1:8765"
HELLO = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "flood", "version": "0"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream"}
MAX_SESSIONS = 100  # mcp.max_sessions' default


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Application]:
    svc = _service(tmp_path_factory.mktemp("mcp-hostile"))  # three documents; api.max_document_kb = 4
    try:
        yield svc
    finally:
        svc.close()


@pytest.fixture(scope="module")
def server(service: Application) -> MCPServer:
    mcp = build_mcp(service, Limits.of(service.settings))
    add_write_tools(mcp, service)
    return mcp


def _call(server: MCPServer, tool: str, arguments: dict[str, Any]) -> Any:
    return anyio.run(server.call_tool, tool, arguments).structured_content


def _refused(server: MCPServer, tool: str, arguments: dict[str, Any]) -> str:
    """The one line a refused call answers (an anticipated tool error, not a crash)."""
    with pytest.raises(ToolError) as refused:
        anyio.run(server.call_tool, tool, arguments)
    assert not isinstance(refused.value, UnexpectedToolError), (arguments, refused.value.__cause__)
    message = str(refused.value)
    assert "\n" not in message and "pydantic" not in message and "Traceback" not in message, message
    return message


def _session_manager(client: TestClient) -> Any:
    return next(r.endpoint.session_manager for r in client.app.router.routes if getattr(r, "path", "") == "/mcp")  # type: ignore[attr-defined]


@pytest.mark.slow  # 2,000 sessions opened
def test_thousands_of_sessions_stay_bounded(service: Application) -> None:
    """A client that opens 2,000 sessions and closes none: at most mcp.max_sessions are kept (the idlest closed,
    answering 404 after), each new one still opens, and the closed ones are freed (memory stops growing)."""
    with TestClient(create_app(service), base_url=BASE) as client:
        sessions, most = [], 0
        manager = _session_manager(client)
        for _ in range(2000):
            opened = client.post("/mcp", json=HELLO, headers=ACCEPT)
            assert opened.status_code == 200, opened.text
            sessions.append(opened.headers["mcp-session-id"])
            most = max(most, len(manager._server_instances))
        assert most <= MAX_SESSIONS, f"{most} sessions open at once"
        assert service.settings.mcp.max_sessions == MAX_SESSIONS
        gc.collect()
        alive = sum(isinstance(o, StreamableHTTPServerTransport) and not o.is_terminated for o in gc.get_objects())
        assert alive <= MAX_SESSIONS, f"{alive} session transports still alive"
        ask = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        newest = client.post("/mcp", json=ask, headers={**ACCEPT, "mcp-session-id": sessions[-1], "mcp-protocol-version": "2025-06-18"})
        assert newest.status_code == 200 and "list_documents" in newest.text
        oldest = client.post("/mcp", json=ask, headers={**ACCEPT, "mcp-session-id": sessions[0], "mcp-protocol-version": "2025-06-18"})
        assert oldest.status_code == 404  # closed to make room: its client initializes a new one


def test_cursors_are_bound_to_their_listing_and_unforgeable(server: MCPServer, service: Application) -> None:
    seen, cursor = [], None
    while True:
        page = _call(server, "list_documents", {"limit": 1, **({"cursor": cursor} if cursor else {})})
        seen += [d["path"] for d in page["documents"]]
        if (cursor := page["next_cursor"]) is None:
            break
        assert _call(server, "list_documents", {"limit": 1, "cursor": cursor}) == _call(server, "list_documents", {"limit": 1, "cursor": cursor})
    assert seen == sorted(seen) and len(seen) == page["total"] == 3
    first = _call(server, "list_documents", {"limit": 1})["next_cursor"]
    for forged in ("1", "2", "²", "٣", "9" * 5000, "-1", first + "0", first.replace(".", ".0", 1)):
        assert "is not one this server gave" in _refused(server, "list_documents", {"limit": 1, "cursor": forged}), forged
    offset, listing, mac = first.split(".")
    for tampered in (f"2.{listing}.{mac}", f"{offset}.{listing}.{mac[::-1]}", f"{offset}.{'0' * 12}.{mac}"):
        assert "was altered or comes from an earlier run" in _refused(server, "list_documents", {"limit": 1, "cursor": tampered})
    borrowed = _call(server, "list_documents", {"limit": 1, "path_glob": "*"})["next_cursor"]
    assert "another listing" in _refused(server, "list_documents", {"limit": 1, "cursor": borrowed})
    assert "another listing" in _refused(server, "list_documents", {"limit": 1, "cursor": first, "ext": ["md"]})
    other_run = build_mcp(service, Limits())  # a restarted server: a new key
    assert "earlier run" in _refused(other_run, "list_documents", {"limit": 1, "cursor": first})


def test_read_beyond_the_document_says_so(server: MCPServer) -> None:
    doc = _call(server, "search", {"query": "swept wings", "k": 1})["results"][0]["id"]
    whole = _call(server, "read", {"document": doc, "max_chars": 20000})
    length = whole["end"]
    assert _call(server, "read", {"document": doc, "start": length - 5, "end": length + 10**12})["text"] == whole["text"][-5:]
    for asked in ({"start": length}, {"start": 10**9}, {"start": 10**30}, {"document": f"lodex://documents/{doc}#chars={length + 1}-{length + 9}"}):
        message = _refused(server, "read", {"document": doc, **asked})
        assert f"past the end of wings.md, which has {length} characters" in message and f"start below {length}" in message
    for asked in ({"start": 50, "end": 10}, {"start": 5, "end": 5}, {"document": f"lodex://documents/{doc}#chars=50-10"}):
        assert "is not after start" in _refused(server, "read", {"document": doc, **asked})
    huge = f"lodex://documents/{doc}#chars={'1' * 5000}-{'2' * 5000}"
    assert "neither a document id nor a lodex citation" in _refused(server, "read", {"document": huge})
    assert "neither a document id nor a lodex citation" in _refused(server, "read", {"document": f"lodex://documents/{doc}#chars=٣-٥"})


@pytest.mark.parametrize(
    ("tool", "arguments", "named"),
    [
        ("search", {"query": "wings", "mode": "nope"}, "mode: Input should be 'dense', 'bm25' or 'hybrid'"),
        ("search", {"query": ["wings"]}, "query: Input should be a valid string"),
        ("search", {"query": "wings", "k": "ten"}, "k: Input should be a valid integer"),
        ("read", {"document": {"id": 1}}, "document: Input should be a valid string"),
        ("read", {"document": "0123456789abcdef", "max_chars": 10**9}, "max_chars: Input should be less than or equal to 20000"),
        ("list_documents", {"limit": -1}, "limit: Input should be greater than or equal to 1"),
        ("list_documents", {"path_glob": "*" * 5000}, "path_glob: String should have at most 1000 characters"),
    ],
)
def test_bad_arguments_are_one_plain_line(server: MCPServer, tool: str, arguments: dict[str, Any], named: str) -> None:
    message = _refused(server, tool, arguments)
    assert named in message and "input schema" in message and "errors.pydantic.dev" not in message, message


def test_a_missing_document_resource_says_so(server: MCPServer) -> None:
    with pytest.raises(ResourceError, match="no document with id '0123456789abcdef'"):
        anyio.run(server.read_resource, "lodex://documents/0123456789abcdef")


def test_push_text_keeps_the_document_size_limit(server: MCPServer, service: Application) -> None:
    """api.max_document_kb (4 KiB here) holds for push_text as for POST /documents."""
    message = _refused(server, "push_text", {"name": "big.md", "text": "Albatross flight. " * 300})
    assert "over 4 KiB (api.max_document_kb)" in message
    assert "lone surrogate" in _refused(server, "push_text", {"name": "odd.md", "text": "wings \ud800"})
    assert _call(server, "list_documents", {})["total"] == 3  # neither was queued


KEYLESS = [
    ("POST", "/mcp", {}),
    ("GET", "/mcp", {}),
    ("DELETE", "/mcp", {}),
    ("OPTIONS", "/mcp", {}),
    ("POST", "/mcp/", {}),
    ("POST", "/mcp?api_key=sesame", {}),
    ("POST", "/mcp", {"Authorization": "Basic sesame"}),
    ("POST", "/mcp", {"Authorization": "Bearer wrong"}),
    ("POST", "/mcp", {"mcp-protocol-version": "DRAFT-2026-v1"}),
]


def test_mcp_needs_the_key_as_the_json_api_does(tmp_path: Path) -> None:
    svc = _service(tmp_path, api_key="sesame")
    try:
        with TestClient(create_app(svc), base_url=BASE) as client:
            for method, path, headers in KEYLESS:
                refused = client.request(method, path, json=HELLO if method == "POST" else None, headers={**ACCEPT, **headers})
                assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized", (method, path, headers)
            allowed = client.post("/mcp", json=HELLO, headers={**ACCEPT, "Authorization": "Bearer sesame"})
            assert allowed.status_code == 200 and allowed.headers["mcp-session-id"]
    finally:
        svc.close()
