"""Waiting in tests for something another thread or process does: poll a condition until it holds or a generous
timeout passes, and fail saying what was awaited (never a fixed sleep that hopes the work is done)."""

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float = 30.0, interval: float = 0.05, what: str = "the condition",
               detail: Callable[[], object] | None = None) -> T:
    """Call `predicate` every `interval` seconds until it returns something true, and return that; after `timeout`
    seconds, fail with an AssertionError naming `what` was awaited (and `detail()`, e.g. a server's output). The
    predicate may itself assert (a process still alive) to fail at once."""
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() >= deadline:
            extra = f": {detail()}" if detail is not None else ""
            raise AssertionError(f"waited {timeout:g} s for {what}, in vain{extra}")
        time.sleep(interval)  # the polling interval between two looks
