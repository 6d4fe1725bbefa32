"""HTML reader: a page's visible text, one paragraph per block element, its title and its headings as sections."""

import re

from lodex.indexer.errors import ReadError
from lodex.indexer.readers.document import Document, locate_sections

# HTML nested deeper than this is refused: parsing costs grow with the square of the depth (150,000 nested <div>s
# took 81 s), and no real page comes near it.
MAX_HTML_DEPTH = 1_000
_HTML_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9:-]*)[^>]*?(/?)>")
# Elements that never hold others (void) or that a parser closes by itself when a sibling opens (they do not nest).
_HTML_VOID_LIKE = frozenset("svg math path circle rect line polyline polygon ellipse use stop g".split())  # foreign: `/>` closes
_HTML_FLAT = frozenset(
    "area base br col embed hr img input link meta param source track wbr p li dt dd tr td th "
    "option optgroup thead tbody tfoot colgroup rb rt rp".split()
)


_HTML_BLOCKS = (
    "p",
    "div",
    "section",
    "article",
    "header",
    "footer",
    "li",
    "tr",
    "table",
    "ul",
    "ol",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "pre",
    "blockquote",
    "br",
    "hr",
    "dd",
    "dt",
    "main",
)


def html_depth(text: str, limit: int = MAX_HTML_DEPTH) -> int:
    """How deep the page's elements nest, as a parser would open them (counting elements that can hold others; a
    closing tag closes its own element and those opened inside it, and is ignored when no such element is open; `<x/>`
    opens x, as in HTML), up to `limit` + 1."""
    stack: list[str] = []
    open_counts: dict[str, int] = {}
    deepest = 0
    for match in _HTML_TAG.finditer(text):
        closing, name, self_closing = match.groups()
        name = name.lower()
        if name in _HTML_FLAT or (self_closing and name in _HTML_VOID_LIKE):
            continue
        if not closing:
            stack.append(name)
            open_counts[name] = open_counts.get(name, 0) + 1
            deepest = max(deepest, len(stack))
            if deepest > limit:
                return deepest
        elif open_counts.get(name):
            while stack:
                top = stack.pop()
                open_counts[top] -= 1
                if top == name:
                    break
    return deepest


def read_html(text: str) -> Document:
    """Visible text of an HTML page, one paragraph per block element; title from <title> or <h1>; h1–h6 make the
    sections."""
    from selectolax.lexbor import LexborHTMLParser as HTMLParser

    if html_depth(text) > MAX_HTML_DEPTH:
        raise ReadError(
            f"HTML nested deeper than {MAX_HTML_DEPTH:,} elements (too slow to parse); skipped", "exclude the file, or save it as plain text"
        )

    tree = HTMLParser(text)
    title_node = tree.css_first("title") or tree.css_first("h1")
    title = title_node.text(strip=True) if title_node else ""
    tree.strip_tags(["script", "style", "noscript", "template", "head", "svg", "iframe", "object"])
    headings = [(int((node.tag or "h1")[1]), node.text(deep=True, separator=" ", strip=True)) for node in tree.css("h1, h2, h3, h4, h5, h6")]
    for tag in _HTML_BLOCKS:
        for node in tree.css(tag):
            node.insert_before("\n\n")
            node.insert_after("\n\n")
    root = tree.body or tree.root
    body = root.text(deep=True, separator="") if root else ""
    body = re.sub(r"[ \t\xa0]+", " ", body)
    body = re.sub(r" ?\n[ \n]*\n ?", "\n\n", body).strip()
    return Document(body, title, sections=locate_sections(body, headings))
