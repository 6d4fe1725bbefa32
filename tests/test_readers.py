"""Every format reader: markup removed, visible text kept, titles found."""

import json

import pytest

from lodex.indexer.errors import ReadError
from lodex.indexer.readers.readers import extract


def test_markdown_markup_removed_heading_kept() -> None:
    doc = extract(
        "notes.md",
        b"# Wing *theory*\n\nLift on a **thin** wing, see [the paper](http://x.org) and `code`.\n\n- one\n- two\n\n```\nfenced block\n```\n",
    )
    assert doc.format == "markdown"
    assert doc.title == "Wing theory"
    assert doc.text.startswith("Wing theory\n\nLift on a thin wing, see the paper and code.")
    assert "fenced block" in doc.text
    for markup in ("#", "**", "](", "`", "http://x.org"):
        assert markup not in doc.text


def test_rst_adornments_and_inline_markup_removed() -> None:
    doc = extract("guide.rst", b"Guide\n=====\n\nSome *emphasis*, ``literal`` and `a link <http://x.org>`_.\n\n.. note::\n\n   Kept text.\n")
    assert doc.title == "Guide"
    assert "=====" not in doc.text and ".. note::" not in doc.text and "http://x.org" not in doc.text
    assert "Some emphasis, literal and a link." in doc.text
    assert "Kept text." in doc.text


def test_html_visible_text_only() -> None:
    page = b"<html><head><title>Report</title><style>p{color:red}</style></head><body><h1>Head</h1><p>First <b>para</b>.</p><script>var hidden = 1;</script><p>Second</p></body></html>"
    doc = extract("page.htm", page)
    assert doc.title == "Report"
    assert doc.text == "Head\n\nFirst para.\n\nSecond"


def test_json_string_values() -> None:
    doc = extract("data.json", json.dumps({"title": "Doc", "body": ["alpha", {"deep": "beta"}], "n": 3, "ok": True}).encode())
    assert doc.text == "Doc\n\nalpha\n\nbeta"
    assert doc.title == "Doc"


def test_jsonl_one_paragraph_per_line() -> None:
    doc = extract("rows.jsonl", b'{"a": "first", "b": 1}\n\n{"a": "second", "c": ["third"]}\n')
    assert doc.text == "first\n\nsecond\nthird"


def test_invalid_json_is_a_read_error() -> None:
    with pytest.raises(ReadError, match="invalid JSON"):
        extract("bad.json", b'{"a": ')


def test_csv_quoted_multiline_cells() -> None:
    doc = extract("t.csv", b'name,notes\nwing,"spans\nseveral lines"\nfin,short\n')
    assert doc.text == "name | notes\nwing | spans several lines\nfin | short"


def test_tsv_rows() -> None:
    doc = extract("t.tsv", b"a\tb\n1\ttwo words\n")
    assert doc.text == "a | b\n1 | two words"


def test_plain_text_title_from_first_line() -> None:
    doc = extract("plain.txt", b"\n\nFirst line here\nsecond line\n")
    assert doc.title == "First line here"
    assert doc.format == "text"


def test_unknown_extension_refused() -> None:
    with pytest.raises(ReadError, match="no reader"):
        extract("image.png", b"whatever")


def test_headings_make_sections_in_markdown_rst_and_html() -> None:
    from lodex.indexer.readers.document import section_of

    md = "# Report\n\nIntro text.\n\n## 2 Methods\n\nHow.\n\n### 2.3 Sampling\n\nWe sampled gliders.\n\n## 3 Results\n\nDone."
    rst = "Report\n======\n\nIntro text.\n\n2 Methods\n---------\n\nHow.\n\n2.3 Sampling\n~~~~~~~~~~~~\n\nWe sampled gliders.\n"
    html = "<html><body><h1>Report</h1><p>Intro text.</p><h2>2 Methods</h2><p>How.</p><h3>2.3 Sampling</h3><p>We sampled gliders.</p></body></html>"
    for name, source in (("a.md", md), ("a.rst", rst), ("a.html", html)):
        doc = extract(name, source.encode())
        at = doc.text.index("We sampled gliders")
        assert section_of(doc.sections, at) == "Report › 2 Methods › 2.3 Sampling", name
        assert section_of(doc.sections, doc.text.index("Intro")) == "Report", name
    doc = extract("a.md", md.encode())
    assert section_of(doc.sections, doc.text.index("Done")) == "Report › 3 Results"
    assert extract("a.txt", b"# not a heading in plain text\n\nbody").sections is None
