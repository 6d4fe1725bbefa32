"""Readers standing for reader bugs, run in the budget's worker processes by tests/test_budget.py (ReadPool(reader=…)):
one that never returns, one that allocates without bound, one without the PDF guard; any other file is read as usual."""

import threading
from pathlib import PurePath

from lodex.indexer.pdf import pdf_reader
from lodex.indexer.readers.document import ReadLimits
from lodex.indexer.readers.readers import Extracted, extract


def hostile(path: str, data: bytes, limits: ReadLimits) -> Extracted:
    """"hang.*" loops for ever, "hog.*" holds more and more memory; the rest is read by readers.extract."""
    name = PurePath(path).stem
    if name == "hang":
        threading.Event().wait()  # never set: a reader that never returns
    if name == "hog":
        held = []
        while True:
            held.append(bytearray(16 << 20))  # touched pages: resident memory grows by 16 MB a step
            for page in range(0, 16 << 20, 4096):
                held[-1][page] = 1
    return extract(path, data, limits)


def unguarded(path: str, data: bytes, limits: ReadLimits) -> Extracted:
    """readers.extract with the PDF guard off: pdfium meets what the guard would have refused."""
    pdf_reader.check_pdf = lambda data, limit: None  # type: ignore[assignment]
    return extract(path, data, limits)
