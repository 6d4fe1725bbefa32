"""Reading a JSON file that must hold one object (an index's record, a model's config.json)."""

import json
from pathlib import Path
from typing import Any


class NotAnObject(ValueError):
    """The file is JSON, but not an object."""


def read_json_object(path: Path) -> dict[str, Any]:
    """The object `path` holds; OSError when it cannot be read, ValueError when it is not JSON, NotAnObject (a
    ValueError) when it is JSON of another kind."""
    value = json.loads(path.read_text())
    if not isinstance(value, dict):
        raise NotAnObject("not a JSON object")
    return value
