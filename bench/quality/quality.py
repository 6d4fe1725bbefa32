"""Retrieval quality at document level: lodex (max-sim, mean vector) vs sentence-transformers + FAISS.

usage: python bench/quality/quality.py DATASET_DIR [--bundle N] [--max-tokens T] [--overlap O]
Writes the collection out as files (one per document, or per bundle of N), indexes it with the real
pipeline, runs every query, and prints nDCG@10 / Recall@100 / MRR@10 next to a plain baseline that
encodes the same chunks with sentence-transformers and ranks documents by their best chunk in FAISS.
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

from bench.harness import index_in_process  # noqa: E402
from lodex.api.settings import Settings  # noqa: E402
from lodex.search.collections import load_collection, write_files  # noqa: E402
from lodex.search.metrics import evaluate  # noqa: E402
from lodex.store.lance_store import vectors_of  # noqa: E402


def st_baseline(store, queries: dict[str, str], depth: int) -> tuple[dict[str, list[str]], float]:
    """sentence-transformers encode() of the same chunk texts, FAISS exact IP, documents by first hit."""
    import faiss
    from sentence_transformers import SentenceTransformer

    from lodex.encoders.transformers_encoder import bundled_model_dir

    chunks = store.chunks.search().select(["document_id", "text"]).limit(None).to_arrow()
    paths = {r["id"]: r["path"] for r in store.scan_documents().select(["id", "path"]).to_pylist()}
    owners = [paths[d] for d in chunks["document_id"].to_pylist()]
    model = SentenceTransformer(str(bundled_model_dir()), device="cpu")
    started = time.perf_counter()
    vectors = model.encode(chunks["text"].to_pylist(), batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
    seconds = time.perf_counter() - started
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors.astype(np.float32))
    qids = list(queries)
    qvecs = model.encode([queries[q] for q in qids], normalize_embeddings=True, convert_to_numpy=True)
    _, hits = index.search(qvecs.astype(np.float32), min(depth, index.ntotal))
    runs = {}
    for q, row in zip(qids, hits):
        seen: dict[str, None] = {}
        for h in row:
            if h >= 0:
                seen.setdefault(owners[h], None)
        runs[q] = list(seen)[:100]
    return runs, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--bundle", type=int, default=1)
    parser.add_argument("--max-tokens", type=int, default=None, help="chunking.max_tokens (default: config default)")
    parser.add_argument("--overlap", type=int, default=None)
    parser.add_argument("--no-baseline", action="store_true")
    args = parser.parse_args()
    collection = load_collection(args.dataset)
    with tempfile.TemporaryDirectory(prefix="lodex-quality-") as tmp:
        folder = Path(tmp) / "docs"
        _, qrels = write_files(collection, folder, bundle=args.bundle)
        settings = Settings(base_dir=Path(tmp))
        settings.index.data_dir, settings.search.passages = "data", 0  # documents only: no passages
        if args.max_tokens:
            settings.chunking.max_tokens = args.max_tokens
        if args.overlap is not None:
            settings.chunking.overlap = args.overlap
        app, summary = index_in_process(settings, folder)
        with app:
            queries = {q: t for q, t in collection.queries.items() if q in qrels}
            started = time.perf_counter()
            # the searcher itself: a query may be longer than api.max_query_chars (CISI has some of 2,000 characters)
            maxsim = {q: [r.path for r in app.searcher.search(text, k=100).results] for q, text in queries.items()}
            query_ms = (time.perf_counter() - started) * 1000 / max(len(queries), 1)
            docs = app.store.documents.search().select(["path", "vector"]).limit(None).to_arrow()
            doc_paths, doc_vecs = docs["path"].to_pylist(), vectors_of(docs)
            qvecs = app.encoder.embed([queries[q] for q in queries], kind="query")
            mean = {q: [doc_paths[i] for i in np.argsort(-(doc_vecs @ v), kind="stable")[:100]] for q, v in zip(queries, qvecs)}
            rows = {"lodex max-sim": evaluate(maxsim, qrels), "lodex mean doc vector": evaluate(mean, qrels)}
            if not args.no_baseline:
                base_runs, base_s = st_baseline(app.store, queries, depth=max(2000, 20 * summary.chunks // max(len(docs), 1)))
                rows["sentence-transformers + FAISS (same chunks, best chunk)"] = evaluate(base_runs, qrels)
    print(
        f"dataset {collection.name}  bundle {args.bundle}  files {docs.num_rows}  chunks {summary.chunks}  "
        f"chunk tokens {settings.chunking.max_tokens}/{settings.chunking.overlap}  queries {len(queries)}"
    )
    print(f"index {summary.seconds:.1f} s ({summary.tokens / summary.seconds:,.0f} tokens/s); search {query_ms:.1f} ms/query")
    print(f"{'ranking':58s} {'nDCG@10':>8s} {'R@100':>8s} {'MRR@10':>8s}")
    for name, m in rows.items():
        print(f"{name:58s} {m['ndcg@10']:8.4f} {m['recall@100']:8.4f} {m['mrr@10']:8.4f}")


if __name__ == "__main__":
    main()
