"""What the bench scripts share: the repository's folders, the machine line printed beside every speed figure, runs
timed against a baseline measured in the same run, a dated result block, and a lodex index built in a folder (by
`lodex index` in a child process, or in this one as the application object).

A script puts the repository root on `sys.path` (one line, before it can import this) and then
`from bench.harness import ...`."""

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:  # lodex is imported where it is used: a child measured for memory imports this module
    from lodex.api.application import Application
    from lodex.api.settings import Settings
    from lodex.encoders.encoder import Encoder
    from lodex.indexer.run_state import RunSummary

ROOT = Path(__file__).resolve().parents[1]
EVALDATA = Path(os.environ.get("LODEX_EVALDATA", ROOT.parent / "shared" / "evaldata"))  # cranfield, cisi, med, ...
OUT = ROOT / "bench" / "out"  # what the scripts keep between runs (ignored by git)
LODEX_CLI = [sys.executable, "-m", "lodex.api.cli"]  # `lodex`, run by this interpreter

T = TypeVar("T")


def machine_line() -> str:
    """The CPU as speed figures depend on it: model, cores, the flags that matter to the encoder, its int8 kernel."""
    from lodex.encoders.cpu import cpu_info

    return cpu_info().line()


def command_line() -> str:
    """This run's command as a reader would type it from the repository root (`python bench/.../x.py ARGS`)."""
    script = Path(sys.argv[0]).resolve()
    shown = script.relative_to(ROOT) if script.is_relative_to(ROOT) else script
    return shlex.join(["python", str(shown), *sys.argv[1:]])


def result_block(title: str, *facts: str) -> list[str]:
    """The head of a dated result block (Markdown): `## DATE UTC — title`, the machine, the command and `facts` (each
    a `- name: value` line), then a blank line; `publish` prints it and appends it to a results file."""
    return [
        f"## {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC — {title}",
        "",
        f"- machine: {machine_line()}",
        f"- command: `{command_line()}`",
        *facts,
        "",
    ]


def publish(lines: list[str], out: Path | None) -> None:
    """Print a Markdown report, and append it to `out` when given."""
    report = "\n".join(lines) + "\n"
    print(report)
    if out:
        with out.open("a", encoding="utf-8") as handle:
            handle.write(report)


def alternating(names: Sequence[str], rounds: int, run: Callable[[str, int], T], better: Callable[[T, T], bool]) -> dict[str, T]:
    """Each of `names` run `rounds` times (`run(name, round)`), in turn, the order reversed every other round so that a
    shared machine's load falls on each alike; the least disturbed run of each (`better(new, kept)`), by name."""
    best: dict[str, T] = {}
    for round_ in range(rounds):
        for name in names if round_ % 2 == 0 else list(names)[::-1]:
            result = run(name, round_)
            if name not in best or better(result, best[name]):
                best[name] = result
    return best


def percentile_ms(seconds: list[float], q: float) -> float:
    """The `q` quantile (0-1, the lower nearest rank) of latencies in seconds, in milliseconds; NaN when there are none."""
    ordered = sorted(seconds)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1)))] * 1000 if ordered else float("nan")


def peak_rss_mib() -> float:
    """This process's peak resident memory, MiB: VmHWM, which starts afresh at exec. Not ru_maxrss: on Linux it
    carries over the parent's peak across fork + exec when that is larger."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def free_port() -> int:
    """A loopback TCP port free now."""
    import socket  # here: a reader's child measured for memory (bench/readers/extract.py) imports this module

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def index_folder(folder: Path, env: Mapping[str, str] | None = None, *options: str) -> str:
    """`lodex index FOLDER OPTIONS...` run to its end from the repository root (the index where `env`'s
    LODEX_DATA_DIR or `--data-dir` says); its standard output. A failure ends the script with lodex's last words."""
    done = subprocess.run([*LODEX_CLI, "index", str(folder), *options], env=dict(env or os.environ), cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"lodex index {folder} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return done.stdout


def index_in_process(settings: "Settings", folder: Path, encoder: "Encoder | None" = None) -> "tuple[Application, RunSummary]":
    """`lodex index --rebuild FOLDER` in this process: the index where `settings` say (index.data_dir; search.passages
    and the rest are theirs too) wiped and built by the application object's write role, handed back open (close it,
    or use it in a `with`) with the run's summary. `encoder`: one already loaded."""
    from lodex.api.factory import open_app

    root = folder.resolve()
    app = open_app(settings, "write", root, encoder=encoder, rebuild=True)
    try:
        assert app.indexer is not None
        return app, app.indexer.run(root)
    except BaseException:
        app.close()
        raise
