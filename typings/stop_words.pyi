"""Untyped library, typed as Any for lodex's type check (scripts/typecheck.py): it ships no type information."""

from typing import Any

def __getattr__(name: str) -> Any: ...
