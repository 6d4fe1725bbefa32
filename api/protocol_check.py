"""Read by the type checker only (scripts/typecheck.py), never imported: every object a door hands out satisfies the one
method list, LodexAPI — the application object (`lodex.open`, the CLI, HTTP routes, MCP tools) and `lodex.Client`."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lodex.api.application import Application
    from lodex.api.http.client import Client
    from lodex.api.protocol import LodexAPI

    def _application(index: Application) -> LodexAPI:
        return index

    def _client(client: Client) -> LodexAPI:
        return client
