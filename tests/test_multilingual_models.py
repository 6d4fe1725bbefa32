"""Multilingual models end to end with a tiny random XLM-R (a sentencepiece Unigram tokenizer, positions offset by
padding_idx): a Chinese, German and English folder indexed and searched, E5's prompts, a BGE-M3-style long CLS-pooled
model, and the languages a model declares (the index's note, hybrid fusion)."""

import json
import os
import random
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from lodex.api.cli import app
from lodex.encoders.settings import EncoderSettings
from lodex.indexer.chunking.chunker import Chunker
from lodex.indexer.chunking.late_chunking import LateChunking, plan_windows
from lodex.indexer.pipeline import Indexer
from lodex.indexer.scanner import ScanRules
from lodex.indexer.settings import IndexSettings
from lodex.store.lance_store import LanceStore
from lodex.store.origin import make_origin
from tests.test_models import _copy, _encoder, onnx_cache, shared_cache  # noqa: F401 - one ONNX cache per module, as there
from tests.tiny_models import sentence_transformers_files
from tests.tiny_multilingual import model_card, prompts, sentence, tiny_xlmr

runner = CliRunner()
E5 = {"query": "query: ", "passage": "passage: "}


@pytest.fixture(scope="module")
def xlmr(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_xlmr(tmp_path_factory.mktemp("models") / "xlmr")


def _reference(path: Path, texts: list[str], pooling: str = "mean") -> np.ndarray:
    """By hand: each text alone (no padding) through AutoModel, the mean of its token states or its first (<s>),
    L2-normalized."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(str(path)), AutoModel.from_pretrained(str(path)).eval()
    rows = []
    for text in texts:
        ids = torch.tensor([tokenizer(text)["input_ids"]])
        with torch.inference_mode():
            hidden = model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state[0]
        rows.append((hidden[0] if pooling == "cls" else hidden.mean(dim=0)).numpy())
    out = np.stack(rows)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def _folder(root: Path) -> dict[str, str]:
    """Four Chinese documents, two German, one English (57% Chinese), several chunks each."""
    rng = random.Random(3)
    texts = {f"zh{i}.txt": "".join(sentence(rng, "zh") for _ in range(40)) for i in range(4)}
    texts |= {f"de{i}.txt": " ".join(sentence(rng, "de") for _ in range(30)) for i in range(2)}
    texts["en0.txt"] = " ".join(sentence(rng, "en") for _ in range(30))
    root.mkdir(parents=True)
    for name, text in texts.items():
        (root / name).write_text(text)
    return texts


def _search(*args: str) -> dict:
    result = runner.invoke(app, ["search", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_xlmr_indexes_and_searches_a_chinese_german_english_folder(xlmr: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model whose card lists zh, de and en: no note for a mostly Chinese folder, Chinese queries stay hybrid, and
    passages (late-chunked over XLM-R's offset positions) keep exact offsets with their words highlighted."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LODEX_ENCODER__MODEL", str(model_card(_copy(xlmr, tmp_path), ["zh", "de", "en"])))
    monkeypatch.setenv("LODEX_CHUNKING__LATE", "true")  # off by default for a new index: its offsets are what is tested here
    texts = _folder(tmp_path / "docs")
    result = runner.invoke(app, ["index", str(tmp_path / "docs")])
    assert result.exit_code == 0, result.output
    assert "of this folder is" not in result.output
    origin = json.loads((tmp_path / ".lodex" / "origin.json").read_text())
    assert origin["model_id"] == "model" and origin["late_chunking"]
    assert json.loads(runner.invoke(app, ["status", "--json"]).stdout)["languages"]["zh"] == 4
    for name in ("zh1.txt", "de0.txt", "en0.txt"):  # a document's opening finds it
        query = texts[name][:40] if name.startswith("zh") else texts[name][:120]
        found = _search(query, "-k", "3")
        assert found["mode"] == "hybrid" and found["results"][0]["path"] == name
        found = _search(query, "-k", "3", "--mode", "dense")
        assert found["results"] and np.isfinite(found["results"][0]["score"])
    found = _search("时钟同步", "-k", "3")
    assert found["mode"] == "hybrid" and found["results"]
    for hit in found["results"]:
        for passage in hit["passages"]:
            assert texts[hit["path"]][passage["char_start"] : passage["char_end"]] == passage["text"]
            assert all(re.fullmatch("(时钟|同步)+", passage["text"][a:b]) for a, b in passage["highlights"])  # words, side by side
    assert any(p["highlights"] for hit in found["results"] for p in hit["passages"])


def test_a_pulled_model_that_does_not_cover_the_folder_says_so_and_keywords_carry_it(
    xlmr: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """encoder.model as a pulled hub id whose card lists English only: the index notes the Chinese share once, and a
    Chinese hybrid query is answered by keywords (its vector would be near random); an English one stays hybrid."""
    monkeypatch.chdir(tmp_path)
    pulled = Path(os.environ["LODEX_ENCODER__CACHE_DIR"]) / "models" / "tiny--xlmr-en"
    if not pulled.exists():
        model_card(shutil.copytree(xlmr, pulled), ["en"])
    monkeypatch.setenv("LODEX_ENCODER__MODEL", "tiny/xlmr-en")
    _folder(tmp_path / "docs")
    result = runner.invoke(app, ["index", str(tmp_path / "docs")])
    assert result.exit_code == 0, result.output
    notes = re.findall(
        r"\d+% of this folder is Chinese; the model covers English only: keyword search carries these documents", result.output.replace("\n", " ")
    )
    assert notes == ["57% of this folder is Chinese; the model covers English only: keyword search carries these documents"]
    assert _search("时钟同步 网络", "-k", "3")["mode"] == "bm25"
    assert _search("how is the system clock kept in step with the network time servers", "-k", "3")["mode"] == "hybrid"


def test_xlmr_late_chunking_equals_chunks_encoded_alone_and_offsets_are_exact(xlmr: Path) -> None:
    """Sentencepiece spans ("▁" pieces of their own included, text NFKC rewrites) cut chunks at exact offsets; windows one chunk long pool
    exactly as the chunks encode alone (XLM-R's positions start at padding_idx + 1 in both)."""
    encoder = _encoder(xlmr)
    rng = random.Random(5)
    odd = "ＡＰＴ（全角）ﬁle… ①②  多  空格　全角😀𠀀。"  # what NFKC rewrites (widths, ligatures, circled digits), spaces, astral
    text = "".join(sentence(rng, "zh") + odd + sentence(rng, "de") + " " + sentence(rng, "en") for _ in range(12))
    chunker = Chunker(encoder.token_spans, 40, 8)
    chunks = chunker.chunk(text)
    assert len(chunks) > 5 and all(text[c.char_start : c.char_end] == c.text for c in chunks)
    naive = encoder.embed([c.text for c in chunks])
    windows = plan_windows(text, chunks, encoder.token_spans, 40, 0, pack=False)
    late = np.zeros_like(naive)
    for window, vectors in zip(windows, encoder.embed_windows(windows)):
        late[window.chunks] = vectors
    assert np.abs(late - naive).max() < 1e-5
    assert np.abs(naive - _reference(xlmr, [c.text for c in chunks])).max() < 1e-5


@pytest.mark.parametrize("late", [None, LateChunking(256, 32)])
def test_e5_prompts_go_before_passages_and_queries(xlmr: Path, tmp_path: Path, late: LateChunking | None) -> None:
    """config_sentence_transformers.json's {"query": "query: ", "passage": "passage: "}: an indexed chunk's vector is
    the model's encoding of "passage: " + its text, a query's of "query: " + it; lodex's config overrides both."""
    path = prompts(_copy(xlmr, tmp_path), E5)
    encoder = _encoder(path, fast_queries=False)
    assert (encoder.query_prefix, encoder.document_prefix) == ("query: ", "passage: ")
    assert encoder.origin()["document_prefix"] == "passage: "
    text = sentence(random.Random(1), "zh", 6) + " Die Systemuhr wird synchronisiert."
    root = tmp_path / "docs"
    root.mkdir()
    (root / "note.txt").write_text(text)
    store = LanceStore.open(tmp_path / "data", make_origin(encoder.origin(), 120, 8, late=late.origin() if late else None))
    Indexer(store, encoder, Chunker(encoder.token_spans, 120, 8), ScanRules(), IndexSettings(), late=late).run(root)
    rows = store.chunks_of_documents([r.id for r in store.document_records().values()], ["text", "vector"]).to_pylist()
    assert [r["text"] for r in rows] == [text]
    assert np.abs(np.asarray(rows[0]["vector"]) - _reference(path, ["passage: " + text])[0]).max() < 1e-5
    query = "时钟同步 clock"
    assert np.abs(encoder.embed_query(query) - _reference(path, ["query: " + query])[0]).max() < 1e-5
    assert np.abs(encoder.embed_query(query) - _reference(path, [query])[0]).max() > 1e-3  # the prompt is not idle
    ours = _encoder(path, query_prefix="search_query: ", document_prefix="search_document: ", fast_queries=False)
    assert (ours.query_prefix, ours.document_prefix) == ("search_query: ", "search_document: ")
    assert np.abs(ours.embed([text])[0] - _reference(path, ["search_document: " + text])[0]).max() < 1e-5
    store.close()


def test_a_bge_m3_style_model_pools_cls_over_long_windows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """XLM-R with 8,194 positions, CLS pooling declared in 1_Pooling/config.json and max_seq_length 8,192: a
    document of thousands of tokens is one chunk whose vector is its <s> state, and the index records cls pooling."""
    path = model_card(sentence_transformers_files(tiny_xlmr(tmp_path / "bge", window=8192, seed=1), "cls"), ["zh", "de", "en"])
    (path / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 8192, "do_lower_case": False}))
    encoder = _encoder(path, fast_queries=False)
    assert (encoder.pooling, encoder.max_length, encoder.window_limit) == ("cls", 8192, 8192)
    rng = random.Random(2)
    text = "".join(sentence(rng, "zh") + " " + sentence(rng, "de") + " " for _ in range(160))
    assert 2500 < len(encoder.token_spans([text])[0]) < 8000
    assert np.abs(encoder.embed([text])[0] - _reference(path, [text], "cls")[0]).max() < 1e-4
    assert np.abs(encoder.embed_query(text[:300]) - _reference(path, [text[:300]], "cls")[0]).max() < 1e-4
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LODEX_ENCODER__MODEL", str(path))
    monkeypatch.setenv("LODEX_CHUNKING__MAX_TOKENS", "8000")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "long.txt").write_text(text)
    result = runner.invoke(app, ["index", str(tmp_path / "docs"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["chunks"] == 1
    origin = json.loads((tmp_path / ".lodex" / "origin.json").read_text())
    assert origin["pooling"] == "cls" and not origin.get("late_chunking")  # "auto" leaves late chunking off for CLS
    assert _search(text[:200], "-k", "1", "--mode", "dense")["results"][0]["path"] == "long.txt"


def test_xlmr_exports_to_onnx_for_queries_and_fast_mode(xlmr: Path) -> None:
    """XLM-R's queries run on its float32 ONNX export (same vectors as PyTorch), and fast mode's int8 model passes the gate."""
    rng = random.Random(4)
    texts = [sentence(rng, language) for language in ("zh", "de", "en")] + ["时钟", "Die Systemuhr " * 40]
    exact = _encoder(xlmr, fast_queries=False)
    queries = np.stack([exact.embed_query(t) for t in texts])
    assert exact._queries is not None and not exact._query_fallback  # ONNX answered, not the PyTorch fallback
    assert np.abs(queries - exact.embed(texts)).max() < 1e-5
    fast = _encoder(xlmr, precision="fast")
    assert fast._fast is not None and ((exact.embed(texts) * fast.embed(texts)).sum(axis=1)).min() >= 0.95


def test_model_check_says_which_languages_a_model_declares(xlmr: Path, tmp_path: Path) -> None:
    path = prompts(model_card(_copy(xlmr, tmp_path), ["zh", "de", "en"]), E5)
    result = runner.invoke(app, ["model", "check", str(path), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["languages"] == {"value": ["de", "en", "zh"], "source": "README.md language:"}
    assert report["query_prefix"]["value"] == "query: " and report["document_prefix"]["value"] == "passage: "
    assert report["model_type"] == "xlm-roberta" and report["window"]["value"] == 512
    out = runner.invoke(app, ["model", "check", str(path)]).stdout
    assert "languages       de, en, zh  ← README.md language:" in out
    (path / "README.md").write_text("---\nlanguage: multilingual\n---\n")
    out = runner.invoke(app, ["model", "check", str(path)]).stdout
    assert "languages       any  ← README.md language: multilingual (every language)" in out


def test_a_cold_search_encodes_e5_queries_as_the_full_encoder(xlmr: Path, tmp_path: Path) -> None:
    """The recipe a cold `lodex search` rebuilds its query encoder from (tokenizers + ONNX Runtime, no PyTorch) keeps
    XLM-R's tokenizer, its pad id (1: positions are counted from it) and E5's query prompt."""
    from lodex.encoders.query_encoder import load_query_encoder

    path = prompts(_copy(xlmr, tmp_path), E5)
    cfg = EncoderSettings(model=str(path), fast_queries=False, cache_dir=os.environ["LODEX_ENCODER__CACHE_DIR"], precision="exact")
    full = _encoder(path, fast_queries=False)
    queries = ["时钟同步", "Wie synchronisiert man die Systemuhr mit dem Netzwerk?", "時刻同期の問題 " * 30, "a"]
    expected = full.embed(queries, kind="query")
    light = load_query_encoder(cfg)
    assert light is not None and light.query_prefix == "query: "
    assert np.abs(light.embed(queries, kind="query") - expected).max() < 1e-5
    assert np.abs(expected - _reference(path, ["query: " + q for q in queries])).max() < 1e-5
