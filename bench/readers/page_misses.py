"""Where page@1 is lost on the PDF set (bench/readers/pdf_quality.py's questions), and how a few in-document passage rules
would choose: each question's top document, whether its best passage is on the question's page, the adjacent one or
further away, and where the question's page's best chunk ranks inside the document by each signal.

usage: python bench/readers/page_misses.py [--workdir DIR] [--keep DIR] [--show]
  --keep DIR  index the set into DIR once and reuse it on later runs (the index does not depend on the questions)
  --show      print each miss: the question, the passage's page and section, the wanted page's best chunk's ranks

The rules are read from the index as it is: "lodex" (the chunks the search mode ranked highest, then by cosine;
contents and index pages last: what lodex shows), "cosine" (the query's cosine to each of the document's chunks) and
"bm25 in document" (BM25 over the document's chunks' keyword terms, the document as the collection). "oracle" counts
the questions whose page has a chunk of the right document at all. Quality only: timing is not measured.
"""

import argparse
import math
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.harness import OUT, index_in_process  # noqa: E402
from bench.readers.pdf_quality import asked_questions  # noqa: E402
from bench.readers.pdf_set import GENERATED, debian_set, evaldata_dir, generated  # noqa: E402
from lodex.api.application import Application  # noqa: E402
from lodex.api.factory import open_app  # noqa: E402
from lodex.api.settings import Settings  # noqa: E402
from lodex.search.listing import is_listing  # noqa: E402
from lodex.search.passages import PASSAGE_POOL  # noqa: E402
from lodex.search.searcher import Searcher  # noqa: E402
from lodex.text.terms import terms  # noqa: E402


def recording(searcher: Searcher) -> dict:
    """What `searcher` keeps from now on, for its last query: the snapshot, the chunk scores passages follow and the
    query vector (its passage step wrapped)."""
    last: dict = {}
    inner = searcher.best_passages

    def best_passages(snap, queries, vectors, tops, chunk_order):  # type: ignore[no-untyped-def]
        last.update(snap=snap, order=chunk_order[0], vector=vectors[0], tops=tops[0])
        return inner(snap, queries, vectors, tops, chunk_order)

    searcher.best_passages = best_passages  # type: ignore[method-assign]
    return last


def opened(base: Path, files: list[Path]) -> Application:
    """The index of `files` in base/data (passages as lodex shows them, default settings): built from base/docs the
    first time, then read as it is."""
    settings = Settings(base_dir=base)
    settings.index.data_dir = "data"
    if (base / "data").exists():
        return open_app(settings, "read")
    (base / "docs").mkdir(parents=True, exist_ok=True)
    for path in files:
        shutil.copy(path, base / "docs" / path.name)
    return index_in_process(settings, base / "docs")[0]


def bm25_in_document(chunks: list[dict], query: list[str], k1: float = 1.2, b: float = 0.75) -> np.ndarray:
    """BM25 of each chunk's keyword terms, the document's chunks as the collection."""
    docs = [(c["keywords"] or "").split() for c in chunks]
    n, average = len(docs), max(sum(map(len, docs)) / max(len(docs), 1), 1e-9)
    df = Counter(t for doc in docs for t in set(doc))
    scores = np.zeros(n)
    for j, doc in enumerate(docs):
        tf = Counter(doc)
        for t in query:
            if tf[t]:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                scores[j] += idf * tf[t] * (k1 + 1) / (tf[t] + k1 * (1 - b + b * len(doc) / average))
    return scores


def first_saying(order: np.ndarray, chunks: list[dict]) -> int:
    """The first chunk in `order` among its PASSAGE_POOL best that is not a listing (else the first), as lodex shows."""
    pool = order[:PASSAGE_POOL]
    return next((int(j) for j in pool if not is_listing(chunks[j]["text"])), int(pool[0]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", type=Path, default=OUT / "pdfdata")
    parser.add_argument("--keep", type=Path, help="index the set here once and reuse it")
    parser.add_argument("--show", action="store_true")
    args = parser.parse_args()
    generated(args.workdir, evaldata_dir())
    files = [*debian_set(args.workdir), args.workdir / GENERATED]
    app = opened(args.keep or Path(tempfile.mkdtemp(prefix="lodex-page-misses-")), files)
    with app:
        right, kinds = tally(app, last=recording(app.searcher), show=args.show)
    n = sum(kinds.values())
    print(f"{n} questions; lodex's first passage: " + ", ".join(f"{k} {v}" for k, v in kinds.most_common()))
    for name, count in right.items():
        print(f"page@1 {name:17s} {count / n:.3f} ({count})")


def tally(app: Application, last: dict, show: bool) -> tuple[Counter, Counter]:
    """Each question searched: (right page@1 by signal, lodex's first passage by kind); `last`: what the searcher kept."""
    store = app.store
    right: Counter = Counter()
    kinds: Counter = Counter()
    for q in asked_questions():
        top = app.search(q["question"], k=10).results[0]
        ids, vectors, _ = last["snap"].chunk_vectors(np.array([last["tops"][0][0]]))
        rows = last["snap"].owners.row_ids_of(ids)
        by_id = {r["id"]: r for r in store.chunks_at_rows(rows, ["id", "text", "keywords", "page", "page_end", "section"]).to_pylist()}
        chunks = [by_id[int(c)] for c in ids]
        cosine = vectors @ last["vector"]
        signals = {
            "lodex": np.lexsort((-cosine, -last["order"].score_of(ids))),
            "cosine": np.argsort(-cosine, kind="stable"),
            "bm25 in document": np.argsort(-bm25_in_document(chunks, terms(q["question"])), kind="stable"),
        }
        on_page = [c["page"] is not None and c["page"] <= q["page"] <= (c["page_end"] or c["page"]) for c in chunks]
        same_doc = Path(top.path).name == q["file"]
        right["oracle"] += same_doc and any(on_page)
        for name, order in signals.items():
            right[name] += same_doc and on_page[first_saying(order, chunks)]
        shown = chunks[first_saying(signals["lodex"], chunks)]
        kind = (
            "right"
            if same_doc and on_page[first_saying(signals["lodex"], chunks)]
            else "wrong document"
            if not same_doc
            else "adjacent page"
            if abs(shown["page"] - q["page"]) == 1
            else "another page"
        )
        kinds[kind] += 1
        if show and kind != "right":
            print(f"- [{kind}] {q['file']} p{q['page']}: {q['question']}\n    shown: p{shown['page']} {shown['section']}")
            if same_doc and any(on_page):
                ranks = {name: 1 + min(int(np.flatnonzero(order == j)[0]) for j in np.flatnonzero(on_page)) for name, order in signals.items()}
                print(f"    the page's best chunk ranks {ranks}")
    return right, kinds


if __name__ == "__main__":
    main()
