"""The MCP server's write tools: absent unless mcp.allow_writes; with it, push_text and delete_document go through
the one writer, and a refused write is a tool error with the fix."""

from pathlib import Path

import anyio
import pytest
from mcp.server.mcpserver.exceptions import ToolError

from lodex.api.mcp.server import add_write_tools, build_mcp
from tests.test_api import _service


def test_write_tools_only_when_allowed(tmp_path: Path) -> None:
    service = _service(tmp_path)
    try:
        server = build_mcp(service)
        assert {t.name for t in anyio.run(server.list_tools)} == {"search", "read", "list_documents", "status"}
        add_write_tools(server, service)
        assert {"push_text", "delete_document", "reindex"} <= {t.name for t in anyio.run(server.list_tools)}

        async def calls() -> None:
            pushed = (
                await server.call_tool("push_text", {"name": "memo.md", "text": "Albatross gliding flight over the ocean. " * 5})
            ).structured_content
            assert pushed is not None and pushed["status"] == "indexed"
            found = (await server.call_tool("search", {"query": "albatross gliding", "k": 1})).structured_content
            assert found is not None and found["results"][0]["id"] == pushed["id"]
            with pytest.raises(ToolError, match="watched folder"):
                folder_doc = (await server.call_tool("search", {"query": "heat transfer hypersonic", "k": 1})).structured_content
                await server.call_tool("delete_document", {"document": folder_doc["results"][0]["id"]})
            with pytest.raises(ToolError, match="name"):
                await server.call_tool("push_text", {"name": "../up.md", "text": "x"})
            assert (await server.call_tool("delete_document", {"document": pushed["id"]})).structured_content == {
                "deleted": pushed["id"],
                "existed": 1,
            }

        anyio.run(calls)
    finally:
        service.close()
