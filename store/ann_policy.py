"""Which FAISS index the writer keeps for a collection's size: exact, or IVF (approximate) once it is large."""

from dataclasses import dataclass

from lodex.store.vector_index import NPROBE, VectorIndex


@dataclass(frozen=True)
class AnnPolicy:
    """Which FAISS index the writer keeps: exact ("flat"), IVF ("ivf", from MIN_IVF vectors), or "auto" (IVF from
    `above` vectors). An IVF index is retrained when it outgrows its clusters (4x the size they were made for)."""

    kind: str = "auto"
    above: int = 50_000
    nprobe: int = NPROBE

    MIN_IVF = 10_000

    def kind_for(self, n: int) -> str:
        """The kind of index wanted for n vectors."""
        return "ivf" if n >= self.MIN_IVF and (self.kind == "ivf" or (self.kind == "auto" and n >= self.above)) else "flat"

    def rebuild(self, index: VectorIndex) -> str | None:
        """The kind to rebuild `index` as, or None when it suits its size (an IVF index stays until it is a
        quarter of `above`, so that a collection near the threshold does not switch back and forth)."""
        n = len(index)
        if self.kind_for(n) == "ivf":
            return "ivf" if index.kind == "flat" or n > 4 * index.trained_for else None
        if index.kind == "ivf" and (self.kind == "flat" or n < self.MIN_IVF or n < self.above // 4):
            return "flat"
        return None
