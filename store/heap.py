"""glibc heap settings: few malloc arenas, and freed memory handed back to the OS after large phases."""

import ctypes


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc: nothing to do
        return None


def limit_arenas(arenas: int = 2) -> None:
    """Cap glibc's per-thread malloc arenas: with reader, writer, Lance and encoder threads, freed memory
    otherwise stays spread over many arenas and the process grows with the run."""
    libc = _libc()
    if libc is not None and hasattr(libc, "mallopt"):
        libc.mallopt(-8, arenas)  # M_ARENA_MAX


def release_freed() -> None:
    """Return freed heap pages to the OS (glibc keeps them after a large scan or compaction otherwise)."""
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)
