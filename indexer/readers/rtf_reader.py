"""Reader of RTF files: body text (\\'xx and \\uN escapes decoded), headings by outline level, title from \\info."""

import re
from dataclasses import dataclass, replace

from lodex.indexer.readers.containers import unreadable
from lodex.indexer.readers.doc_builder import DOC_BUILDER_VERSION, LINE, PARAGRAPH, DocBuilder
from lodex.indexer.readers.document import Document, ReadLimits

# Bump the first number whenever a change here would change the text, title or sections read_rtf gives.
RTF_READER_VERSION = f"1+{DOC_BUILDER_VERSION}"

_TOKEN = re.compile(rb"\\([a-zA-Z]{1,32})(-?\d{1,10})? ?|\\'([0-9a-fA-F]{2})|\\(.)|([{}])|[\r\n]+|([^\\{}\r\n]+)", re.DOTALL)
# Groups whose text is not the document's: tables of fonts, colours, styles, lists; metadata; pictures and objects;
# headers, footers, notes and comments; field instructions (their result is kept).
_SKIPPED = frozenset(
    """fonttbl colortbl stylesheet info pict object objdata header headerl headerr headerf footer
    footerl footerr footerf footnote annotation atnid atnauthor fldinst listtable listoverridetable rsidtbl generator
    xmlnstbl themedata colorschememapping latentstyles datastore pntext pntxta pntxtb revtbl filetbl docvar shpinst
    shptxt nonshppict bkmkstart bkmkend""".split()
)
_SPECIAL = {
    "par": "\n",
    "line": "\n",
    "tab": "\t",
    "emdash": "\u2014",
    "endash": "\u2013",
    "emspace": "\u2003",
    "enspace": "\u2002",
    "qmspace": "\u2005",
    "bullet": "\u2022",
    "lquote": "\u2018",
    "rquote": "\u2019",
    "ldblquote": "\u201c",
    "rdblquote": "\u201d",
    "~": "\xa0",
    "_": "\u2011",
    "{": "{",
    "}": "}",
    "\\": "\\",
}
# \fcharsetN → the code page of a font's \'xx bytes.
_CHARSETS = {
    77: "mac_roman",
    128: "cp932",
    129: "cp949",
    130: "johab",
    134: "gbk",
    136: "cp950",
    161: "cp1253",
    162: "cp1254",
    163: "cp1258",
    177: "cp1255",
    178: "cp1256",
    186: "cp1257",
    204: "cp1251",
    222: "cp874",
    238: "cp1250",
    254: "cp437",
    255: "cp850",
}
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class _Group:
    """What a group holds and how to read it (saved at "{", restored at "}")."""

    destination: str = ""  # "" for the body; the control word naming another destination
    skipped: bool = False
    uc: int = 1  # bytes of fallback after each \uN
    font: str = ""
    level: int = 0  # the paragraph's outline level + 1 (0: body text)
    style: str = ""
    intbl: bool = False


class _RtfState:
    """A reader's state across tokens: the group stack, the text being gathered, the tables read from the header."""

    def __init__(self, limits: ReadLimits) -> None:
        self.doc = DocBuilder(limits, "rtf")
        self.group = _Group()
        self.stack: list[_Group] = []
        self.codepage = "cp1252"
        self.fonts: dict[str, str] = {}  # font number → code page
        self.styles: dict[str, int] = {}  # style number → outline level + 1
        self.defining = ""  # the font or style number being defined in the font table or stylesheet
        self.paragraph: list[str] = []
        self.cells: list[str] = []
        self.rows_out = 0
        self.title: list[str] = []
        self.hex = bytearray()
        self.skip = 0  # fallback bytes still to skip after a \uN
        self.started = False


