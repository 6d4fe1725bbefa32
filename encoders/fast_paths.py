"""Fast mode's paths (int8 weights × how the runtime uses the cores) and the choice among them by measurement: every
path this CPU can use is built, checked against PyTorch (the fidelity gate) and timed on a probe; the fastest that
passes is kept, and remembered per model and CPU in the model cache, so that later starts do not measure again."""

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from lodex.encoders.cpu import CpuInfo
from lodex.encoders.errors import ModelError
from lodex.encoders.onnx_model import EXPORT
from lodex.encoders.smoothing import SCHEME
from lodex.store.errors import ConfigError

# int8 weights: "int8" uses the full 8-bit range per output channel; "int8r7" only 7 bits, so that AVX2's int8 dot
# product (vpmaddubsw, which adds pairs of u8 x s8 products into int16) can never saturate on CPUs without VNNI.
WEIGHTS = ("int8", "int8r7")
# How the runtime uses the cores: "threads", one session whose operators split each batch over all cores; "sessions",
# one single-threaded session per core, each running whole batches (no synchronisation inside a batch).
LAYOUTS = ("threads", "sessions")
MARGIN = 0.05  # a later candidate must be this much faster than an earlier one to be chosen (timings are noisy)
MEAN_GATE = 0.99  # the fidelity gate: mean cosine to PyTorch on the calibration texts at least this,
MIN_GATE = 0.95  # and no text below this


@dataclass(frozen=True)
class FastPath:
    """One way to run fast mode: which int8 weights and which layout of runtime sessions."""

    weights: str = "int8"
    layout: str = "threads"

    @property
    def name(self) -> str:
        """As `encoder.fast_path` names it: "int8", "int8-sessions", "int8r7", "int8r7-sessions"."""
        return self.weights if self.layout == "threads" else f"{self.weights}-{self.layout}"

    @property
    def scheme(self) -> str:
        """The quantization scheme recorded in an index's origin: vectors of two schemes are not mixed in one index."""
        return SCHEME if self.weights == "int8" else f"{SCHEME}-r7"

    @property
    def reduce_range(self) -> bool:
        """Whether the weights use 7 bits."""
        return self.weights == "int8r7"


ALL_PATHS = [FastPath(w, layout) for w in WEIGHTS for layout in LAYOUTS]


def parse_path(name: str) -> FastPath:
    """The path `encoder.fast_path` names (a ConfigError for an unknown one)."""
    for path in ALL_PATHS:
        if path.name == name:
            return path
    raise ConfigError(f"unknown encoder.fast_path {name!r}", f'use "auto" or one of: {", ".join(p.name for p in ALL_PATHS)}')


def may_saturate(cpu: CpuInfo) -> bool:
    """Whether this CPU's int8 kernel adds products into int16 (x86 without VNNI or AMX): full-range weights may saturate."""
    have = set(cpu.features)
    return cpu.machine in ("x86_64", "AMD64", "i686", "x86") and not have & {"avx512_vnni", "avx_vnni", "amx_int8"}


def candidates(cpu: CpuInfo, scheme: str | None = None) -> list[FastPath]:
    """The paths worth measuring on this CPU, preferred first: 7-bit weights only where the kernel may saturate (or the
    index was built with them: `scheme`, its recorded quantization, keeps only paths of that scheme); one session per
    core only where there is more than one core."""
    weights = ["int8", "int8r7"] if may_saturate(cpu) or scheme == FastPath("int8r7").scheme else ["int8"]
    layouts = list(LAYOUTS) if cpu.physical_cores > 1 else ["threads"]
    paths = [FastPath(w, layout) for w in weights for layout in layouts]
    return [p for p in paths if scheme is None or p.scheme == scheme]


@dataclass
class Trial:
    """One candidate as measured: its agreement with PyTorch, its probe time, and why it was not usable (or None)."""

    path: str
    agreement: float | None = None  # mean cosine to PyTorch on the calibration texts
    lowest: float | None = None  # the lowest cosine among them
    seconds: float | None = None
    error: str | None = None


Measure = Callable[[FastPath], tuple[float, float, float]]  # a path → (mean cosine, lowest cosine, probe seconds)


def choose(paths: list[FastPath], measure: Measure) -> tuple[FastPath, list[Trial]]:
    """The fastest path that passes the fidelity gate (an earlier one kept unless a later one is MARGIN faster), and
    every trial; a path that cannot be built or run is passed over with its reason. A ModelError when none passes."""
    trials: list[tuple[FastPath, Trial]] = []
    for path in paths:
        trial = Trial(path.name)
        try:
            trial.agreement, trial.lowest, trial.seconds = measure(path)
        except Exception as exc:  # noqa: BLE001 - a path the exporter, quantizer or runtime cannot take: the next one
            trial.error = (exc.one_line() if isinstance(exc, ModelError) else f"{type(exc).__name__}: {exc}").splitlines()[0][:200]
        else:
            if trial.agreement < MEAN_GATE or trial.lowest < MIN_GATE:
                trial.error = f"cosine to PyTorch mean {trial.agreement:.4f}, lowest {trial.lowest:.4f}: below the gate ({MEAN_GATE}, {MIN_GATE})"
        trials.append((path, trial))
    passing = [(p, t) for p, t in trials if t.error is None]
    if not passing:
        reasons = "; ".join(f"{t.path}: {t.error}" for _, t in trials) or "no path for this CPU"
        raise ModelError(f"fast mode has no faithful int8 path on this CPU ({reasons})", 'set encoder.precision = "exact"')
    best, best_trial = passing[0]
    for path, trial in passing[1:]:
        if trial.seconds is not None and best_trial.seconds is not None and trial.seconds < best_trial.seconds * (1 - MARGIN):
            best, best_trial = path, trial
    return best, [t for _, t in trials]


def _choice_file(cache_dir: Path, fingerprint: str) -> Path:
    return cache_dir / f"{fingerprint[:20]}-{EXPORT}-fast-path.json"  # measured on this export of the model


def _cpu_key(cpu: CpuInfo, paths: list[FastPath]) -> str:
    return f"{cpu.model}|{cpu.physical_cores}|{' '.join(cpu.features)}|{','.join(p.name for p in paths)}"


def remembered(cache_dir: Path, fingerprint: str, cpu: CpuInfo, paths: list[FastPath]) -> FastPath | None:
    """The path chosen before for this model, this CPU and these candidates, or None (never measured, or unreadable)."""
    try:
        choices = json.loads(_choice_file(cache_dir, fingerprint).read_text())
        name = choices[_cpu_key(cpu, paths)]["path"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return next((p for p in paths if p.name == name), None)


def remember(cache_dir: Path, fingerprint: str, cpu: CpuInfo, paths: list[FastPath], chosen: FastPath, trials: list[Trial]) -> None:
    """Record the choice and its measurements (best effort: an unwritable cache means measuring again next time)."""
    path = _choice_file(cache_dir, fingerprint)
    try:
        choices = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError):
        choices = {}
    choices[_cpu_key(cpu, paths)] = {"path": chosen.name, "measured_at": time.time(), "trials": [asdict(t) for t in trials]}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(choices, indent=2))
        os.replace(tmp, path)
    except OSError:
        pass
