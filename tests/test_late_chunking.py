"""Late chunking: windows planned over whole chunks, spans pooled exactly, plain chunking reproduced when a window is
one chunk, edits re-encoding only the windows they touch, long windows on long-context models."""

import json
import resource
from pathlib import Path

import numpy as np
import pytest

from lodex.encoders.settings import EncoderSettings
from lodex.encoders.transformers_encoder import TransformersEncoder
from lodex.indexer.chunking.chunker import Chunker
from lodex.indexer.chunking.late_chunking import LateChunking, late_chunking, plan_windows
from lodex.indexer.pipeline import Indexer
from lodex.indexer.scanner import ScanRules
from lodex.indexer.settings import IndexSettings
from lodex.store.errors import ConfigError
from lodex.store.lance_store import LanceStore
from lodex.store.manifest import IndexManifest
from lodex.store.origin import make_origin
from tests.conftest import EVALDATA
from tests.fakes import FakeEncoder
from tests.tiny_models import tiny_model, tokenizer_options


def _long_text(documents: int = 30) -> str:
    """Real abstracts (Cranfield) joined into one long document."""
    with (EVALDATA / "cranfield" / "corpus.jsonl").open() as fh:
        docs = [json.loads(line) for _, line in zip(range(documents), fh)]
    return "\n\n".join(f"{d['title']}\n{d['text']}" for d in docs)


def _late_vectors(encoder, text: str, chunker: Chunker, window: int, margin: int, pack: bool = True) -> np.ndarray:
    chunks = chunker.chunk(text)
    windows = plan_windows(text, chunks, encoder.token_spans, window - encoder.special_tokens, margin, pack)
    out = np.zeros((len(chunks), encoder.dim), np.float32)
    for w, vectors in zip(windows, encoder.embed_windows(windows)):
        out[w.chunks] = vectors
    return out


def test_windows_hold_whole_chunks_within_the_budget(real_encoder) -> None:
    text = _long_text()
    chunks = Chunker(real_encoder.token_spans, 126, 32).chunk(text)
    for budget, margin in ((254, 32), (510, 64), (126, 0)):
        windows = plan_windows(text, chunks, real_encoder.token_spans, budget, margin)
        assert [i for w in windows for i in w.chunks] == list(range(len(chunks)))  # every chunk once, in order
        for w in windows:
            assert w.tokens <= budget or len(w.chunks) == 1
            assert len(real_encoder.token_spans([w.text])[0]) == w.tokens  # the planned count is the window's own
            for i, (a, b) in zip(w.chunks, w.spans):
                assert w.text[a:b] == chunks[i].text
        if budget > 200:
            assert len(windows) < len(chunks) / 1.5  # windows do hold several chunks


def test_late_equals_naive_when_the_window_is_the_chunk(real_encoder) -> None:
    text = _long_text(12)
    chunker = Chunker(real_encoder.token_spans, 126, 32)
    naive = real_encoder.embed([c.text for c in chunker.chunk(text)])
    late = _late_vectors(real_encoder, text, chunker, 128, 0, pack=False)
    assert np.abs(late - naive).max() < 1e-5


def test_each_chunk_is_pooled_from_exactly_its_own_span(real_encoder) -> None:
    """A reference computation by hand: the window through the model, the mean of the token states whose offsets
    lie in the chunk's span (with [CLS] for the window's first chunk, [SEP] for its last), normalized."""
    import torch

    text = _long_text(6)
    chunker = Chunker(real_encoder.token_spans, 62, 8)
    chunks = chunker.chunk(text)
    windows = plan_windows(text, chunks, real_encoder.token_spans, 254, 16)
    window = next(w for w in windows if len(w.chunks) >= 3)
    vectors = real_encoder.embed_windows([window])[0]
    batch = real_encoder.tokenizer([window.text], return_offsets_mapping=True, return_tensors="pt")
    offsets = batch.pop("offset_mapping")[0].numpy()
    with torch.inference_mode():
        hidden = real_encoder.model(**batch).last_hidden_state[0].numpy()
    for k, (a, b) in enumerate(window.spans):
        inside = [t for t in range(1, len(offsets) - 1) if offsets[t][0] >= a and offsets[t][1] <= b]
        if k == 0 and a == 0:
            inside = [0, *inside]
        if k == len(window.spans) - 1 and b == len(window.text):
            inside = [*inside, len(offsets) - 1]
        expected = hidden[inside].mean(axis=0)
        expected /= np.linalg.norm(expected)
        assert np.abs(vectors[k] - expected).max() < 1e-5


