"""Hostile OpenDocument (odt, ods, odp) and EPUB files: repeated rows and columns (flat and nested), deep nesting,
spines and tables of contents that repeat or nest, wrong mimetypes, zip bombs, and byte flips of valid files."""

import random

from tests.fuzz_files.common import corruptions, words, zip_bytes, zip_with_bomb, zipfile_entries

NS = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
    'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
    'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0"'
)
MIME = {"odt": "text", "ods": "spreadsheet", "odp": "presentation"}


def odf(fmt: str, body: str, mimetype: str | None = None) -> bytes:
    """An ODF package of `fmt` whose office:body holds `body`."""
    content = f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {NS}><office:body>{body}</office:body></office:document-content>'
    return zip_bytes({"mimetype": mimetype or f"application/vnd.oasis.opendocument.{MIME[fmt]}", "content.xml": content})


def cell(text: str, repeat: int = 1) -> str:
    rep = f' table:number-columns-repeated="{repeat}"' if repeat != 1 else ""
    return f"<table:table-cell{rep}><text:p>{text}</text:p></table:table-cell>"


def valid_odt(rng: random.Random) -> bytes:
    paras = "".join(f"<text:p>{words(rng, 12)}</text:p>" for _ in range(rng.randint(2, 10)))
    return odf("odt", f'<office:text><text:h text:outline-level="1">{words(rng, 3)}</text:h>{paras}</office:text>')


def valid_ods(rng: random.Random) -> bytes:
    rows = "".join("<table:table-row>" + "".join(cell(words(rng, 2)) for _ in range(4)) + "</table:table-row>" for _ in range(rng.randint(2, 12)))
    return odf("ods", f'<office:spreadsheet><table:table table:name="S">{rows}</table:table></office:spreadsheet>')


def valid_odp(rng: random.Random) -> bytes:
    pages = "".join(
        f'<draw:page><draw:frame presentation:class="title"><draw:text-box><text:p>{words(rng, 3)}</text:p>'
        f"</draw:text-box></draw:frame><draw:frame><draw:text-box><text:p>{words(rng, 9)}</text:p>"
        f"</draw:text-box></draw:frame></draw:page>"
        for _ in range(rng.randint(1, 4))
    )
    return odf("odp", f"<office:presentation>{pages}</office:presentation>")


def ods_repeated(rng: random.Random) -> bytes:
    """Cells of 1–10 kB repeated up to a million times across columns, in rows repeated too."""
    text = "lift " * rng.choice((200, 1_000, 2_000))
    cols, rows = rng.choice((1_000, 16_384, 1_000_000)), rng.choice((1, 1_000, 1_048_576))
    row = f'<table:table-row table:number-rows-repeated="{rows}">{cell(text, cols)}</table:table-row>'
    return odf("ods", f'<office:spreadsheet><table:table table:name="S">{row}</table:table></office:spreadsheet>')


def ods_nested_repeats(rng: random.Random) -> bytes:
    """Tables inside repeated cells inside tables inside repeated cells…: each level multiplies the text (the cap on
    one repeat does not bound a product of them)."""
    depth, repeat = rng.choice((2, 3, 4)), rng.choice((100, 1_000))
    inner = cell("drag", repeat)
    for _ in range(depth):
        inner = cell(f"</text:p><table:table><table:table-row>{inner}</table:table-row></table:table><text:p>", repeat)
    return odf(
        "ods", f'<office:spreadsheet><table:table table:name="S"><table:table-row>{inner}</table:table-row></table:table></office:spreadsheet>'
    )


def odf_spaces(rng: random.Random) -> bytes:
    """text:s with c= huge, repeated a million times in one paragraph."""
    count = rng.choice((10_000, 100_000, 1_000_000))
    unit = f'<text:s text:c="{rng.choice((1000, 2147483647, -1))}"/>'.encode()
    return zip_with_bomb(
        {"mimetype": "application/vnd.oasis.opendocument.text"},
        "content.xml",
        f"<office:document-content {NS}><office:body><office:text><text:p>".encode(),
        unit,
        count * len(unit),
        b"</text:p></office:text></office:body></office:document-content>",
    )


