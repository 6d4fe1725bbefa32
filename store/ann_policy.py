"""Which FAISS index the writer keeps for a collection's size: exact, IVF (approximate) once it is large, and compressed
IVF (8-bit codes in memory, candidates re-scored from float32 vectors on disk) once it is very large."""

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from lodex.store.vector_index import VectorIndex

AnnKind = Literal["auto", "flat", "ivf", "compressed"]  # index.ann
NPROBE = 64  # IVF clusters searched per query: recall@10 0.9996 at 105,000 real chunks and at 1,000,000 synthetic ones
REFINE = 4  # a compressed index re-scores exactly this many times the candidates asked for
_RANK = {"flat": 0, "ivf": 1, "compressed": 2}


@dataclass(frozen=True)
class AnnPolicy:
    """Which FAISS index the writer keeps: exact ("flat"), IVF ("ivf"), compressed IVF ("compressed"; both from
    MIN_IVF vectors), or "auto" (IVF from `above` vectors, compressed from `compress_above`). An index of a larger kind
    stays until the collection shrinks to a quarter of its threshold, so that a size near one does not switch back
    and forth; an IVF index is retrained when it outgrows its clusters (4x the size they were made for)."""

    kind: AnnKind = "auto"
    above: int = 50_000
    nprobe: int = NPROBE
    compress_above: int = 1_000_000
    refine: int = REFINE
    codes: str = "sq8"  # a compressed index's codes: "sq8" (a byte a dimension) or "pq" (a byte per 4 dimensions)

    MIN_IVF = 10_000

    def kind_for(self, n: int) -> str:
        """The kind of index wanted for n vectors."""
        if n < self.MIN_IVF or self.kind == "flat":
            return "flat"
        if self.kind != "auto":
            return self.kind
        return "compressed" if n >= self.compress_above else "ivf" if n >= self.above else "flat"

    def rebuild(self, index: "VectorIndex") -> str | None:
        """The kind to rebuild `index` as, or None when it suits its size."""
        n, have = len(index), index.kind
        want = self.kind_for(n)
        threshold = {"ivf": self.above, "compressed": self.compress_above}.get(have, 0)
        if self.kind == "auto" and n >= self.MIN_IVF and _RANK[have] > _RANK[want] and n >= threshold // 4:
            want = have
        if want == have:
            return want if want != "flat" and n > 4 * index.trained_for else None
        return want
