"""txtai's own API in hybrid mode (dense + BM25) over the chunks of a lodex index, a peer for bench/serving/load.py --peer.

usage: python bench/peers/txtai_peer.py build DATA_DIR INDEX_DIR   (prints {"build_s", "chunks", "reused"})
       python bench/peers/txtai_peer.py serve INDEX_DIR PORT
`build` reads every chunk's text and vector from the lodex index's Lance table (as bench/peers/peer_server.py does) and
builds a txtai 9.x Embeddings index with `hybrid: true` (a dense FAISS index with txtai's default components, IVF at
this size, plus its BM25 term index: scoring {method: bm25, terms: true, normalize: true}) and `content: true` (the
text kept in its SQLite store, so results carry it). The vectors are not re-encoded: txtai's external vectors
(`method: external`) call a `transform` function on each batch of texts; at build time that function hands back the
precomputed lodex vectors of those texts, in order (the stream is checked against the chunks' texts). The index is
saved to INDEX_DIR and reused while the chunks' ids are unchanged.
`serve` runs txtai's stock FastAPI app (txtai.api:app under uvicorn on 127.0.0.1, configured by a YAML file in the
CONFIG environment variable) on the saved index, with `embeddings.transform` set to `encode_queries` below, which
encodes each query with the real bundled all-MiniLM-L6-v2 through sentence-transformers (normalized, as lodex's).
"""

import functools
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from lodex.encoders.transformers_encoder import bundled_model_dir  # noqa: E402

CONFIG = {"method": "external", "hybrid": True, "content": True}
QUERY_TRANSFORM = f"{Path(__file__).stem}.encode_queries"  # resolved by txtai.api, this folder being on sys.path


@functools.cache
def _model():  # noqa: ANN202 - a SentenceTransformer, imported here so that `build` does not load torch's model
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(bundled_model_dir()), device="cpu")


def encode_queries(texts: Sequence[str]) -> np.ndarray:
    """txtai's external transform when serving: the real model's normalized vectors of `texts`."""
    return _model().encode(list(texts), normalize_embeddings=True, convert_to_numpy=True)


def stored_vectors(texts: list[str], vectors: np.ndarray) -> Callable[[Sequence[str]], np.ndarray]:
    """txtai's external transform when building: the next len(batch) precomputed vectors, the batch checked against
    `texts` (txtai streams the documents in the order given)."""
    at = 0

    def transform(batch: Sequence[str]) -> np.ndarray:
        nonlocal at
        if list(batch) != texts[at : at + len(batch)]:
            raise RuntimeError(f"txtai streamed chunks out of order at {at}")
        at += len(batch)
        return vectors[at - len(batch) : at]

    return transform


def build(data_dir: Path, index_dir: Path) -> dict:
    """Build (or reuse) the txtai index of every chunk in the lodex index in `data_dir`."""
    import lancedb
    from txtai import Embeddings

    table = lancedb.connect(str(data_dir / "lance")).open_table("chunks")
    ids = np.sort(table.search().select(["id"]).limit(None).to_arrow()["id"].to_numpy())
    key = {"chunks": len(ids), "chunk_ids_sha1": hashlib.sha1(ids.tobytes()).hexdigest()}  # lodex serve moves the version
    marker = index_dir / "built.json"
    if marker.exists() and {k: v for k, v in json.loads(marker.read_text()).items() if k in key} == key:
        return {**json.loads(marker.read_text()), "reused": True}
    started = time.monotonic()
    rows = table.search().select(["text", "vector"]).limit(None).to_arrow()
    texts = rows["text"].to_pylist()
    vectors = np.ascontiguousarray(np.stack(rows["vector"].to_numpy(zero_copy_only=False)), dtype=np.float32)
    embeddings = Embeddings({**CONFIG, "transform": stored_vectors(texts, vectors)})
    embeddings.index((i, {"text": text}, None) for i, text in enumerate(texts))
    embeddings.config["transform"] = QUERY_TRANSFORM  # saved for the record; `serve`'s config sets it
    partial = index_dir.with_name(index_dir.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    embeddings.save(str(partial))
    shutil.rmtree(index_dir, ignore_errors=True)
    partial.rename(index_dir)
    info = {**key, "build_s": round(time.monotonic() - started, 1)}
    marker.write_text(json.dumps(info))
    return {**info, "reused": False}


def serve(index_dir: Path, port: int) -> None:
    """txtai's own API app on the saved index, queries encoded by `encode_queries`."""
    import uvicorn

    config = index_dir.with_name(index_dir.name + ".yml")
    config.write_text(json.dumps({"path": str(index_dir), "embeddings": {"transform": QUERY_TRANSFORM}}))
    os.environ["CONFIG"] = str(config)  # JSON is YAML; txtai.api reads it when the app starts
    uvicorn.run("txtai.api:app", host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    if sys.argv[1] == "build":
        print(json.dumps(build(Path(sys.argv[2]), Path(sys.argv[3]))))
    else:
        serve(Path(sys.argv[2]), int(sys.argv[3]))
