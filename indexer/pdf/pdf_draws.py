"""How much parsing a PDF's pages ask of pdfium, counted before it parses one: each page's content streams and the
form XObjects they draw (`/Name Do`), nested draws multiplied out (a form drawing another ten times, nine deep, is a
billion draws; one stream named by thousands of pages is parsed thousands of times)."""

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from lodex.indexer.errors import ReadError

_OBJ = re.compile(rb"(?<![0-9])(\d+)\s+\d+\s+obj\b")
_END = re.compile(rb"\bendobj\b|(?<![A-Za-z])stream\b")
_COMMENT_OR_STRING = re.compile(rb"%[^\r\n]*|\((?:[^()\\]|\\.)*\)")
_REF = rb"(\d+)\s+\d+\s+R\b"
_CONTENTS = re.compile(rb"/Contents\s*(?:" + _REF + rb"|\[([^\]]*)\])")
_RESOURCES = re.compile(rb"/Resources\s*" + _REF)
_XOBJECT = re.compile(rb"/XObject\s*(?:" + _REF + rb"|<<([^<>]*)>>)")
_NAME = rb"/([^\s/<>\[\]()%{}]+)\s*"
_NAMED_REF = re.compile(_NAME + _REF)
_DO = re.compile(_NAME + rb"Do\b")
_REFS = re.compile(_REF)
_PARENT = re.compile(rb"/Parent\s*" + _REF)
_FIRST = re.compile(rb"/First\s+(\d+)")
_PAIRS = re.compile(rb"\s*(\d+)\s+(\d+)")
# Page contents parsed, all pages together, may be this many times limits.max_inflated_bytes: 2 GB at the default
# 50 MB, about 45 s of pdfium's parsing, within the default per-file budget (a large background drawing repeated on
# a thousand pages stays readable); past it, a file is refused before any page is parsed.
CONTENT_FACTOR = 40
# A drawn form or image costs pdfium about as much time as parsing this many bytes of content (110,000 draws of a small
# form of text: 3.3 s), on top of its own content.
DRAW_COST = 2_048
# Forms and images drawn on one page, nested draws multiplied out: pdfium keeps about 5 KB for each until the page is
# closed (0.56 GB at 100,000), within the default per-file memory budget of 1 GB.
MAX_PAGE_DRAWS = 100_000
MAX_DEPTH = 64  # forms nested deeper are not drawn (pdfium stops between 40 and 60); page tree levels followed up

Names = tuple[tuple[bytes, int], ...]  # a resource dictionary's XObjects: (name, object number)


