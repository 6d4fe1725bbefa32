"""A hand-rolled peer for bench/serving/load.py --peer: FastAPI + sentence-transformers + a FAISS flat index over the chunks of
a lodex index (the same texts and vectors), dense search only, as a user would write it in a page of code.

usage: python bench/peers/peer_server.py DATA_DIR PORT
"""

import sys
from pathlib import Path

import faiss
import lancedb
import numpy as np
import uvicorn
from fastapi import FastAPI
from sentence_transformers import SentenceTransformer

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from lodex.encoders.transformers_encoder import bundled_model_dir  # noqa: E402


def make_app(data_dir: Path) -> FastAPI:
    """The peer's app: every chunk's text and vector loaded from the lodex index in `data_dir`."""
    rows = lancedb.connect(str(data_dir / "lance")).open_table("chunks").search().select(["text", "vector"]).limit(None).to_arrow()
    texts = rows["text"].to_pylist()
    vectors = np.ascontiguousarray(np.stack(rows["vector"].to_numpy(zero_copy_only=False)), dtype=np.float32)
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    model = SentenceTransformer(str(bundled_model_dir()), device="cpu")
    app = FastAPI()

    @app.get("/search")
    def search(q: str, k: int = 10) -> dict:
        query = model.encode([q], normalize_embeddings=True, convert_to_numpy=True)
        scores, ids = index.search(query, k)
        return {"results": [{"text": texts[i], "score": float(s)} for s, i in zip(scores[0], ids[0]) if i >= 0]}

    @app.get("/ready")
    def ready() -> dict:
        return {"ready": True, "indexing": False, "chunks": len(texts)}

    return app


if __name__ == "__main__":
    uvicorn.run(make_app(Path(sys.argv[1])), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
