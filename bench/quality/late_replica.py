"""An offline replica of dense search, to compare chunk-vector rules on one encoding of a collection: every document's
plain chunk vectors, its late chunk vectors and its text encoded whole (in pieces of one window), by lodex's fast encoder,
and documents ranked as lodex's dense "blend" ranks them (half best chunk, half the document's vector).

usage: python bench/quality/late_replica.py DATASET [--bundle B] [--out FILE.npz]   (encode once, then print the table)
       python bench/quality/late_replica.py --from FILE.npz                          (the table from a saved encoding)
It reproduces lodex's dense nDCG@10 on Cranfield to the digit (plain 0.3575, late for long documents 0.3626), so rules
can be screened without an index per rule; what it finds still has to be measured with bench/quality/chunk_rules.py (which
also gives hybrid). Quality only: contention does not matter.
"""

import argparse
import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
WINDOW = 254  # content tokens of one 256-token window


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)


def encode(dataset: Path, bundle: int, out: Path) -> None:
    """Chunk and encode the collection's files (as `lodex eval` writes them) three ways; save vectors and judgments."""
    from lodex.api.factory import build_chunker, build_encoder
    from lodex.api.settings import load_settings
    from lodex.indexer.chunking.late_chunking import plan_windows
    from lodex.search.collections import load_collection, write_files
    from lodex.store.manifest import IndexManifest

    tmp = Path(tempfile.mkdtemp(prefix="lodex-replica-"))
    settings = load_settings(ROOT / "config.toml", {"encoder.precision": "fast"})
    manifest = IndexManifest.read(tmp)  # a new index
    enc = build_encoder(settings, tmp, manifest)
    chunker = build_chunker(settings, enc, manifest)
    collection = load_collection(dataset)
    owner, qrels = write_files(collection, tmp / "files", bundle)
    names = sorted(set(owner.values()))
    doc_of: list[int] = []
    chunk_texts: list[str] = []
    windows, pieces, piece_doc, piece_tokens, tokens = [], [], [], [], []
    for d, name in enumerate(names):
        text = (tmp / "files" / name).read_text(encoding="utf-8").strip()
        spans = enc.token_spans([text])[0]
        tokens.append(len(spans))
        chunks = chunker.chunk(text)
        doc_of += [d] * len(chunks)
        chunk_texts += [c.text for c in chunks]
        windows += plan_windows(text, chunks, enc.token_spans, 256 - enc.special_tokens, 32)
        for s in range(0, len(spans), WINDOW):
            part = spans[s : s + WINDOW]
            pieces.append(text[part[0][0] : part[-1][1]])
            piece_doc.append(d)
            piece_tokens.append(len(part))
    whole = np.zeros((len(names), enc.dim))
    np.add.at(whole, np.asarray(piece_doc), enc.embed(pieces) * np.asarray(piece_tokens)[:, None])
    qids = sorted(qrels)
    np.savez(
        out,
        doc_of=np.asarray(doc_of),
        plain=enc.embed(chunk_texts),
        late=np.concatenate(enc.embed_windows(windows)),
        whole=_unit(whole).astype(np.float32),
        tokens=np.asarray(tokens),
        queries=np.stack([enc.embed_query(collection.queries[q]) for q in qids]),
    )
    out.with_suffix(".json").write_text(json.dumps({"names": names, "qids": qids, "qrels": qrels}))


class Encoded:
    """A saved encoding, and the dense ranking of any chunk vectors (and document vectors) over it."""

    def __init__(self, path: Path) -> None:
        z = np.load(path)
        meta = json.loads(path.with_suffix(".json").read_text())
        self.doc_of, self.plain, self.late, self.whole = z["doc_of"], z["plain"], z["late"], z["whole"]
        self.tokens, self.queries = z["tokens"], z["queries"]
        self.names, self.qids, self.qrels = meta["names"], meta["qids"], meta["qrels"]
        self.starts = np.r_[0, np.flatnonzero(np.diff(self.doc_of)) + 1]

    def means(self, vectors: np.ndarray) -> np.ndarray:
        """Each document's vector as lodex stores it: its chunk vectors' mean, normalized."""
        total = np.zeros((len(self.names), vectors.shape[1]))
        np.add.at(total, self.doc_of, vectors)
        return _unit(total)

    def ndcg(self, chunks: np.ndarray, documents: np.ndarray | None = None) -> float:
        from lodex.search.metrics import ndcg_at

        best = np.maximum.reduceat(self.queries @ chunks.T, self.starts, axis=1)
        scores = 0.5 * best + 0.5 * self.queries @ (self.means(chunks) if documents is None else documents).T
        top = np.argsort(-scores, axis=1)[:, :10]
        return float(np.mean([ndcg_at([self.names[j] for j in top[i]], self.qrels[q]) for i, q in enumerate(self.qids)]))

    def rules(self) -> Iterator[tuple[str, np.ndarray, np.ndarray | None]]:
        """(name, chunk vectors, document vectors or None for their mean) of each rule."""
        plain, late = self.plain, self.late
        long = (self.tokens > WINDOW)[self.doc_of][:, None]
        short_docs = (self.tokens <= WINDOW)[:, None]
        mixed = _unit(plain + late)
        yield "plain", plain, None
        yield "late, every document", late, None
        yield "late, long documents only", np.where(long, late, plain), None
        yield "half own + half late, every document", mixed, None
        yield "half own + half late, long documents only", np.where(long, mixed, plain), None
        yield "one chunk up to a window, encoded whole", np.where(long, plain, self.whole[self.doc_of]), None
        yield "plain chunks, short documents' vector whole", plain, np.where(short_docs, self.whole, self.means(plain))
        short = ~long
        yield (
            "late chunks and vector whole for short documents (one pass), plain for long",
            np.where(short, late, plain),
            np.where(short_docs, self.whole, self.means(plain)),
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", nargs="?", type=Path)
    parser.add_argument("--bundle", type=int, default=1)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--from", dest="saved", type=Path)
    args = parser.parse_args()
    saved = args.saved
    if saved is None:
        if args.dataset is None:
            raise SystemExit("give a BEIR-layout DATASET folder, or --from FILE.npz")
        saved = args.out or Path(tempfile.gettempdir()) / f"lodex-replica-{args.dataset.name}-{args.bundle}.npz"
        encode(args.dataset, args.bundle, saved)
    data = Encoded(saved)
    base = None
    for name, chunks, documents in data.rules():
        score = data.ndcg(chunks, documents)
        base = score if base is None else base
        print(f"{name:45s} dense nDCG@10 {score:.4f} ({100 * (score - base):+.2f})", flush=True)


if __name__ == "__main__":
    sys.exit(main())
