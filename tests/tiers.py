"""The test tiers, told apart by one rule (applied at collection by `conftest.pytest_collection_modifyitems`): `e2e`
for a test that is `slow`, asks for the real model, or starts a process, a server or a browser (in its own code, a
helper or a fixture of the test suite's); `unit` for every other (`pytest -m unit`: the quick, in-process tier)."""

import inspect
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

# Words in a test's code (or in a helper, class or fixture of the suite's that it names) that mean it starts a process
# (lodex's own optimizing helper, `optimize_apart`, and a Ray cluster among them), a server (uvicorn, moto's S3, a
# listening socket) or a browser.
STARTS_SOMETHING = re.compile(
    r"\b(subprocess|Popen|sys\.executable|multiprocessing|ProcessPoolExecutor|optimize_apart|"
    r"ray\.init|live_server|uvicorn|ThreadedMotoServer|create_server|playwright|chromium)\b"
)
# Fixtures that load the real bundled model (or its int8 export), or import the real multilingual one.
REAL_MODEL_FIXTURES = frozenset({"real_encoder", "fast_cache", "e5_model"})
_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")
_seen: dict[Callable[..., Any], bool] = {}


def is_e2e(item: pytest.Item) -> bool:
    """Whether this collected test belongs to the end-to-end tier."""
    if item.get_closest_marker("slow") is not None or REAL_MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    function = getattr(item, "function", None)
    if function is not None and _starts_something(function):
        return True
    definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    return any(_starts_something(d.func) for defs in definitions.values() for d in defs if _of_the_suite(d.func))


def _of_the_suite(thing: Any) -> bool:
    """Whether this is a function or class of the test suite (a helper, a fixture, a harness)."""
    return (inspect.isfunction(thing) or inspect.isclass(thing)) and (thing.__module__ or "").split(".")[0] == "tests"


def _starts_something(function: Callable[..., Any]) -> bool:
    """Whether this function's (or class's) code, or that of a function or class of the test suite it names, starts a
    process, server or browser (each read once)."""
    if function in _seen:
        return _seen[function]
    _seen[function] = False  # a helper that names itself (recursion) adds nothing
    try:
        source = inspect.getsource(function)
    except (OSError, TypeError):
        return False
    found = bool(STARTS_SOMETHING.search(source))
    if not found:
        names = getattr(function, "__globals__", None) or vars(inspect.getmodule(function))
        found = any(
            _starts_something(names[word])
            for word in set(_IDENTIFIER.findall(source))
            if word in names and _of_the_suite(names[word]) and names[word] is not function
        )
    _seen[function] = found
    return found


def mark(items: list[pytest.Item]) -> None:
    """Mark every collected test `e2e` or `unit`."""
    for item in items:
        item.add_marker(pytest.mark.e2e if is_e2e(item) else pytest.mark.unit)


def heaviest_first(items: list[pytest.Item]) -> None:
    """Order the test files by their weight — `slow` tests, then `e2e` ones — heaviest first, each file's tests in their
    order: pytest-xdist (`--dist loadfile`) hands files to the workers in this order, so the long files start first
    and the short ones fill in at the end, instead of one worker finishing a long file alone."""
    slow: Counter[Any] = Counter(item.path for item in items if item.get_closest_marker("slow"))
    e2e: Counter[Any] = Counter(item.path for item in items if item.get_closest_marker("e2e"))
    items.sort(key=lambda item: (-slow[item.path], -e2e[item.path]))  # stable: a file's tests stay together, in order
