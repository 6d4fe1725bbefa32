"""Encoding detection, BOMs, binary rejection and invisible-character removal."""

import codecs

import pytest

from lodex.indexer.errors import ReadError
from lodex.indexer.readers.decoding import decode

FRENCH = "Le café de la gare est très agréable, déjà ouvert à l'été, où l'on goûte une crème brûlée."
CHINESE = "这是一个中文文档，用于测试编码检测。向量检索系统需要正确读取中文文本，长文档语义搜索在本地运行。"


@pytest.mark.parametrize(
    "data, expected",
    [
        (FRENCH.encode("utf-8"), "utf-8"),
        (codecs.BOM_UTF8 + FRENCH.encode("utf-8"), "utf-8-bom"),
        (codecs.BOM_UTF16_LE + FRENCH.encode("utf-16-le"), "utf-16-le-bom"),
        (codecs.BOM_UTF16_BE + FRENCH.encode("utf-16-be"), "utf-16-be-bom"),
        (codecs.BOM_UTF16_LE + CHINESE.encode("utf-16-le"), "utf-16-le-bom"),
    ],
)
def test_unicode_with_and_without_bom(data: bytes, expected: str) -> None:
    text, encoding = decode(data)
    assert encoding == expected
    assert text in (FRENCH, CHINESE)
    assert "\ufeff" not in text


@pytest.mark.parametrize("codec", ["gbk", "gb18030"])
def test_chinese_legacy_encodings(codec: str) -> None:
    text, encoding = decode(CHINESE.encode(codec))
    assert text == CHINESE
    assert encoding == "gb18030"


def test_latin1_fallback() -> None:
    text, encoding = decode(FRENCH.encode("latin-1"))
    assert text == FRENCH
    assert encoding in ("cp1252", "latin-1")


def test_invisible_controls_removed_and_newlines_normalized() -> None:
    text, _ = decode("a\u200bb\x07c\r\nd\re\u00adf\tg".encode("utf-8"))
    assert text == "abc\nd\nef\tg"


def test_nul_bytes_are_binary() -> None:
    with pytest.raises(ReadError, match="binary"):
        decode(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))


def test_control_heavy_bytes_are_binary() -> None:
    with pytest.raises(ReadError, match="binary"):
        decode(bytes([1, 2, 3, 4, 5, 6, 0x41]) * 100)