@dataclass
class Drawing:
    """What the guard learnt of a file's objects: their dictionaries (without comments and strings), the decoded size
    of its streams, and the `Do` operators each drawn stream holds, by name."""

    dictionaries: dict[int, bytes] = field(default_factory=dict)
    sizes: dict[int, int] = field(default_factory=dict)
    draws: dict[int, Counter[bytes]] = field(default_factory=dict)

    def add_objects(self, text: bytes | memoryview) -> None:
        """The dictionary of each `N G obj` in `text` (the file), up to its `endobj` or `stream` keyword."""
        data = bytes(text)
        starts = list(_OBJ.finditer(data))
        for match, after in zip(starts, [*starts[1:], None]):
            stop = after.start() if after else len(data)
            end = _END.search(data, match.end(), stop)
            self._put(int(match.group(1)), data[match.end() : end.start() if end else stop])

    def add_object_stream(self, dictionary: bytes, text: bytes) -> None:
        """The objects packed in an object stream (`text`, decoded): numbers and offsets, then the objects from
        /First on."""
        first = _FIRST.search(dictionary)
        if not first:
            return
        start = int(first.group(1))
        pairs = [(int(m.group(1)), start + int(m.group(2))) for m in _PAIRS.finditer(text[:start])]
        for (number, at), (_, end) in zip(pairs, [*pairs[1:], (0, len(text))]):
            self._put(number, text[at : max(at, end)])

    def drawn(self) -> set[int]:
        """The objects pages may draw: their contents, and the XObjects any resource dictionary names."""
        numbers: set[int] = set()
        for text in self.dictionaries.values():
            numbers.update(_contents(text))
            numbers.update(number for _, number in self._names(text))
        return numbers

    def check(self, limit: int) -> None:
        """ReadError when a page draws more than MAX_PAGE_DRAWS forms and images, or when the contents the pages parse
        (a stream again for each page or form that draws it, DRAW_COST more for each draw) add up past CONTENT_FACTOR
        times `limit`."""
        memo: dict[tuple[int, Names], tuple[int, int]] = {}
        total = 0
        for text in self.dictionaries.values():
            contents = _contents(text)
            if not contents:
                continue
            names = self._page_names(text)
            parsed, draws = _add(self._cost(number, names, memo, set()) for number in contents)
            if draws > MAX_PAGE_DRAWS:
                raise ReadError(
                    f"a page draws {draws:,} forms and images, more than {MAX_PAGE_DRAWS:,} (one form drawing another many times over?)",
                    "the file is hostile or broken: exclude it",
                )
            total += parsed
            if total > CONTENT_FACTOR * limit:  # as soon as it is passed: the pages after it are not costed
                raise ReadError(
                    f"page contents add up to over {total / 1e6:,.0f} MB to parse, more than {CONTENT_FACTOR} "
                    f"times the limit of {limit / 1e6:,.1f} MB (max_inflated_bytes): one stream drawn by many pages?",
                    "the file is hostile or broken: exclude it",
                )

    def _cost(self, number: int, page: Names, memo: dict[tuple[int, Names], tuple[int, int]], open_: set[int]) -> tuple[int, int]:
        """(bytes parsed, forms and images drawn) when stream `number` is parsed once, with the XObjects it draws in
        turn, each looked up in its own resources, then in those of the page (`page`), as pdfium does."""
        key = (number, page)
        if key in memo:
            return memo[key]
        if number in open_ or len(open_) >= MAX_DEPTH:  # a form drawing itself, or nested past what pdfium follows
            return 0, 0
        open_.add(number)
        parsed, draws = self.sizes.get(number, 0), 0
        by_name = dict(page) | dict(self._names(self.dictionaries.get(number, b"")))
        for name, count in self.draws.get(number, Counter()).items():
            if (child := by_name.get(name)) is not None:
                child_parsed, child_draws = self._cost(child, page, memo, open_)
                parsed, draws = parsed + count * (DRAW_COST + child_parsed), draws + count * (1 + child_draws)
        open_.discard(number)
        memo[key] = parsed, draws
        return parsed, draws

    def _page_names(self, text: bytes) -> Names:
        """A page's XObjects: those of its resources, or of the nearest page tree node above it that has some."""
        for _ in range(MAX_DEPTH):
            if b"/Resources" in text or not (parent := _PARENT.search(text)):
                break
            text = self.dictionaries.get(int(parent.group(1)), b"")
        return self._names(text)

    def _names(self, text: bytes) -> Names:
        """The XObjects of the resource dictionary `text` holds or points to (/Resources N 0 R, /XObject N 0 R)."""
        if (resources := _RESOURCES.search(text)) and b"/XObject" not in text:
            text = self.dictionaries.get(int(resources.group(1)), b"")
        match = _XOBJECT.search(text)
        if not match:
            return ()
        inline = match.group(2) if match.group(2) is not None else self.dictionaries.get(int(match.group(1)), b"")
        return tuple((m.group(1), int(m.group(2))) for m in _NAMED_REF.finditer(inline))

    def _put(self, number: int, text: bytes) -> None:
        self.dictionaries[number] = _COMMENT_OR_STRING.sub(b" ", text)


def count_draws(content: bytes) -> Counter[bytes]:
    """The `/Name Do` operators of a content stream, by name."""
    return Counter(match.group(1) for match in _DO.finditer(content))


def _contents(text: bytes) -> list[int]:
    """The content streams a page dictionary names: one reference, or an array of them."""
    match = _CONTENTS.search(text)
    if not match:
        return []
    return [int(match.group(1))] if match.group(1) else [int(m.group(1)) for m in _REFS.finditer(match.group(2))]


def _add(costs: Iterable[tuple[int, int]]) -> tuple[int, int]:
    parsed = draws = 0
    for one_parsed, one_draws in costs:
        parsed, draws = parsed + one_parsed, draws + one_draws
    return parsed, draws
