"""The edges and the core they share: the application object and its method list, the composition root, settings, the
request and result models; the doors by folder — the CLI (cli/), HTTP (http/), MCP (mcp/) — and model management (model/)."""
