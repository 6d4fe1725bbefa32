"""The peer pipelines of bench/indexing/pipelines.py, run in the peers' venv (bench/.peers-venv), one process per step.

usage: python bench/peers/pipeline_peers.py index PIPELINE FOLDER WORK MODEL_DIR      (prints one JSON line: chunks, notes)
       python bench/peers/pipeline_peers.py query PIPELINE WORK MODEL_DIR QUESTIONS OUT
PIPELINE: txtai | llamaindex | handrolled. `index` reads every file of FOLDER, chunks, encodes with the model in
MODEL_DIR (the bundled all-MiniLM-L6-v2) and saves the index in WORK, as a user of that library would; `query` loads
it and writes {question id: [files, best first]} (documents ranked by their best chunk) to OUT.
- txtai 9: `Textractor(paragraphs=True)` (its documented segmentation: HTML to Markdown with BeautifulSoup, split at
  blank lines; PDFs through the first file backend it finds: Tika, Docling or LiteParse, here LiteParse with its OCR
  off) feeding `Embeddings.index` (sentence-transformers vectors, its default FAISS index), saved.
- LlamaIndex: `SimpleDirectoryReader` (its default readers: pypdf per page for PDF, the file's text otherwise, HTML
  tags and all), an `IngestionPipeline` of `SentenceSplitter` (256 of the model's tokens, 32 overlap: the model's
  window) and `HuggingFaceEmbedding`, then `VectorStoreIndex` persisted to disk.
- handrolled: the script one writes by hand: read (.txt as UTF-8, HTML through the standard library's HTMLParser, PDF
  with pypdf), windows of 160 words (stride 128), sentence-transformers `encode`, FAISS `IndexFlatIP`, saved.
"""

import json
import os
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.indexing.pipeline_scores import documents_by_best_chunk  # noqa: E402

CHUNKS_PER_QUESTION = 100  # chunks retrieved per question, ranked into documents by their best chunk
WORDS, STRIDE = 160, 128


def files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


# --- txtai -------------------------------------------------------------------------------------------------------


def txtai_index(folder: Path, work: Path, model: str) -> dict:
    from txtai import Embeddings
    from txtai.pipeline import Segmentation, Textractor

    textractor = Textractor(paragraphs=True)
    plain = Segmentation(paragraphs=True)  # text files: the same paragraph split, without a document backend
    backend = type(textractor.html.backend).__name__ if textractor.html and textractor.html.backend else None
    has_pdf = any(p.suffix.lower() == ".pdf" for p in files(folder))
    notes = [f"PDFs read by txtai's {backend or 'no'} backend"] if has_pdf else []
    if backend == "LiteParse":  # its OCR (on by default) fetches Tesseract's model from the network: off, as lodex's
        import liteparse

        textractor.html.backend.liteparse = liteparse.LiteParse(output_format="markdown", ocr_enabled=False, quiet=True)
        notes = [n + " (OCR off: these PDFs carry their text; offline it would fetch a Tesseract model)" for n in notes]
    count = 0

    def stream() -> Iterator[tuple[str, str, None]]:
        nonlocal count
        for path in files(folder):
            rel = path.relative_to(folder).as_posix()
            if path.suffix.lower() == ".pdf" and backend is None:
                continue
            parts = plain(path.read_text(encoding="utf-8", errors="replace")) if path.suffix.lower() == ".txt" else textractor(str(path))
            for n, text in enumerate(parts):
                count += 1
                yield f"{rel}#{n}", text, None

    embeddings = Embeddings(path=model, content=False)
    embeddings.index(stream())
    embeddings.save(str(work / "txtai"))
    if backend is None and has_pdf:
        notes.append("PDFs skipped: txtai reads them only through Tika (Java), Docling or LiteParse")
    return {"chunks": count, "notes": notes}


def txtai_query(work: Path, model: str, questions: dict[str, str]) -> dict[str, list[str]]:
    from txtai import Embeddings

    embeddings = Embeddings()
    embeddings.load(str(work / "txtai"))
    runs = {}
    for qid, text in questions.items():
        hits = embeddings.search(text, limit=CHUNKS_PER_QUESTION)
        runs[qid] = documents_by_best_chunk(str(uid).rsplit("#", 1)[0] for uid, _ in hits)
    return runs


# --- LlamaIndex --------------------------------------------------------------------------------------------------


def _llama_embedding(model: str):  # noqa: ANN202 - a HuggingFaceEmbedding
    from llama_index.core import Settings
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    Settings.llm = None  # no LLM: retrieval only
    embedding = HuggingFaceEmbedding(model_name=model, device="cpu")
    Settings.embed_model = embedding
    return embedding


