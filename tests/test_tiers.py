"""The tier rule (tests/tiers.py): a test that starts a process or server, itself or through a helper, is `e2e`."""

import subprocess
import sys

from tests.tiers import _starts_something


def _runs_the_cli() -> None:
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def _calls_a_helper_that_runs_the_cli() -> None:
    _runs_the_cli()


def _stays_in_process() -> int:
    return sum(range(3))


def test_a_process_started_directly_or_through_a_helper_is_end_to_end() -> None:
    assert _starts_something(_runs_the_cli)
    assert _starts_something(_calls_a_helper_that_runs_the_cli)
    assert not _starts_something(_stays_in_process)


def test_this_module_s_own_tests_are_unit(request) -> None:  # noqa: ANN001
    assert request.node.get_closest_marker("unit") is not None and request.node.get_closest_marker("e2e") is None
