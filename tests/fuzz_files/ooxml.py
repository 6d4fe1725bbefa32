"""Hostile Office Open XML files (docx, xlsx, pptx): shared-string and cell amplification, repeated parts, deep and
wide XML, huge attributes, lying zip sizes, odd encodings, and byte flips of valid files."""

import random

from tests.fuzz_files.common import corruptions, words, zip_bytes, zip_with_bomb, zipfile_entries

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
S = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
P = "http://schemas.openxmlformats.org/presentationml/2006/main"
A = "http://schemas.openxmlformats.org/drawingml/2006/main"
R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
PKG = "http://schemas.openxmlformats.org/package/2006/relationships"
DECL = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'


def rels(*targets: tuple[str, str, str]) -> str:
    """A relationships part of (id, type suffix, target)."""
    body = "".join(f'<Relationship Id="{i}" Type="{R}/{kind}" Target="{target}"/>' for i, kind, target in targets)
    return f'{DECL}<Relationships xmlns="{PKG}">{body}</Relationships>'


def docx(body: str, extra: dict[str, bytes | str] | None = None) -> bytes:
    """A docx whose document body is `body` (w:p elements)."""
    return zip_bytes(
        {
            "[Content_Types].xml": "<Types/>",
            "_rels/.rels": rels(("rId1", "officeDocument", "word/document.xml")),
            "word/document.xml": f'{DECL}<w:document xmlns:w="{W}"><w:body>{body}</w:body></w:document>',
            **(extra or {}),
        }
    )


def para(text: str) -> str:
    return f"<w:p><w:r><w:t>{text}</w:t></w:r></w:p>"


def xlsx(sheets: list[str], strings: list[str] | str = "", names: list[str] | None = None) -> bytes:
    """An xlsx of these sheetData bodies, with shared strings (a list of texts, or a whole <sst> body)."""
    names = names or [f"Sheet{i + 1}" for i in range(len(sheets))]
    book = "".join(f'<sheet name="{n}" sheetId="{i + 1}" r:id="rId{i + 1}"/>' for i, n in enumerate(names))
    sst = strings if isinstance(strings, str) else "".join(f"<si><t>{t}</t></si>" for t in strings)
    entries: dict[str, bytes | str] = {
        "[Content_Types].xml": "<Types/>",
        "_rels/.rels": rels(("rId1", "officeDocument", "xl/workbook.xml")),
        "xl/workbook.xml": f'{DECL}<workbook xmlns="{S}" xmlns:r="{R}"><sheets>{book}</sheets></workbook>',
        "xl/_rels/workbook.xml.rels": rels(
            *[(f"rId{i + 1}", "worksheet", f"worksheets/sheet{min(i, len(sheets) - 1) + 1}.xml") for i in range(len(names))],
            ("rIdS", "sharedStrings", "sharedStrings.xml"),
        ),
        "xl/sharedStrings.xml": f'{DECL}<sst xmlns="{S}">{sst}</sst>',
    }
    for i, body in enumerate(sheets):
        entries[f"xl/worksheets/sheet{i + 1}.xml"] = f'{DECL}<worksheet xmlns="{S}"><sheetData>{body}</sheetData></worksheet>'
    return zip_bytes(entries)


def slide_xml(title: str, lines: list[str]) -> str:
    body = "".join(f"<a:p><a:r><a:t>{line}</a:t></a:r></a:p>" for line in lines)
    return (
        f'{DECL}<p:sld xmlns:p="{P}" xmlns:a="{A}"><p:cSld><p:spTree>'
        f'<p:sp><p:nvSpPr><p:nvPr><p:ph type="title"/></p:nvPr></p:nvSpPr><p:txBody><a:p><a:r><a:t>{title}</a:t></a:r></a:p></p:txBody></p:sp>'
        f"<p:sp><p:txBody>{body}</p:txBody></p:sp></p:spTree></p:cSld></p:sld>"
    )