def llamaindex_index(folder: Path, work: Path, model: str) -> dict:
    from llama_index.core import SimpleDirectoryReader, VectorStoreIndex
    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.core.node_parser import SentenceSplitter
    from transformers import AutoTokenizer

    embedding = _llama_embedding(model)
    documents = SimpleDirectoryReader(str(folder), recursive=True).load_data()
    tokenize = AutoTokenizer.from_pretrained(model).tokenize
    pipeline = IngestionPipeline(transformations=[SentenceSplitter(chunk_size=256, chunk_overlap=32, tokenizer=tokenize), embedding])
    nodes = pipeline.run(documents=documents)
    index = VectorStoreIndex(nodes, embed_model=embedding)
    index.storage_context.persist(persist_dir=str(work / "llamaindex"))
    (work / "llamaindex-root.txt").write_text(str(folder.resolve()), encoding="utf-8")
    notes = [f"{len(documents)} LlamaIndex documents"]
    if any(p.suffix.lower() in (".html", ".htm") for p in files(folder)):
        notes.append("HTML read as plain text, tags and all: SimpleDirectoryReader has no default reader for .html")
    return {"chunks": len(nodes), "notes": notes}


def llamaindex_query(work: Path, model: str, questions: dict[str, str]) -> dict[str, list[str]]:
    from llama_index.core import StorageContext, load_index_from_storage

    embedding = _llama_embedding(model)
    root = Path((work / "llamaindex-root.txt").read_text(encoding="utf-8"))
    index = load_index_from_storage(StorageContext.from_defaults(persist_dir=str(work / "llamaindex")), embed_model=embedding)
    retriever = index.as_retriever(similarity_top_k=CHUNKS_PER_QUESTION)
    runs = {}
    for qid, text in questions.items():
        hits = retriever.retrieve(text)
        runs[qid] = documents_by_best_chunk(Path(h.node.metadata["file_path"]).resolve().relative_to(root).as_posix() for h in hits)
    return runs


# --- hand-rolled -------------------------------------------------------------------------------------------------


class _Text(HTMLParser):
    """The text of an HTML page, scripts and styles aside."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.skip += tag in ("script", "style")

    def handle_endtag(self, tag: str) -> None:
        self.skip -= tag in ("script", "style") and self.skip > 0

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.parts.append(data)


def read_text(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        from pypdf import PdfReader

        return "\n".join(page.extract_text() or "" for page in PdfReader(path).pages)
    text = path.read_text(encoding="utf-8", errors="replace")
    if suffix in (".html", ".htm"):
        parser = _Text()
        parser.feed(text)
        return " ".join(parser.parts)
    return text


def windows(text: str) -> list[str]:
    words = text.split()
    return [" ".join(words[i : i + WORDS]) for i in range(0, max(len(words) - (WORDS - STRIDE), 1), STRIDE)] if words else []


def handrolled_index(folder: Path, work: Path, model: str) -> dict:
    import faiss
    from sentence_transformers import SentenceTransformer

    texts, owners = [], []
    for path in files(folder):
        for chunk in windows(read_text(path)):
            texts.append(chunk)
            owners.append(path.relative_to(folder).as_posix())
    encoder = SentenceTransformer(model, device="cpu")
    vectors = encoder.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    faiss.write_index(index, str(work / "handrolled.faiss"))
    (work / "handrolled-owners.json").write_text(json.dumps(owners), encoding="utf-8")
    return {"chunks": len(texts), "notes": []}


def handrolled_query(work: Path, model: str, questions: dict[str, str]) -> dict[str, list[str]]:
    import faiss
    from sentence_transformers import SentenceTransformer

    index = faiss.read_index(str(work / "handrolled.faiss"))
    owners = json.loads((work / "handrolled-owners.json").read_text(encoding="utf-8"))
    encoder = SentenceTransformer(model, device="cpu")
    qids = list(questions)
    vectors = encoder.encode([questions[q] for q in qids], normalize_embeddings=True, convert_to_numpy=True)
    _, hits = index.search(vectors, min(CHUNKS_PER_QUESTION, index.ntotal))
    return {q: documents_by_best_chunk(owners[h] for h in row if h >= 0) for q, row in zip(qids, hits)}


PIPELINES = {
    "txtai": (txtai_index, txtai_query),
    "llamaindex": (llamaindex_index, llamaindex_query),
    "handrolled": (handrolled_index, handrolled_query),
}


def main() -> None:
    step, name = sys.argv[1], sys.argv[2]
    index, query = PIPELINES[name]
    if step == "index":
        folder, work, model = Path(sys.argv[3]), Path(sys.argv[4]), sys.argv[5]
        work.mkdir(parents=True, exist_ok=True)
        print(json.dumps(index(folder, work, model)))
    else:
        work, model, questions, out = Path(sys.argv[3]), sys.argv[4], Path(sys.argv[5]), Path(sys.argv[6])
        runs = query(work, model, json.loads(questions.read_text(encoding="utf-8")))
        out.write_text(json.dumps(runs), encoding="utf-8")


if __name__ == "__main__":
    main()
