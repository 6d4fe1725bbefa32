"""The search settings a model directory declares for itself (config.json key `lodex_search`): the fusion and the
feedback weight that `search.fusion = "auto"` and `search.feedback_weight = "auto"` take for it."""

import json
from pathlib import Path
from typing import Any

DECLARED = "lodex_search"
KEYS = {"fusion": ("convex", "ceiling", "rrf"), "feedback_weight": None}  # a name: its allowed values (None: a number >= 0)


def declared_search(model_dir: str) -> tuple[dict[str, Any], str]:
    """The search settings the model in `model_dir` declares ("": the bundled MiniLM, which declares none) and where
    they came from; a key with a value lodex does not know is left out (the setting's own default applies)."""
    if not model_dir:
        return {}, "the bundled all-MiniLM-L6-v2 declares none"
    try:
        declared = json.loads((Path(model_dir) / "config.json").read_text()).get(DECLARED)
    except (OSError, ValueError, AttributeError):
        declared = None
    if not isinstance(declared, dict):
        return {}, f"none declared (no {DECLARED} in config.json)"
    kept = {key: value for key, value in declared.items() if key in KEYS and _valid(key, value)}
    return kept, f"config.json {DECLARED}"


def _valid(key: str, value: Any) -> bool:
    allowed = KEYS[key]
    if allowed is None:
        return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
    return value in allowed
