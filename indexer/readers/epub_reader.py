"""The reader of EPUB books into Documents: chapters in spine order, named by the table of contents."""

from xml.etree import ElementTree as ET

from lodex.indexer.errors import ReadError
from lodex.indexer.readers.containers import HOSTILE_FIX, MalformedXml, SafeZip, local, parse_xml, resolve, unreadable
from lodex.indexer.readers.doc_builder import DocBuilder
from lodex.indexer.readers.document import Document, ReadLimits
from lodex.indexer.readers.html_reader import MAX_HTML_DEPTH, html_depth
from lodex.indexer.readers.office_common import DC_TITLE, OFFICE_READER_VERSION

# The office readers' version (office_common.py), plus EPUB's own changes: .2 reads a chapter the spine lists again once
# (its text was repeated), so the books indexed before are read again.
EPUB_READER_VERSION = f"{OFFICE_READER_VERSION}.2"


# ------------------------------------------------------------------------------------------------------------ EPUB

_OPF = "{http://www.idpf.org/2007/opf}"
_NCX = "{http://www.daisy.org/z3986/2005/ncx/}"
_CONTAINER = "{urn:oasis:names:tc:opendocument:xmlns:container}"
_XHTML_TYPES = ("application/xhtml+xml", "text/html")


def read_epub(data: bytes, limits: ReadLimits) -> Document:
    """EPUB: the spine's chapters in order as text; each chapter a section named by the table of contents (EPUB 3 nav
    or EPUB 2 NCX, nesting giving the path), else by its first heading; title from the package metadata."""
    z = SafeZip(data, limits, "epub")
    opf = _epub_package_path(z)
    package = parse_xml(z.read(opf), z.fmt, opf)
    manifest = _epub_manifest(package, opf)
    spine = _epub_spine(package, manifest)
    _epub_refuse_encrypted(z, [path for path, _ in spine])
    toc = _epub_toc(z, package, manifest)
    doc = DocBuilder(limits, "epub")
    for path, media_type in spine:
        if media_type in _XHTML_TYPES and z.has(path):
            _epub_chapter(z.read(path), toc.get(path), doc)
    title = package.find(f"{_OPF}metadata/{DC_TITLE}")
    return doc.build(title=(title.text or "") if title is not None else "")


def _epub_package_path(z: SafeZip) -> str:
    """The package document (OPF) named by META-INF/container.xml."""
    part = "META-INF/container.xml"
    if not z.has(part):
        raise unreadable("epub", f"no {part} in the archive")
    rootfile = parse_xml(z.read(part), z.fmt, part).find(f".//{_CONTAINER}rootfile")
    path = rootfile.get("full-path", "") if rootfile is not None else ""
    if not z.has(path):
        raise unreadable("epub", f"the package document {path or '(none named)'} is missing")
    return path


def _epub_manifest(package: ET.Element, opf: str) -> dict[str, tuple[str, str, str]]:
    """Manifest id → (archive path, media type, properties)."""
    return {
        item.get("id", ""): (resolve(opf, item.get("href", "")), item.get("media-type", ""), item.get("properties", ""))
        for item in package.iter(f"{_OPF}item")
    }


def _epub_spine(package: ET.Element, manifest: dict[str, tuple[str, str, str]]) -> list[tuple[str, str]]:
    """(archive path, media type) of the spine's items, in reading order; a chapter the spine lists again (the EPUB
    spec allows one reference to an item; a hostile book lists one chapter 100,000 times) is read once, where first
    listed."""
    items = [manifest.get(ref.get("idref", "")) for ref in package.iter(f"{_OPF}itemref")]
    return list(dict.fromkeys((item[0], item[1]) for item in items if item))


def _epub_refuse_encrypted(z: SafeZip, chapters: list[str]) -> None:
    """ReadError when META-INF/encryption.xml lists a chapter (DRM); obfuscated fonts alone are fine."""
    part = "META-INF/encryption.xml"
    if not z.has(part):
        return
    root = parse_xml(z.read(part), z.fmt, part)
    encrypted = {resolve("", ref.get("URI", "")) for ref in root.iter() if local(ref.tag) == "CipherReference"}
    if encrypted & set(chapters):
        raise ReadError("encrypted epub (DRM): its chapters cannot be read", "exclude the file")


