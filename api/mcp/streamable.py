"""/mcp on `lodex serve`: the MCP server as a streamable HTTP app whose sessions are bounded (mcp.max_sessions; at the
limit a new session closes the one idle longest) and end after mcp.session_idle_s without a request."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import Route

PATH = "/mcp"


class BoundedSessions(StreamableHTTPSessionManager):
    """The SDK's session manager (mcp 2.3, whose session table it reads), which makes room for a new session at
    `max_sessions` by closing the session idle longest; only while every session is serving a request is a new one
    refused (503). Its memory is bounded by `max_sessions` whatever a client opens and never closes."""

    def _admit_session(self, requestor: Any) -> StreamableHTTPServerTransport | None:
        if self.max_sessions is not None and len(self._server_instances) >= self.max_sessions:
            self._close_idlest()
        return super()._admit_session(requestor)

    def _close_idlest(self) -> None:
        """Forget the session whose last request ended longest ago (none in flight) and end its server task."""
        idle = [
            (t.idle_scope.deadline, session_id)
            for session_id, t in self._server_instances.items()
            if t.idle_scope is not None and not t._requests_in_flight
        ]
        if not idle:
            return
        session_id = min(idle)[1]
        transport = self._server_instances.pop(session_id)
        self._session_owners.pop(session_id, None)
        if transport.idle_scope is not None:
            transport.idle_scope.cancel()  # its server task ends and terminates the transport


def mcp_http_app(server: MCPServer, max_body_bytes: int, max_sessions: int, idle_s: float) -> Starlette:
    """`server` over streamable HTTP at /mcp; the SDK's own Host check is off: lodex's LimitsAndAuth applies the JSON
    API's (and its key)."""
    manager = BoundedSessions(
        server._lowlevel_server,
        max_request_body_size=max_body_bytes,
        max_sessions=max_sessions,
        session_idle_timeout=idle_s,
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return Starlette(routes=[Route(PATH, endpoint=StreamableHTTPASGIApp(manager))], lifespan=lifespan)