def pptx(slides: list[str], order: list[int] | None = None) -> bytes:
    """A pptx of these slide parts, shown in `order` (indexes into slides; repeats allowed)."""
    order = order if order is not None else list(range(len(slides)))
    ids = "".join(f'<p:sldId id="{256 + n}" r:id="rId{i + 1}"/>' for n, i in enumerate(order))
    entries: dict[str, bytes | str] = {
        "[Content_Types].xml": "<Types/>",
        "_rels/.rels": rels(("rId1", "officeDocument", "ppt/presentation.xml")),
        "ppt/presentation.xml": f'{DECL}<p:presentation xmlns:p="{P}" xmlns:r="{R}"><p:sldIdLst>{ids}</p:sldIdLst></p:presentation>',
        "ppt/_rels/presentation.xml.rels": rels(*[(f"rId{i + 1}", "slide", f"slides/slide{i + 1}.xml") for i in range(len(slides))]),
    }
    for i, xml in enumerate(slides):
        entries[f"ppt/slides/slide{i + 1}.xml"] = xml
    return zip_bytes(entries)


def valid_docx(rng: random.Random) -> bytes:
    return docx("".join(para(words(rng, 12)) for _ in range(rng.randint(2, 12))))


def valid_xlsx(rng: random.Random) -> bytes:
    strings = [words(rng, 3) for _ in range(8)]
    rows = "".join(
        f'<row r="{r + 1}">' + "".join(f'<c t="s"><v>{rng.randrange(8)}</v></c><c><v>{rng.random():.3f}</v></c>' for _ in range(3)) + "</row>"
        for r in range(rng.randint(2, 20))
    )
    return xlsx([rows], strings)


def valid_pptx(rng: random.Random) -> bytes:
    return pptx([slide_xml(words(rng, 3), [words(rng, 8) for _ in range(3)]) for _ in range(rng.randint(1, 4))])


# ---- docx ---------------------------------------------------------------------------------------------------


def docx_deep(rng: random.Random) -> bytes:
    """Elements nested 10k to 1M deep (tables in tables, or unknown elements), a paragraph at the bottom."""
    depth = rng.choice((10_000, 100_000, 1_000_000))
    if rng.random() < 0.5:
        open_, close = "<w:tbl><w:tr><w:tc>", "</w:tc></w:tr></w:tbl>"
    else:
        open_, close = "<w:x>", "</w:x>"
    return docx(open_ * depth + para(words(rng, 5)) + close * depth)


def docx_wide(rng: random.Random) -> bytes:
    """1M to 12M empty paragraphs or runs (a few MB deflated to kB)."""
    count = rng.choice((1_000_000, 4_000_000, 12_000_000))
    unit = rng.choice(("<w:p/>", "<w:r/>", "<w:p><w:r><w:t/></w:r></w:p>"))
    return zip_with_bomb(
        {"_rels/.rels": rels(("rId1", "officeDocument", "word/document.xml"))},
        "word/document.xml",
        f'{DECL}<w:document xmlns:w="{W}"><w:body><w:p>'.encode(),
        unit.encode(),
        count * len(unit),
        b"</w:p></w:body></w:document>",
    )


def docx_huge_attribute(rng: random.Random) -> bytes:
    """An attribute (or an element name, or a text node) of 10 to 40 MB."""
    size = rng.choice((10, 20, 40)) << 20
    where = rng.randrange(3)
    head = f'{DECL}<w:document xmlns:w="{W}"><w:body><w:p><w:r>'.encode()
    head += (b'<w:t a="', b"<w:t><w:", b"<w:t>")[where]
    tail = (b'">x</w:t>', b"/></w:t>", b"</w:t>")[where] + b"</w:r></w:p></w:body></w:document>"
    return zip_with_bomb({}, "word/document.xml", head, b"a", size, tail)


def docx_lying_bomb(rng: random.Random) -> bytes:
    """word/document.xml declaring 1 kB and inflating to 100–400 MB."""
    size = rng.choice((100, 200, 400)) << 20
    return zip_with_bomb(
        {},
        "word/document.xml",
        f'{DECL}<w:document xmlns:w="{W}"><w:body><w:p><w:r><w:t>'.encode(),
        b"lift ",
        size,
        b"</w:t></w:r></w:p></w:body></w:document>",
        declared=1_000,
    )