def read_rtf(data: bytes, limits: ReadLimits) -> Document:
    """RTF: paragraphs and table rows (cells joined by " | ") in order; paragraphs with an outline level (their own
    \\outlinelevel or their style's) are headings, giving sections; title from {\\info{\\title …}}, else the first
    heading. Headers, footers, notes, comments and pictures are left out."""
    if not data.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{\\rtf"):
        raise unreadable("rtf", "no {\\rtf header")
    state = _RtfState(limits)
    pos, end = 0, len(data)
    while pos < end:
        match = _TOKEN.match(data, pos)
        if match is None:  # a lone backslash at the very end
            break
        pos = match.end()
        word, arg, hex_byte, symbol, brace, text = match.groups()
        if hex_byte is None and state.hex:
            _flush_hex(state)
        if word is not None:
            pos = _control(state, word.decode("ascii"), arg, data, pos)
        elif hex_byte is not None:
            _hex(state, hex_byte)
        elif symbol is not None:
            _symbol(state, symbol.decode("latin-1"))
        elif brace is not None:
            if not _brace(state, brace):
                break
        elif text is not None:
            _text(state, text)
    _flush_hex(state)
    _end_paragraph(state)
    text_title = "".join(state.title)
    return state.doc.build(title=text_title)


def _control(state: _RtfState, word: str, arg: bytes | None, data: bytes, pos: int) -> int:
    """A control word (with its numeric argument); the position to read on from (\\bin skips its bytes)."""
    group = state.group
    if word == "bin":
        return pos + max(int(arg or 0), 0)
    if state.skip:
        state.skip -= 1
        return pos
    if word == "title" and group.destination == "info":
        state.group = replace(group, destination="title", skipped=False)
        return pos
    if word in _SKIPPED:
        if not group.destination:
            state.group = replace(group, destination=word, skipped=True)
        return pos
    number = arg.decode("ascii") if arg is not None else ""
    if group.destination in ("fonttbl", "stylesheet"):
        _define(state, word, number)
    elif group.destination == "title" and word == "u" and number:
        _unicode(state, number)
    elif group.skipped or group.destination:
        pass  # the content of a destination that is not the body
    elif word == "ansicpg" and number.isdigit():
        state.codepage = _codepage(f"cp{number}")
    elif word == "uc":
        state.group = replace(group, uc=max(int(number or 1), 0))
    elif word == "u" and number:
        _unicode(state, number)
    elif word == "f":
        state.group = replace(group, font=number)
    else:
        _paragraph_control(state, word, number)
    return pos


def _unicode(state: _RtfState, number: str) -> None:
    """\\uN: the character (N may be negative: a 16-bit signed value), then its fallback bytes are skipped."""
    _emit(state, chr(int(number) % 0x10000))
    state.skip = state.group.uc


def _define(state: _RtfState, word: str, number: str) -> None:
    """A control word inside the font table (\\fN \\fcharsetN) or the stylesheet (\\sN \\outlinelevelN)."""
    if word in ("f", "s"):
        state.defining = number
    elif word == "fcharset" and number.isdigit() and int(number) in _CHARSETS:
        state.fonts[state.defining] = _codepage(_CHARSETS[int(number)])
    elif word == "outlinelevel" and number.isdigit() and int(number) < 9:
        state.styles[state.defining] = int(number) + 1


def _paragraph_control(state: _RtfState, word: str, number: str) -> None:
    """Paragraph and table structure (\\par, \\pard, \\sN, \\outlinelevelN, \\intbl, \\cell, \\row) and special
    characters."""
    group = state.group
    if word == "par" or word == "sect" or word == "page":
        if group.intbl:
            state.paragraph.append(" ")
        else:
            _end_paragraph(state)
    elif word == "pard":
        state.group = replace(group, level=0, style="", intbl=False)
    elif word == "s":
        state.group = replace(group, style=number)
    elif word == "outlinelevel" and number.isdigit():
        state.group = replace(group, level=int(number) + 1 if int(number) < 9 else 0)
    elif word == "intbl":
        state.group = replace(group, intbl=True)
    elif word == "cell" or word == "nestcell":
        state.cells.append(" ".join("".join(state.paragraph).split()))
        state.paragraph = []
    elif word == "row" or word == "nestrow":
        _end_row(state)
    elif word in _SPECIAL:
        _emit(state, _SPECIAL[word])


def _symbol(state: _RtfState, symbol: str) -> None:
    """A control symbol: \\{ \\} \\\\ \\~ \\_ give characters, \\- (optional hyphen) nothing, \\* marks the group as
    one to skip unless it is known."""
    if state.skip:
        state.skip -= 1
    elif symbol == "*":
        state.group = replace(state.group, skipped=True)
    elif symbol in _SPECIAL:
        _emit(state, _SPECIAL[symbol])
    elif symbol in "\r\n" and not (state.group.skipped or state.group.destination):
        _paragraph_control(state, "par", "")


def _brace(state: _RtfState, brace: bytes) -> bool:
    """Open or close a group; False once the document's outermost group is closed."""
    state.skip = 0
    if brace == b"{":
        state.stack.append(state.group)
        state.started = True
        return True
    if not state.stack:
        return False
    state.group = state.stack.pop()
    return bool(state.stack) or not state.started


def _hex(state: _RtfState, hex_byte: bytes) -> None:
    if state.skip:
        state.skip -= 1
    else:
        state.hex.append(int(hex_byte, 16))


def _flush_hex(state: _RtfState) -> None:
    """Decode the \\'xx bytes gathered (several make one character in double-byte code pages)."""
    if state.hex:
        _emit(state, bytes(state.hex).decode(state.fonts.get(state.group.font, state.codepage), "replace"))
        state.hex.clear()


def _text(state: _RtfState, text: bytes) -> None:
    """Plain text: the fallback bytes of a \\uN skipped first; bytes beyond ASCII read in the code page."""
    if state.skip:
        dropped = min(state.skip, len(text))
        state.skip -= dropped
        text = text[dropped:]
    if text:
        _emit(state, text.decode(state.fonts.get(state.group.font, state.codepage), "replace"))


def _emit(state: _RtfState, text: str) -> None:
    if state.group.skipped:
        return
    if state.group.destination == "title":
        state.title.append(text)
    elif not state.group.destination:
        state.paragraph.append(text)


def _end_paragraph(state: _RtfState) -> None:
    """A paragraph ends: a heading when it has an outline level (its own, else its style's)."""
    text = _fix_surrogates("".join(state.paragraph))
    state.paragraph = []
    level = state.group.level or state.styles.get(state.group.style, 0)
    if level:
        state.doc.heading(level, text)
    elif state.doc.block(text) is not None:
        state.rows_out = 0


def _end_row(state: _RtfState) -> None:
    """A table row ends: one line of its cells."""
    line = " | ".join(cell for cell in state.cells if cell)
    state.cells, state.paragraph = [], []
    if state.doc.block(_fix_surrogates(line), LINE if state.rows_out else PARAGRAPH) is not None:
        state.rows_out += 1


def _fix_surrogates(text: str) -> str:
    """Characters beyond the BMP come as two \\uN (a surrogate pair): joined; a lone half becomes U+FFFD."""
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _codepage(name: str) -> str:
    """`name` when Python knows that code page, else cp1252."""
    import codecs

    try:
        return codecs.lookup(name).name
    except LookupError:
        return "cp1252"