def test_a_chunk_sees_its_window_and_nothing_beyond(real_encoder) -> None:
    """A word planted in the middle of a window changes the vectors of that window's chunks (their context), not
    those of other windows (whose margins do not reach it)."""
    text = _long_text(10)
    chunker = Chunker(real_encoder.token_spans, 126, 32)
    chunks = chunker.chunk(text)
    windows = plan_windows(text, chunks, real_encoder.token_spans, 510, 32)
    target = next(w for w in windows[1:] if len(w.chunks) >= 3)
    planted_in = chunks[target.chunks[len(target.chunks) // 2]]
    cut = text.index(" ", (planted_in.char_start + planted_in.char_end) // 2)
    edited = text[:cut] + " quokka" + text[cut:]
    edited_chunks = chunker.chunk(edited)
    assert [w.chunks for w in plan_windows(edited, edited_chunks, real_encoder.token_spans, 510, 32)] == [w.chunks for w in windows]
    before = _late_vectors(real_encoder, text, chunker, 512, 32)
    after = _late_vectors(real_encoder, edited, chunker, 512, 32)
    others = [i for w in windows if w is not target for i in w.chunks if i not in target.chunks]
    neighbours = [i for i in target.chunks if chunks[i] is not planted_in and edited_chunks[i].text == chunks[i].text]
    assert np.abs(after[others] - before[others]).max() < 1e-5
    assert neighbours and all(float(after[i] @ before[i]) < 0.99999 for i in neighbours)


def test_settings_are_checked_against_the_model() -> None:
    assert late_chunking(False, 0, 32, 128, 512) is None
    assert late_chunking(True, 0, 32, 128, 512) == LateChunking(256, 32)  # twice the chunk by default
    assert late_chunking(True, 0, 32, 128, 200) == LateChunking(200, 32)  # within the model's window
    with pytest.raises(ConfigError, match="CLS"):
        late_chunking(True, 0, 32, 128, 512, pooling="cls")
    with pytest.raises(ConfigError, match="longer than the model reads"):
        late_chunking(True, 1024, 32, 128, 512)
    with pytest.raises(ConfigError, match="shorter than a chunk"):
        late_chunking(True, 64, 32, 128, 512)


def _indexer(data: Path, encoder, late: LateChunking | None) -> tuple[LanceStore, Indexer]:
    size = 30
    store = LanceStore.open(data, make_origin(encoder.origin(), size, 4, late=late.origin() if late else None))
    return store, Indexer(store, encoder, Chunker(encoder.token_spans, size, 4), ScanRules(), IndexSettings(flush_tokens=2048), late=late)


def _paragraphs(n: int, tag: str = "") -> str:
    return "\n\n".join(f"Paragraph {i} {tag if i == 7 else ''} about wings, drag and boundary layers in flow number {i}." for i in range(n))


def _chunks(store: LanceStore, columns: list[str]) -> list[dict]:
    rows = store.chunks_of_documents([r.id for r in store.document_records().values()], columns).to_pylist()
    return sorted(rows, key=lambda r: (r["char_start"], r["text"]))


def test_late_indexes_the_same_chunks_and_an_edit_reencodes_only_its_windows(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "long.txt").write_text(_paragraphs(40))
    (root / "other.txt").write_text("A short note on lift.\n\nAnd one on drag.")
    plain_store, plain = _indexer(tmp_path / "plain", FakeEncoder(), None)
    plain.run(root)
    encoder = FakeEncoder()
    store, indexer = _indexer(tmp_path / "late", encoder, LateChunking(130, 8))
    indexer.run(root)
    columns = ["ordinal", "char_start", "char_end", "text"]
    assert _chunks(store, columns) == _chunks(plain_store, columns)
    before = {r["text"]: np.asarray(r["vector"]) for r in _chunks(store, ["char_start", "text", "vector"])}
    encoded_before = encoder.texts_encoded
    (root / "long.txt").write_text(_paragraphs(40, tag="quokka"))  # one paragraph changed
    indexer.run(root)
    after = {r["text"]: np.asarray(r["vector"]) for r in _chunks(store, ["char_start", "text", "vector"])}
    reencoded = encoder.texts_encoded - encoded_before
    assert 0 < reencoded < len(after) / 3  # the windows around the edit, not the whole document
    kept = [key for key in after if key in before]
    moved = [key for key in kept if not np.allclose(after[key], before[key])]
    assert 0 < len(moved) < reencoded  # unchanged chunks beside the edit got new context; the others kept their vectors
    assert len(kept) > len(after) / 2
    assert IndexManifest.read(tmp_path / "late").record["late_chunking"] == {"window_tokens": 130, "margin": 8}


# ModernBERT builds its sliding-window attention mask over the whole window (tokens x tokens, ~0.3 GiB at 8k in float32,
# plus its boolean forms), once per forward, whatever its heads and layers; LFM2's convolutions and attention need none.
@pytest.mark.parametrize(("kind", "bound_mib"), [("modernbert", 1200), ("lfm2", 256)])
def test_an_8k_window_runs_with_bounded_memory(tmp_path: Path, kind: str, bound_mib: int) -> None:
    model = tiny_model(kind, tmp_path / kind, window=8192)
    encoder = TransformersEncoder(EncoderSettings(model=str(model), precision="exact"))
    assert encoder.window_limit == 8192
    text = " ".join(f"word{i % 997} flows past the wing." for i in range(850))
    chunker = Chunker(encoder.token_spans, 126, 16)
    chunks = chunker.chunk(text)
    windows = plan_windows(text, chunks, encoder.token_spans, 8192 - encoder.special_tokens, 64)
    assert len(windows) == 1 and 6000 < windows[0].tokens <= 8190
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    vectors = encoder.embed_windows(windows)[0]
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) / 1024
    assert vectors.shape == (len(chunks), encoder.dim) and np.isfinite(vectors).all()
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    assert grown_mib < bound_mib  # attention scores in float32 would take 256 MiB per head and layer at 8k


@pytest.mark.parametrize("kind", ["bert", "modernbert", "lfm2", "qwen3", "qwen3-left-eos"])
def test_late_equals_naive_at_window_equal_chunk_for_every_architecture(tmp_path: Path, kind: str) -> None:
    """Each architecture's windows pool exactly as its chunks encode alone (a decoder: its last real token, on the
    tokenizer's padding side, after the EOS the encoder appends); with longer windows the chunks see their context."""
    model = tiny_model(kind.split("-")[0], tmp_path / kind)
    if kind == "qwen3-left-eos":
        tokenizer_options(model, padding_side="left", special_tokens=False)  # lodex appends the EOS itself
    encoder = TransformersEncoder(EncoderSettings(model=str(model), precision="exact"))
    text = _long_text(6)
    chunker = Chunker(encoder.token_spans, 40, 8)
    chunks = chunker.chunk(text)
    naive = encoder.embed([c.text for c in chunks])
    late = _late_vectors(encoder, text, chunker, 40 + encoder.special_tokens, 0, pack=False)
    assert np.abs(late - naive).max() < 1e-5
    wide = _late_vectors(encoder, text, chunker, 256, 16)
    assert float(np.mean(np.sum(wide * naive, axis=1))) < 0.9999


def test_late_windows_take_the_title_as_their_first_chunk_takes_a_prefix(tmp_path: Path) -> None:
    from lodex.api.factory import build_encoder, build_indexer, open_store
    from lodex.api.settings import Settings

    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.md").write_text("# Wings\n\n" + _paragraphs(40))
    settings = Settings(base_dir=tmp_path)
    settings.encoder.backend, settings.chunking.title_prefix, settings.chunking.late = "fake", True, True
    encoder = build_encoder(settings)
    leads: list[str] = []
    real = encoder.embed_windows
    encoder.embed_windows = lambda windows, given=None: leads.extend(given or []) or real(windows, given)  # type: ignore[method-assign]
    build_indexer(settings, encoder, open_store(settings, encoder, tmp_path / "data", create=True)).run(root)
    assert leads and set(leads) == {"Wings\n\n"}
    assert json.loads((tmp_path / "data" / "origin.json").read_text())["late_chunking"] == {"window_tokens": 256, "margin": 32, "for": "long"}


def test_auto_keeps_an_existing_index_as_it_was_built(tmp_path: Path) -> None:
    """An index built before late chunking (or with it off) opens and grows with plain chunking under "auto", and an
    index built with it keeps it; a new index gets plain chunking (issue 39: late chunking lost on short abstracts);
    an explicit setting that differs from the index is refused with the rebuild hint."""
    from lodex.api.factory import build_encoder, open_store
    from lodex.api.index_policy import late_plan
    from lodex.api.settings import Settings
    from lodex.store.errors import OriginMismatchError

    settings = Settings(base_dir=tmp_path)
    settings.encoder.backend = "fake"
    encoder = build_encoder(settings)
    settings.chunking.late = False
    open_store(settings, encoder, tmp_path / "plain", create=True)
    settings.chunking.late = "auto"
    assert late_plan(settings, encoder, IndexManifest.read(tmp_path / "plain")) is None
    open_store(settings, encoder, tmp_path / "plain", create=True)  # opens, no rebuild asked
    assert late_plan(settings, encoder, IndexManifest.read(tmp_path / "new")) is None
    settings.chunking.late = True
    open_store(settings, encoder, tmp_path / "late", create=True)
    settings.chunking.late = "auto"
    assert late_plan(settings, encoder, IndexManifest.read(tmp_path / "late")) == LateChunking(256, 32, long_only=True)
    open_store(settings, encoder, tmp_path / "late", create=True)  # opens, no rebuild asked
    settings.chunking.late = True
    with pytest.raises(OriginMismatchError, match="late_chunking"):
        open_store(settings, encoder, tmp_path / "plain", create=False)


def test_a_chunk_cut_off_by_the_window_is_encoded_alone(real_encoder, monkeypatch: pytest.MonkeyPatch) -> None:
    """Text that tokenizes longer inside a window than planned (a byte-level tokenizer on a long unbroken run) is cut
    at the model's window: the chunks past the cut are encoded alone, never left as zero vectors."""
    text = _long_text(6)
    chunker = Chunker(real_encoder.token_spans, 62, 8)
    chunks = chunker.chunk(text)
    windows = plan_windows(text, chunks, real_encoder.token_spans, 254, 16)
    window = next(w for w in windows if len(w.chunks) >= 3)
    monkeypatch.setattr(real_encoder, "window_limit", 70)  # the window holds ~250 tokens: its later chunks are cut off
    vectors = real_encoder.embed_windows([window])[0]
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    alone = real_encoder.embed([chunks[window.chunks[-1]].text])[0]
    assert np.abs(vectors[-1] - alone).max() < 1e-5
