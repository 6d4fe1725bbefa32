"""The MCP door: the tools and resources of `lodex mcp` (stdio) and of /mcp on `lodex serve` (streamable HTTP), over the
one method list of the application object."""