def docx_encoding(rng: random.Random) -> bytes:
    """The document part in UTF-16 (with or without a BOM), declared in a wrong encoding, or with invalid bytes."""
    xml = f'<w:document xmlns:w="{W}"><w:body>{para(words(rng, 10) + " ünïcödé ☃")}</w:body></w:document>'
    kind = rng.randrange(5)
    data = [
        lambda: ('<?xml version="1.0" encoding="UTF-16"?>' + xml).encode("utf-16"),
        lambda: ('<?xml version="1.0" encoding="UTF-16"?>' + xml).encode("utf-16-le"),
        lambda: ('<?xml version="1.0" encoding="ISO-8859-1"?>' + xml).encode("utf-8"),
        lambda: ('<?xml version="1.0" encoding="x-unknown-42"?>' + xml).encode(),
        lambda: DECL.encode() + xml.encode().replace(b"\xc3", b"\xc3\xff\xfe"),
    ][kind]()
    return zip_bytes({"word/document.xml": data})


def docx_rels(rng: random.Random) -> bytes:
    """Relationships that point at themselves, outside the archive, at a folder, or at a 10k-deep ../ path."""
    target = rng.choice(
        ("_rels/.rels", "/../../etc/passwd", "word/", "../" * 10_000 + "word/document.xml", "", "%00", "word/document.xml#" + "x" * 100_000)
    )
    return zip_bytes(
        {
            "_rels/.rels": rels(("rId1", "officeDocument", target)),
            "word/document.xml": f'{DECL}<w:document xmlns:w="{W}"><w:body>{para(words(rng, 5))}</w:body></w:document>',
        }
    )


# ---- xlsx ---------------------------------------------------------------------------------------------------


def xlsx_shared_string_amplification(rng: random.Random) -> bytes:
    """One long shared string (100 kB – 1 MB) used by thousands of cells of one row (or of many rows)."""
    big = "lift " * (rng.choice((20_000, 100_000, 200_000)))
    cells = rng.choice((1_000, 3_000, 10_000))
    one_row = rng.random() < 0.5
    row = '<c t="s"><v>0</v></c>' * cells
    body = f'<row r="1">{row}</row>' if one_row else "".join(f'<row r="{r + 1}"><c t="s"><v>0</v></c></row>' for r in range(cells))
    return xlsx([body], [big])


def xlsx_empty_cells(rng: random.Random) -> bytes:
    """Millions of empty <c/> in one row (or of empty rows)."""
    count = rng.choice((1_000_000, 4_000_000, 12_000_000))
    unit = rng.choice((b"<c/>", b"<row/>", b'<c r="A1"/>'))
    book = {
        "_rels/.rels": rels(("rId1", "officeDocument", "xl/workbook.xml")),
        "xl/workbook.xml": f'<workbook xmlns="{S}" xmlns:r="{R}"><sheets><sheet name="S" r:id="rId1"/></sheets></workbook>',
        "xl/_rels/workbook.xml.rels": rels(("rId1", "worksheet", "worksheets/sheet1.xml")),
    }
    return zip_with_bomb(
        book,
        "xl/worksheets/sheet1.xml",
        f'<worksheet xmlns="{S}"><sheetData><row>'.encode(),
        unit,
        count * len(unit),
        b"</row></sheetData></worksheet>",
    )


def xlsx_cells_outside_rows(rng: random.Random) -> bytes:
    """Cells straight under sheetData, in no row: a row that never ends (shared strings, or inline ones)."""
    cells = rng.choice((10_000, 100_000, 1_000_000))
    if rng.random() < 0.5:
        return xlsx(['<c t="s"><v>0</v></c>' * cells], ["lift " * 200])
    return xlsx(['<c t="inlineStr"><is><t>drag drag drag drag</t></is></c>' * cells])


