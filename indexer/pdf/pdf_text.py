"""PDF text assembly: a page's lines joined (hyphenated line ends mended by evidence from the whole text), running
headers and footers (see pdf_running) dropped."""

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from lodex.indexer.readers.decoding import clean

# pdfium replaces a hyphen that ends a line by U+FFFE (U+0002 in older builds) and runs the two lines together.
MARKERS = "\ufffe\x02"
SOFT_HYPHENS = MARKERS + "\u00ad"
_HYPHENS = "-\u2010" + SOFT_HYPHENS
# Stands, until the whole text is read, where a word was broken by a hyphen at a line end (a noncharacter: never in
# text a PDF gives, and removed from it in case).
BROKEN = "\ufdd0"
_BROKEN_WORD = re.compile(rf"(\w+){BROKEN}(\w+)")
_WORD = re.compile(r"\w+(?:[-\u2010]\w+)*")  # a word, hyphenated or not
# A line this many words long that ends in a broken word is full: the word goes on after a blank band too.
HEADING_WORDS = 5
_LIGATURES = str.maketrans({"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl", "\ufb05": "st", "\ufb06": "st"})


@dataclass(frozen=True)
class Line:
    """One line of a page's body in reading order; `paragraph`: a blank band lies above it."""

    text: str
    paragraph: bool


@dataclass(frozen=True)
class Page:
    """A page's text before running headers and footers are known: its first and last lines set apart (candidates),
    and its body in reading order."""

    head: list[str]
    body: str
    tail: list[str]


def normal(text: str) -> str:
    """Text without invisible characters, pdfium's hyphen marks made hyphens again, ligatures spelt out."""
    return clean(text.replace("\ufffe", "-").replace("\x02", "-")).translate(_LIGATURES)


def join_lines(lines: list[Line]) -> str:
    """Lines joined by newlines (a blank line before a paragraph), and a word broken after a hyphen at a line end
    made one again (see _line_break), even across a blank band when a full line breaks a word that the next goes on
    with in lower case (a heading of two lines in larger type, whose line spacing reads as a paragraph's gap)."""
    parts: list[str] = []
    for line in lines:
        if not parts:
            parts.append(line.text)
        elif line.paragraph and not _broken_heading(parts[-1], line.text):
            parts += ["\n\n", line.text]
        else:
            between = _line_break(parts[-1], line.text)
            if between != "\n":
                parts[-1] = parts[-1][:-1]
            parts += [between, line.text]
    return "".join(parts)


def _broken_heading(line: str, following: str) -> bool:
    """Whether `line`, a line of at least HEADING_WORDS words ending in a hyphenated word part, goes on in `following`
    (in lower case) across a blank band (a short line ending in a hyphen before a paragraph keeps it: "an item-")."""
    return len(line.split()) >= HEADING_WORDS and following[:1].islower() and _line_break(line, following) != "\n"


def _line_break(line: str, following: str) -> str:
    """What stands between `line` and the `following` line: a newline, or, when a hyphen ends `line` right after a
    word character and a word character starts `following`, what replaces that hyphen: nothing (a soft hyphen),
    BROKEN (one word hyphenated: "hyphen-" + "ation", decided once the whole text is known: see mend), or "-" (a
    compound or a range: "out-of-" + "date", "out-" + "of-date", "Anglo-" + "Saxon", "10-" + "12")."""
    if len(line) < 2 or line[-1] not in _HYPHENS or not line[-2].isalnum() or not following[:1].isalnum():
        return "\n"
    if line[-1] == "\u00ad":
        return ""
    compound = line.rsplit(None, 1)[-1][:-1] + following.split(None, 1)[0]
    if following[0].islower() and line[-2].isalpha() and not any(c in _HYPHENS for c in compound):
        return BROKEN
    return "-"


def stream_page(text: str) -> Page:
    """A page in pdfium's own order, one line per pdfium line (line-end hyphens made line ends again), its first and
    last lines the header and footer candidates."""
    text = re.sub(f"([{MARKERS}])", "\\1\n", text.replace(BROKEN, ""))
    lines = [" ".join(line.split()) for line in re.split(r"\r\n|\r|\n", text)]
    lines = [line for line in lines if line]
    head, tail = (lines[:1], lines[-1:]) if len(lines) >= 3 else ([], [])
    body = lines[len(head) : len(lines) - len(tail)]
    return Page([normal(line) for line in head], normal(join_lines([Line(line, False) for line in body])), [normal(line) for line in tail])


def hyphen_evidence(pages: list[Page]) -> Counter[str]:
    """How often the text writes each word that a line end broke, joined ("hyphenation") and hyphenated
    ("two-dimensional"), outside line ends: the evidence mend weighs."""
    wanted: set[str] = set()
    for page in pages:
        for match in _BROKEN_WORD.finditer(page.body):
            wanted |= {(match[1] + match[2]).casefold(), f"{match[1]}-{match[2]}".casefold()}
    counts: Counter[str] = Counter()
    if wanted:
        for page in pages:
            found = (m[0].replace("\u2010", "-").casefold() for m in _WORD.finditer(page.body))
            counts.update(word for word in found if word in wanted)
    return counts


def mend(text: str, compounds: Counter[str]) -> str:
    """Each word a line end broke made one ("hyphen-" + "ation"), unless the text writes it with its hyphen more
    often than without ("two-" + "dimensional")."""

    def mend(match: re.Match[str]) -> str:
        joined, hyphenated = match[1] + match[2], f"{match[1]}-{match[2]}"
        return hyphenated if compounds[hyphenated.casefold()] > compounds[joined.casefold()] else joined

    return _BROKEN_WORD.sub(mend, text) if BROKEN in text else text


def finish(page: Page, running: Callable[[str, bool], bool], compounds: Counter[str]) -> str:
    """A page's final text: the body between the header and footer lines that are not running ones (`running(line,
    head)`: whether a header (head true) or footer line is)."""
    head = [line for line in page.head if not running(line, True)]
    tail = [line for line in page.tail if not running(line, False)]
    text = mend(_joined([part for part in (*head, page.body, *tail) if part]), compounds)
    return text.replace(BROKEN, "").strip()


def _joined(parts: list[str]) -> str:
    """A page's kept header lines, body and footer lines joined by newlines, except where a hyphen at the end of one
    breaks a word that the next goes on with in lower case (a last paragraph of two lines, or a heading of two, set
    apart like a footer or header would be): then as join_lines would."""
    out: list[str] = []
    for part in parts:
        between = _line_break(out[-1], part) if out else "\n"
        if between != "\n" and part[:1].islower():
            out[-1] = out[-1][:-1]
        else:
            between = "\n"
        out += [between, part] if out else [part]
    return "".join(out)
