"""Chunking: token limits, overlap, boundary preference, exact offsets, linear on huge one-line files."""

import random

import numpy as np
import pytest

from lodex.indexer.chunking.chunker import Chunker
from tests.fakes import FakeEncoder


def _sentences(n: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    words = "lift drag wing flow boundary layer shock wave pressure heat plate".split()
    return " ".join(" ".join(rng.choice(words) for _ in range(rng.randint(5, 12))).capitalize() + "." for _ in range(n))


@pytest.fixture
def fake_chunker() -> Chunker:
    return Chunker(FakeEncoder().token_spans, max_tokens=40, overlap=8)


def test_offsets_are_exact_and_cover_the_text(fake_chunker: Chunker) -> None:
    text = "\n\n".join(_sentences(6, seed) for seed in range(5))
    chunks = fake_chunker.chunk(text)
    assert len(chunks) > 5
    for i, chunk in enumerate(chunks):
        assert chunk.ordinal == i
        assert text[chunk.char_start : chunk.char_end] == chunk.text
        assert chunk.token_count <= 40
    assert chunks[0].char_start == 0 and chunks[-1].char_end == len(text)
    for a, b in zip(chunks, chunks[1:]):
        assert b.char_start < a.char_end, "consecutive chunks overlap"
        assert b.char_start > a.char_start


def test_cuts_prefer_paragraphs_then_sentences(fake_chunker: Chunker) -> None:
    para_a = "Alpha beta gamma delta epsilon. " * 5  # 30 tokens
    para_b = "Zeta eta theta iota kappa. " * 5
    chunks = fake_chunker.chunk(para_a.strip() + "\n\n" + para_b.strip())
    assert chunks[0].text == para_a.strip()
    one_para = "Short sentence one here now. " * 12
    for chunk in fake_chunker.chunk(one_para.strip())[:-1]:
        assert chunk.text.endswith("."), chunk.text


def test_words_are_never_split_when_avoidable(fake_chunker: Chunker) -> None:
    text = " ".join(f"word{i}" for i in range(500))
    for chunk in fake_chunker.chunk(text):
        assert text[chunk.char_start - 1 : chunk.char_start] in ("", " ")
        assert text[chunk.char_end : chunk.char_end + 1] in ("", " ")


def test_overlap_is_about_the_configured_tokens() -> None:
    encoder = FakeEncoder()
    chunker = Chunker(encoder.token_spans, max_tokens=50, overlap=10)
    text = " ".join(f"w{i}" for i in range(1000))
    chunks = chunker.chunk(text)
    for a, b in zip(chunks, chunks[1:]):
        shared = len(encoder.token_spans([text[b.char_start : a.char_end]])[0])
        assert shared == 10


def test_empty_and_whitespace_text_give_no_chunks(fake_chunker: Chunker) -> None:
    assert fake_chunker.chunk("") == []
    assert fake_chunker.chunk("   \n\n  ") == []


def test_invalid_settings_refused() -> None:
    with pytest.raises(ValueError):
        Chunker(FakeEncoder().token_spans, max_tokens=40, overlap=30)


@pytest.mark.slow
def test_real_tokenizer_respects_the_model_window(real_encoder) -> None:
    chunker = Chunker(real_encoder.token_spans, max_tokens=254, overlap=32)
    text = "\n\n".join(_sentences(15, seed) for seed in range(10))
    chunks = chunker.chunk(text)
    lengths = real_encoder.token_lengths([c.text for c in chunks])
    assert max(lengths) <= 256
    assert all(text[c.char_start : c.char_end] == c.text for c in chunks)


@pytest.mark.slow
def test_twenty_megabyte_single_line_is_linear(real_encoder) -> None:
    """A 20 MB file with no newline: each char is tokenized once, in bounded calls (no quadratic work)."""
    calls: list[int] = []

    def counting_spans(texts: list[str]) -> list[np.ndarray]:
        calls.append(sum(len(t) for t in texts))
        return real_encoder.token_spans(texts)

    chunker = Chunker(counting_spans, max_tokens=254, overlap=32)
    rng = random.Random(1)
    words = "supersonic boundary layer heat transfer over a flat plate with pressure gradient".split()
    text = " ".join(rng.choice(words) for _ in range(3_400_000))[:20_000_000]
    chunks = chunker.chunk(text)
    assert sum(calls) == len(text)
    assert max(calls) <= 8 * 32_768
    assert chunks[-1].char_end == len(text.rstrip())
    assert all(c.token_count <= 254 for c in chunks)
    starts = np.array([c.char_start for c in chunks])
    assert np.all(np.diff(starts) > 0)
    # every chunk advances by (max - overlap) tokens or so: no pathological tiny chunks
    assert len(chunks) < len(text) / 4 / (254 - 32 - 20)


def test_chunks_of_paged_text_never_cross_a_page() -> None:
    from tests.fakes import FakeEncoder

    enc = FakeEncoder()
    pages = ["page one words " * 20, "page two words " * 3, "page three words " * 30]
    text = "\n\n".join(pages)
    starts = [0, len(pages[0]) + 2, len(pages[0]) + len(pages[1]) + 4]
    chunks = Chunker(enc.token_spans, 16, 4).chunk_parts(text, starts)
    bounds = [*starts, len(text)]
    for c in chunks:
        assert any(a <= c.char_start and c.char_end <= b for a, b in zip(bounds, bounds[1:])), c
        assert text[c.char_start : c.char_end] == c.text
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    assert Chunker(enc.token_spans, 16, 4).chunk_parts(text, None) == Chunker(enc.token_spans, 16, 4).chunk(text)


def test_chinese_text_is_cut_at_its_full_stops_with_exact_offsets(real_encoder) -> None:
    """Chinese sentences end at 。！？；… (a closing quote kept with them): passages end there, offsets are exact, and
    a passage cut mid-sentence is cut between words, never inside one."""
    import rjieba

    rng = random.Random(7)
    words = "系统管理员 软件包 安装 时钟同步 网络 配置文件 服务器 内核模块 用户 权限 备份 数据".split()
    text = "".join(
        "".join(rng.choice(words) for _ in range(rng.randint(3, 9))) + rng.choice(["。", "！", "？", "；", "……", "。」"]) for _ in range(60)
    )
    chunker = Chunker(real_encoder.token_spans, max_tokens=40, overlap=8)
    chunks = chunker.chunk(text)
    assert len(chunks) > 10
    for c in chunks:
        assert text[c.char_start : c.char_end] == c.text and c.token_count <= 40
    ends = [c for c in chunks[:-1] if c.text.endswith(("。", "！", "？", "；", "…", "」"))]
    assert len(ends) >= 0.8 * (len(chunks) - 1)
    bounds = {0}
    for w in rjieba.cut(text):
        bounds.add(max(bounds) + len(w))
    assert all(c.char_start in bounds and c.char_end in bounds for c in chunks)