def _epub_toc(z: SafeZip, package: ET.Element, manifest: dict[str, tuple[str, str, str]]) -> dict[str, list[tuple[int, str]]]:
    """Chapter path → [(level, title), …] of the table-of-contents entries pointing at the chapter (its start; an
    entry for a fragment inside the chapter counts as the chapter's when it is the first), from the EPUB 3 nav
    document, else the EPUB 2 NCX."""
    nav = next((path for path, _, props in manifest.values() if "nav" in props.split()), "")
    entries = _nav_entries(z.read(nav), nav) if nav and z.has(nav) else []
    if not entries:
        spine = package.find(f"{_OPF}spine")
        ncx = manifest.get(spine.get("toc", "") if spine is not None else "", ("", "", ""))[0]
        try:
            entries = _ncx_entries(z, ncx) if ncx and z.has(ncx) else []
        except MalformedXml:
            entries = []  # chapters are then named by their first heading
    toc: dict[str, list[tuple[int, str]]] = {}
    for level, title, target in entries:
        path, _, fragment = target.partition("#")
        if title and (path not in toc or not fragment):
            toc.setdefault(path, []).append((level, title))
    return toc


def _nav_entries(data: bytes, nav: str) -> list[tuple[int, str, str]]:
    """(level, title, target) of the EPUB 3 nav document's toc links; level = how deep its list nests. A nav nested
    deeper than MAX_HTML_DEPTH is refused before it is parsed (each link's level is counted up its ancestors)."""
    from selectolax.lexbor import LexborHTMLParser

    markup = data.decode("utf-8", "replace")
    if html_depth(markup) > MAX_HTML_DEPTH:
        raise ReadError(f"epub table of contents ({nav}) nested deeper than {MAX_HTML_DEPTH:,} elements (no real book's is); refused", HOSTILE_FIX)
    tree = LexborHTMLParser(markup)
    navs = tree.css("nav")
    toc = next((n for n in navs if "toc" in (n.attributes.get("epub:type") or "").split()), navs[0] if navs else None)
    if toc is None:
        return []
    entries = []
    for link in toc.css("a"):
        level, node = 0, link.parent
        while node is not None and node.tag != "nav":
            level += node.tag == "ol"
            node = node.parent
        target = resolve(nav, link.attributes.get("href") or "") + _fragment(link.attributes.get("href") or "")
        entries.append((max(level, 1), " ".join(link.text(strip=False).split()), target))
    return entries


def _ncx_entries(z: SafeZip, ncx: str) -> list[tuple[int, str, str]]:
    """(level, title, target) of the EPUB 2 NCX's navPoints; level = how deep they nest."""
    root = parse_xml(z.read(ncx), z.fmt, ncx)
    entries: list[tuple[int, str, str]] = []
    todo = [(point, 1) for point in reversed(root.findall(f"{_NCX}navMap/{_NCX}navPoint"))]
    while todo:
        point, level = todo.pop()
        label = point.find(f"{_NCX}navLabel/{_NCX}text")
        content = point.find(f"{_NCX}content")
        src = content.get("src", "") if content is not None else ""
        title = " ".join((label.text or "").split()) if label is not None else ""
        entries.append((level, title, resolve(ncx, src) + _fragment(src)))
        todo.extend((child, level + 1) for child in reversed(point.findall(f"{_NCX}navPoint")))
    return entries


def _fragment(href: str) -> str:
    return "#" + href.partition("#")[2] if "#" in href else ""


def _epub_chapter(data: bytes, toc: list[tuple[int, str]] | None, doc: DocBuilder) -> None:
    """One spine chapter: its sections (from the table of contents, else its first heading), then its text (read first:
    read_html refuses a chapter nested too deep before anything parses it)."""
    from lodex.indexer.readers.decoding import decode
    from lodex.indexer.readers.html_reader import read_html

    markup, _ = decode(data)
    text = read_html(markup).text
    for level, title in toc or _first_heading(markup):
        doc.section(level, title)
    doc.block(text)


def _first_heading(markup: str) -> list[tuple[int, str]]:
    """[(level, text)] of a chapter's first h1–h6, [] when it has none."""
    from selectolax.lexbor import LexborHTMLParser

    heading = LexborHTMLParser(markup).css_first("h1, h2, h3, h4, h5, h6")
    text = " ".join(heading.text(strip=False).split()) if heading is not None else ""
    return [(int((heading.tag or "h1")[1]), text)] if heading is not None and text else []