def xlsx_many_sheets(rng: random.Random) -> bytes:
    """Thousands of sheets that all name the same worksheet part (each read again), with a big shared string."""
    count = rng.choice((1_000, 10_000, 50_000))
    row = '<row r="1">' + '<c t="s"><v>0</v></c>' * 50 + "</row>"
    return xlsx([row], ["wake " * 2_000], names=[f"S{i}" for i in range(count)])


def xlsx_bad_values(rng: random.Random) -> bytes:
    """Shared-string indexes out of range, negative, huge, non-numeric; types and numbers that are not."""
    values = ["99999999999999999999999", "-1", "1e400", "abc", "", "0x10", "٣", "NaN", "2147483648", "1" * 5_000]
    cells = "".join(f'<c t="{rng.choice(("s", "b", "e", "str", "n", "d", "zz"))}"><v>{rng.choice(values)}</v></c>' for _ in range(60))
    sst = rng.choice(([words(rng, 2)], "<si><r><t>a</t></r><rPh><t>b</t></rPh></si><si/><si><t/></si>", "<si>" * 5_000))
    return xlsx([f'<row r="1">{cells}</row><row r="-5"/><row r="99999999999"/>'], sst)


def xlsx_deep_rich_text(rng: random.Random) -> bytes:
    """A shared string whose runs nest 10k to 500k deep."""
    depth = rng.choice((10_000, 100_000, 500_000))
    return xlsx(['<row r="1"><c t="s"><v>0</v></c></row>'], "<si>" + "<r>" * depth + "<t>deep</t>" + "</r>" * depth + "</si>")


# ---- pptx ---------------------------------------------------------------------------------------------------


def pptx_repeated_slide(rng: random.Random) -> bytes:
    """One slide of a few hundred kB shown 1k to 50k times (the presentation lists it again and again)."""
    slide = slide_xml("title", [words(rng, 10)] * rng.choice((100, 1_000, 5_000)))
    return pptx([slide], [0] * rng.choice((1_000, 10_000, 50_000)))


def pptx_deep_shapes(rng: random.Random) -> bytes:
    """Group shapes nested 10k to 500k deep."""
    depth = rng.choice((10_000, 100_000, 500_000))
    tree = "<p:grpSp>" * depth + f"<p:sp><p:txBody><a:p><a:r><a:t>{words(rng, 4)}</a:t></a:r></a:p></p:txBody></p:sp>" + "</p:grpSp>" * depth
    return pptx([f'{DECL}<p:sld xmlns:p="{P}" xmlns:a="{A}"><p:cSld><p:spTree>{tree}</p:spTree></p:cSld></p:sld>'])


def pptx_notes_loop(rng: random.Random) -> bytes:
    """A slide whose notes relationship points at the slide itself (or at the presentation)."""
    data = pptx([slide_xml("loop", [words(rng, 5)])])
    target = rng.choice(("slide1.xml", "../presentation.xml", "../../_rels/.rels"))
    entries = zipfile_entries(data)
    entries["ppt/slides/_rels/slide1.xml.rels"] = rels(("rId1", "notesSlide", target))
    return zip_bytes(entries)


DOCX = {
    "valid": valid_docx,
    "deep": docx_deep,
    "wide": docx_wide,
    "huge_attribute": docx_huge_attribute,
    "lying_bomb": docx_lying_bomb,
    "encoding": docx_encoding,
    "rels": docx_rels,
    **corruptions(valid_docx),
}
XLSX = {
    "valid": valid_xlsx,
    "shared_string_amplification": xlsx_shared_string_amplification,
    "empty_cells": xlsx_empty_cells,
    "cells_outside_rows": xlsx_cells_outside_rows,
    "many_sheets": xlsx_many_sheets,
    "bad_values": xlsx_bad_values,
    "deep_rich_text": xlsx_deep_rich_text,
    **corruptions(valid_xlsx),
}
PPTX = {
    "valid": valid_pptx,
    "repeated_slide": pptx_repeated_slide,
    "deep_shapes": pptx_deep_shapes,
    "notes_loop": pptx_notes_loop,
    **corruptions(valid_pptx),
}