def odt_deep(rng: random.Random) -> bytes:
    """Sections, lists or spans nested 10k to 1M deep."""
    depth = rng.choice((10_000, 100_000, 1_000_000))
    tag = rng.choice(("text:section", "text:list><text:list-item", "text:span"))
    close = "".join(f"</{t}>" for t in reversed(tag.split("><")))
    if tag == "text:span":
        body = f"<text:p>{'<text:span>' * depth}{words(rng, 3)}{'</text:span>' * depth}</text:p>"
    else:
        body = f"<{tag}>" * depth + f"<text:p>{words(rng, 3)}</text:p>" + close * depth
    return odf("odt", f"<office:text>{body}</office:text>")


def odt_wide(rng: random.Random) -> bytes:
    """Millions of empty paragraphs, or notes left out, or a 40 MB text node."""
    count = rng.choice((1_000_000, 5_000_000))
    unit = rng.choice((b"<text:p/>", b"<text:note><text:p>x</text:p></text:note>", b"a"))
    return zip_with_bomb(
        {"mimetype": "application/vnd.oasis.opendocument.text"},
        "content.xml",
        f"<office:document-content {NS}><office:body><office:text><text:p>".encode(),
        unit,
        count * len(unit),
        b"</text:p></office:text></office:body></office:document-content>",
    )


def odf_mimetype(rng: random.Random) -> bytes:
    """A mimetype that names another kind, is empty, 100 kB long, or binary; or no content.xml at all."""
    mime = rng.choice(("application/vnd.oasis.opendocument.spreadsheet", "", "x" * 100_000, "\x00\xff\xfe", "application/vnd.oasis.opendocument."))
    data = odf("odt", f"<office:text><text:p>{words(rng, 4)}</text:p></office:text>", mime)
    return data if rng.random() < 0.8 else zip_bytes({"mimetype": "application/vnd.oasis.opendocument.text"})


def odp_many_pages(rng: random.Random) -> bytes:
    """A million empty draw:page elements (pages without text)."""
    count = rng.choice((100_000, 1_000_000, 3_000_000))
    return zip_with_bomb(
        {"mimetype": "application/vnd.oasis.opendocument.presentation"},
        "content.xml",
        f"<office:document-content {NS}><office:body><office:presentation>".encode(),
        b"<draw:page/>",
        count * 12,
        b"</office:presentation></office:body></office:document-content>",
    )


# ---- EPUB ---------------------------------------------------------------------------------------------------

CONTAINER = (
    '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
    '<rootfiles><rootfile full-path="{}" media-type="application/oebps-package+xml"/></rootfiles></container>'
)


def epub(
    chapters: dict[str, str],
    spine: list[str] | None = None,
    nav: str | None = None,
    extra: dict[str, bytes | str] | None = None,
    opf_path: str = "OEBPS/content.opf",
) -> bytes:
    """An EPUB 3 of these chapters (id → XHTML), read in `spine` order (ids; repeats allowed), with a nav document."""
    spine = spine if spine is not None else list(chapters)
    items = "".join(f'<item id="{cid}" href="{cid}.xhtml" media-type="application/xhtml+xml"/>' for cid in chapters)
    if nav is not None:
        items += '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>'
    refs = "".join(f'<itemref idref="{cid}"/>' for cid in spine)
    opf = (
        f'<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><metadata '
        f'xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>T</dc:title></metadata><manifest>{items}</manifest>'
        f"<spine>{refs}</spine></package>"
    )
    base = opf_path.rpartition("/")[0]
    entries: dict[str, bytes | str] = {"mimetype": "application/epub+zip", "META-INF/container.xml": CONTAINER.format(opf_path), opf_path: opf}
    for cid, xhtml in chapters.items():
        entries[f"{base}/{cid}.xhtml" if base else f"{cid}.xhtml"] = xhtml
    if nav is not None:
        entries[f"{base}/nav.xhtml"] = nav
    return zip_bytes({**entries, **(extra or {})})


def xhtml(body: str) -> str:
    return f'<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>c</title></head><body>{body}</body></html>'


