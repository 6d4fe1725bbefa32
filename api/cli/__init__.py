"""The `lodex` command (typer): index, retry, watch, serve, search, mcp, eval, status and model; its options, its
one-line errors, its terminal rendering and progress. `lodex.api.cli:main` is the console script, `python -m
lodex.api.cli` the same command."""

from lodex.api.cli.main import app, main

__all__ = ["app", "main"]
