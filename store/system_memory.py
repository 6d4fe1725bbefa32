"""The memory this machine has available now (Linux's MemAvailable)."""

from pathlib import Path


def available_bytes(unknown: int) -> int:
    """Memory available now without swapping (MemAvailable in /proc/meminfo), or `unknown` when it cannot be read."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return unknown