def valid_epub(rng: random.Random) -> bytes:
    chapters = {f"c{i}": xhtml(f"<h1>{words(rng, 2)}</h1><p>{words(rng, 20)}</p>") for i in range(rng.randint(1, 4))}
    nav = xhtml(
        '<nav epub:type="toc" xmlns:epub="http://www.idpf.org/2007/ops"><ol>'
        + "".join(f'<li><a href="{cid}.xhtml">{cid}</a></li>' for cid in chapters)
        + "</ol></nav>"
    )
    return epub(chapters, nav=nav)


def epub_repeated_spine(rng: random.Random) -> bytes:
    """One chapter of 100 kB – 1 MB listed 1k to 100k times in the spine."""
    chapter = xhtml("<p>" + "wake " * rng.choice((20_000, 200_000)) + "</p>")
    return epub({"c": chapter}, ["c"] * rng.choice((1_000, 10_000, 100_000)))


def epub_deep_toc(rng: random.Random) -> bytes:
    """A nav table of contents whose lists nest 10k to 500k deep (or a chapter nested as deep)."""
    depth = rng.choice((10_000, 100_000, 500_000))
    deep = "<ol><li><a href='c.xhtml'>x</a>" * depth + "</li></ol>" * depth
    if rng.random() < 0.5:
        return epub(
            {"c": xhtml(f"<p>{words(rng, 5)}</p>")}, nav=xhtml(f'<nav epub:type="toc" xmlns:epub="http://www.idpf.org/2007/ops">{deep}</nav>')
        )
    return epub({"c": xhtml("<div>" * depth + words(rng, 5) + "</div>" * depth)})


def epub_broken_package(rng: random.Random) -> bytes:
    """A container naming a missing, looping (the container itself), absolute or ../ package; or a spine of ids not in
    the manifest, or pointing at the OPF itself."""
    kind = rng.randrange(4)
    if kind == 0:
        path = rng.choice(("META-INF/container.xml", "/etc/passwd", "../../x.opf", "", "a" * 70_000))
        return zip_bytes({"mimetype": "application/epub+zip", "META-INF/container.xml": CONTAINER.format(path)})
    if kind == 1:
        return epub({"c": xhtml("<p>x</p>")}, ["nope", "c", "c"] * 1000)
    if kind == 2:
        return epub({"content": "<package/>"}, opf_path="OEBPS/content.xhtml")
    return epub({"c": xhtml("<p>x</p>")}, extra={"META-INF/encryption.xml": "<encryption/>" * rng.choice((1, 100_000))})


def epub_chapter_bomb(rng: random.Random) -> bytes:
    """A chapter declaring 1 kB that inflates to 100–400 MB."""
    entries = zipfile_entries(epub({"c0": xhtml("<p>x</p>")}, ["c0", "c"]))
    opf = str(entries["OEBPS/content.opf"], "utf-8") if isinstance(entries["OEBPS/content.opf"], bytes) else str(entries["OEBPS/content.opf"])
    entries["OEBPS/content.opf"] = opf.replace("<manifest>", '<manifest><item id="c" href="c.xhtml" media-type="application/xhtml+xml"/>')
    return zip_with_bomb(
        entries,
        "OEBPS/c.xhtml",
        b'<html xmlns="http://www.w3.org/1999/xhtml"><body><p>',
        b"gust ",
        rng.choice((100, 400)) << 20,
        b"</p></body></html>",
        declared=1_000,
    )


ODT = {"valid": valid_odt, "deep": odt_deep, "wide": odt_wide, "spaces": odf_spaces, "mimetype": odf_mimetype, **corruptions(valid_odt)}
ODS = {"valid": valid_ods, "repeated": ods_repeated, "nested_repeats": ods_nested_repeats, **corruptions(valid_ods)}
ODP = {"valid": valid_odp, "many_pages": odp_many_pages, **corruptions(valid_odp)}
EPUB = {
    "valid": valid_epub,
    "repeated_spine": epub_repeated_spine,
    "deep_toc": epub_deep_toc,
    "broken_package": epub_broken_package,
    "chapter_bomb": epub_chapter_bomb,
    **corruptions(valid_epub),
}
