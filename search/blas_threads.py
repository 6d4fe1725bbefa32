"""numpy's OpenBLAS kept to one thread: lodex's matrix products are small and many threads already run them."""

import numpy  # noqa: F401 — loads the OpenBLAS to limit (threadpoolctl sees only loaded libraries)
from threadpoolctl import ThreadpoolController

NUMPY_BLAS = "libscipy_openblas"  # the OpenBLAS numpy's wheels ship (FAISS's own, libopenblaso, is left alone)


def single_threaded_numpy_blas() -> None:
    """Run numpy's BLAS calls on the calling thread. Its worker threads spin for a while after each call: in a serve
    under 8 clients at 1M chunks they took 35% of the process's CPU (perf) while queries waited for the cores."""
    ThreadpoolController().select(prefix=NUMPY_BLAS).limit(limits=1)
