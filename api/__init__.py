"""The edges: CLI, settings loading and (later) the HTTP app."""
