"""Readers standing for reader bugs, run in the budget's worker processes by tests/test_budget.py (ReadPool(reader=…)):
one that never returns, one that allocates without bound, one without the PDF guard; any other file is read as usual."""

import threading
from pathlib import PurePath

from lodex.indexer.pdf import pdf_reader
from lodex.indexer.readers.document import ReadLimits
from lodex.indexer.readers.readers import Extracted, extract


def hostile(path: str, data: bytes, limits: ReadLimits) -> Extracted:
    """ "hang.*" loops for ever, "hog.*" holds more and more memory, "heap.*" holds 300 MB for a moment (within a
    512 MB budget) and reads the file, "spike.*" holds 24 MB for a few milliseconds and reads it, "size.*" is titled with the number of bytes it
    was given; the rest is read by
    readers.extract."""
    name = PurePath(path).stem
    if name == "hang":
        threading.Event().wait()  # never set: a reader that never returns
    if name in ("hog", "heap"):
        held: list[bytearray] = []
        while name == "hog" or len(held) < 300 // 16:
            held.append(bytearray(16 << 20))  # touched pages: resident memory grows by 16 MB a step
            for page in range(0, 16 << 20, 4096):
                held[-1][page] = 1
            if name == "heap":
                threading.Event().wait(
                    0.01
                )  # paced, not waiting on a state: 16 MB a step, a step in 10 ms, slower than the parent's looks (every 20 ms)
        threading.Event().wait(0.5)  # held while the parent looks
    if name == "size":  # how many bytes arrived, as the title
        return extract(path, b"# %d bytes\n\nreceived" % len(data), limits)
    if name == "spike":
        spike = bytearray(24 << 20)  # 24 MB touched and freed at once, quicker than the parent's look every 20 ms
        for page in range(0, len(spike), 4096):
            spike[page] = 1
        del spike
    return extract(path, data, limits)


def unguarded(path: str, data: bytes, limits: ReadLimits) -> Extracted:
    """readers.extract with the PDF guard off: pdfium meets what the guard would have refused."""
    pdf_reader.check_pdf = lambda data, limit: None  # type: ignore[assignment]
    return extract(path, data, limits)
