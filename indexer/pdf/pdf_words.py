"""A PDF page's words: each a run of characters with its box, which way it runs on the page, and its box turned into
the frame where it reads left to right (pdf_layout.py groups them into lines)."""

from dataclasses import dataclass


@dataclass(slots=True)
class Word:
    """A run of non-space characters and its box (PDF units, y upwards); `base`: the height of its baseline (its first
    character's origin), which words of one line share whatever their glyphs and boxes; `order`: its place in the
    content stream."""

    text: str
    x0: float
    x1: float
    y0: float
    y1: float
    base: float
    order: int = 0


def filled(words: list[Word], directions: list[str | None]) -> list[str]:
    """Each one-character word's direction taken from the nearer (on the page) of the words before and after it in
    pdfium's order that have one."""
    known = [i for i, d in enumerate(directions) if d is not None]
    if not known:
        return ["right"] * len(words)
    out: list[str] = []
    at = 0  # index into `known` of the first known word at or after i
    for i, direction in enumerate(directions):
        while at < len(known) and known[at] < i:
            at += 1
        if direction is not None:
            out.append(direction)
            continue
        near = [known[k] for k in (at - 1, at) if 0 <= k < len(known)]
        nearest = min(near, key=lambda j: _distance(words[i], words[j]))
        out.append(directions[nearest] or "right")
    return out


def _distance(a: Word, b: Word) -> float:
    """How far apart two words' boxes are (0 when they touch or overlap)."""
    return max(a.x0 - b.x1, b.x0 - a.x1, 0) + max(a.y0 - b.y1, b.y0 - a.y1, 0)


def word_direction(first: tuple[float, ...], last: tuple[float, ...]) -> str:
    """Which way a word runs on the page, from its first character to its last: right, left, up or down."""
    dx = (last[0] + last[2] - first[0] - first[2]) / 2
    dy = (last[1] + last[3] - first[1] - first[3]) / 2
    if abs(dx) >= abs(dy):
        return "right" if dx >= 0 else "left"
    return "up" if dy > 0 else "down"


def turn(word: Word, direction: str, origin_x: float) -> Word:
    """A word's box in the frame where its text, running `direction` on the page, runs right (lines going down), and
    its baseline there (from its first character's origin: `origin_x`, and word.base, its y)."""
    if direction == "down":  # turned clockwise: lines go left
        return Word(word.text, -word.y1, -word.y0, word.x0, word.x1, origin_x, word.order)
    if direction == "up":  # turned counter-clockwise: lines go right
        return Word(word.text, word.y0, word.y1, -word.x1, -word.x0, -origin_x, word.order)
    return Word(word.text, -word.x1, -word.x0, -word.y1, -word.y0, -word.base, word.order)  # upside down
