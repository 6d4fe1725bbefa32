"""What the CPU can do for the encoder: its model, cores and the instruction sets that decide how fast int8 and fp32
inference run (AVX2/FMA, AVX-512, VNNI, AMX on x86; dotprod and i8mm on ARM), read from /proc/cpuinfo."""

import os
import platform
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

# Flags that matter to the encoder, as /proc/cpuinfo names them (x86 "flags", ARM "Features").
FEATURES = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "amx_tile", "amx_int8", "asimddp", "i8mm")
# The int8 dot product the CPU offers, best first: (what it needs, how it is called).
_INT8_KERNELS = (
    (("amx_int8",), "AMX"),
    (("avx512_vnni",), "AVX-512 VNNI"),
    (("avx_vnni",), "AVX-VNNI"),
    (("avx512bw",), "AVX-512BW (no VNNI)"),
    (("avx2",), "AVX2 (no VNNI: vpmaddubsw)"),
    (("i8mm",), "ARM i8mm"),
    (("asimddp",), "ARM dotprod"),
)


@dataclass(frozen=True)
class CpuInfo:
    """The CPU as the encoder sees it."""

    model: str
    machine: str
    logical_cpus: int
    physical_cores: int
    features: list[str] = field(default_factory=list)  # those of FEATURES it has

    @property
    def int8_kernel(self) -> str:
        """The int8 dot-product instructions fast mode's kernels can use here."""
        have = set(self.features)
        return next((name for needs, name in _INT8_KERNELS if have.issuperset(needs)), "none (scalar int8)")

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for `lodex status --json` and benches."""
        return asdict(self) | {"int8_kernel": self.int8_kernel}

    def line(self) -> str:
        """One line for logs and benches: model, cores, the flags that matter and the int8 kernel."""
        flags = " ".join(self.features) or "none of " + "/".join(FEATURES[:3])
        return f"cpu: {self.model}, {self.physical_cores} cores ({self.logical_cpus} CPUs), {self.machine}; flags: {flags}; int8: {self.int8_kernel}"


def parse_cpuinfo(text: str, logical_cpus: int, machine: str = "") -> CpuInfo:
    """A CpuInfo from the text of /proc/cpuinfo (x86 or ARM), capped at `logical_cpus` (the CPUs this process may use)."""
    model, flags = "", set[str]()
    cores: set[tuple[str, str]] = set()
    physical = ""
    for line in text.splitlines():
        key, _, value = (part.strip() for part in line.partition(":"))
        if key in ("model name", "Hardware", "CPU part") and not model:
            model = value
        elif key in ("flags", "Features") and not flags:
            flags = set(value.split())
        elif key == "physical id":
            physical = value
        elif key == "core id":
            cores.add((physical, value))
    physical_cores = max(1, min(len(cores), logical_cpus)) if cores else logical_cpus
    return CpuInfo(model or "unknown CPU", machine or "unknown", logical_cpus, physical_cores, [f for f in FEATURES if f in flags])


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity), else all of them."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


@lru_cache(maxsize=1)
def cpu_info() -> CpuInfo:
    """This machine's CPU (read once)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    return parse_cpuinfo(text, usable_cpus(), platform.machine())


def physical_cores() -> int:
    """Number of physical CPU cores available (logical CPUs when that cannot be told)."""
    return cpu_info().physical_cores
