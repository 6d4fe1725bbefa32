"""A paired trial: plain chunks, and a short document's stored vector taken from its text encoded whole. Each collection
is indexed once (fast mode, plain chunking) and searched; then every document of two or more chunks and at most one
window of tokens gets its text encoded whole as its document vector (the mean-vector half of the "blend" ranking), and
the same questions are searched again. Dense and hybrid nDCG@10, before and after, one JSON line per collection.

usage: python bench/whole_doc_vector.py NAME [NAME ...] [--work DIR]
NAME: a folder of bench/late_heldout.py (cranfield, cisi, med, scifact from ../shared/evaldata or $LODEX_EVALDATA, and
bench/out/evaldata for SciFact; html, de, pdf with both their question sets). The change is given with its 95% paired
bootstrap interval. Quality only: contention does not matter.
"""

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from late_heldout import MODES, _relative, folder_of  # noqa: E402
from paired import paired_delta  # noqa: E402

from lodex.search.metrics import ndcg_at  # noqa: E402

if TYPE_CHECKING:
    from lodex.api.settings import Settings

WINDOW = 254  # content tokens of one 256-token window


def measure(settings: "Settings", root: Path, queries: dict[str, str], qrels: dict[str, dict[str, int]]) -> dict[str, dict[str, float]]:
    """Each mode's nDCG@10 per question, from a read side opened afresh on the index as it is now."""
    from lodex.api.read_side import ReadSide

    side = ReadSide(settings)
    return {mode: {q: ndcg_at([_relative(h.path, root) for h in side.search(text, 10, mode=mode).results], qrels[q])
                   for q, text in queries.items()} for mode in MODES}


def short_texts(chunks: list[dict], tokens: Callable[[list[str]], list[np.ndarray]]) -> dict[str, str]:
    """The text (from its chunks' offsets) of each document of two or more chunks and at most WINDOW tokens."""
    per: dict[str, list[dict]] = {}
    for c in chunks:
        per.setdefault(c["document_id"], []).append(c)
    texts = {}
    for doc, parts in per.items():
        if len(parts) < 2:
            continue
        base, end = min(c["char_start"] for c in parts), max(c["char_end"] for c in parts)
        buf = [" "] * (end - base)
        for c in parts:
            buf[c["char_start"] - base : c["char_end"] - base] = list(c["text"])
        text = "".join(buf)
        if len(tokens([text])[0]) <= WINDOW:
            texts[doc] = text
    return texts


def trial(name: str, work: Path) -> dict:
    import lancedb

    from lodex.api.factory import WriteSide
    from lodex.api.settings import load_settings

    scratch = Path(tempfile.mkdtemp(prefix="lodex-docvector-"))
    folder = folder_of(name, work, "all")
    root, queries, qrels = folder.path.resolve(), folder.queries, folder.qrels
    data = scratch / "data"
    settings = load_settings(None, {"index.data_dir": str(data), "encoder.precision": "fast", "search.passages": 0,
                                    "chunking.late": False})
    with WriteSide(settings, root, rebuild=True) as side:
        side.indexer.run(root)
        side.store.maybe_optimize(force=True)
        before = measure(settings, root, queries, qrels)
        db = lancedb.connect(str(data / "lance"))
        chunks = db.open_table("chunks").to_arrow().select(["document_id", "char_start", "char_end", "text"]).to_pylist()
        texts = short_texts(chunks, side.encoder.token_spans)
        whole = side.encoder.embed(list(texts.values())) if texts else np.zeros((0, side.store.dim), np.float32)
        table = db.open_table("documents")
        docs = table.to_arrow()
        at = {doc: i for i, doc in enumerate(docs.column("id").to_pylist())}
        vectors = np.asarray(docs.column("vector").to_pylist(), np.float32)
        for doc, vector in zip(texts, whole):
            vectors[at[doc]] = vector
        column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), vectors.shape[1])
        table.merge_insert("id").when_matched_update_all().execute(docs.set_column(docs.schema.get_field_index("vector"), "vector", column))
    after = measure(settings, root, queries, qrels)
    delta = {m: [round(100 * x, 2) for x in paired_delta(before[m], after[m])] for m in MODES}
    return {"collection": name, "questions": len(queries), "changed": len(texts), "documents": len(at),
            "before": {m: round(sum(v.values()) / len(v), 4) for m, v in before.items()},
            "after": {m: round(sum(v.values()) / len(v), 4) for m, v in after.items()},
            "delta [95% paired interval]": delta}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="+")
    parser.add_argument("--work", type=Path, default=Path(__file__).resolve().parent / "out")
    args = parser.parse_args()
    for name in args.names:
        print(json.dumps(trial(name, args.work)), flush=True)


if __name__ == "__main__":
    main()
