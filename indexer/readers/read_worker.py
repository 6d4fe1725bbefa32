"""An extraction worker process (see read_budget.py): reads requests (a file's name, bytes and read limits) on stdin,
answers each with the extracted text or the reason it could not be read on stdout; no torch, only the readers."""

import os
import pickle
import resource
import struct
import sys
import threading
import time
from typing import IO, Any, cast

from lodex.indexer.readers.document import ReadLimits
from lodex.store.errors import LodexError

_LENGTH = struct.Struct("<Q")
# The readers a request may need, imported before the worker says it is ready: its baseline memory includes them.
READER_MODULES = (
    "lodex.indexer.readers.readers",
    "lodex.indexer.pdf.pdf_reader",
    "lodex.indexer.readers.ooxml_readers",
    "lodex.indexer.readers.xlsx_reader",
    "lodex.indexer.readers.odf_readers",
    "lodex.indexer.readers.epub_reader",
    "lodex.indexer.readers.rtf_reader",
    "lodex.indexer.readers.mail_reader",
)


def send(out: IO[bytes], message: object) -> None:
    """One length-prefixed pickled message."""
    blob = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_LENGTH.pack(len(blob)))
    out.write(blob)
    out.flush()


def receive(source: IO[bytes]) -> object | None:
    """The next length-prefixed pickled message, or None at the end of the stream."""
    head = source.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (size,) = _LENGTH.unpack(head)
    blob = source.read(size)
    if len(blob) < size:
        return None
    return cast(object | None, pickle.loads(blob))


def send_file(out: IO[bytes], request: tuple[str, bytes, ReadLimits, str]) -> None:
    """A request (path, data, limits, reader spec): all but the file's bytes pickled, then the bytes as they are, so
    that the sender never holds a second copy of them in a pickle."""
    path, data, limits, reader = request
    send(out, (path, len(data), limits, reader))
    out.write(data)
    out.flush()


def receive_file(source: IO[bytes]) -> tuple[str, bytes, ReadLimits, str] | None:
    """The next request sent by send_file, or None at the end of the stream."""
    header = receive(source)
    if header is None:
        return None
    path, size, limits, reader = cast(tuple[str, int, ReadLimits, str], header)
    data = source.read(size)
    return (path, data, limits, reader) if len(data) == size else None


def answer(request: tuple[str, bytes, ReadLimits, str]) -> tuple[Any, ...]:
    """("ok", Extracted) or ("fail", reason, fix) for one request (path, data, limits, reader spec)."""
    from lodex.indexer.readers.readers import extract

    path, data, limits, reader = request
    try:
        if reader:  # a test's reader ("module:function"), standing for a reader bug
            module, _, name = reader.partition(":")
            return "ok", getattr(__import__(module, fromlist=[name]), name)(path, data, limits)
        return "ok", extract(path, data, limits)
    except LodexError as exc:
        return "fail", exc.message, exc.fix
    except RecursionError:
        return "fail", "nested too deeply to read (its structure is deeper than any reader follows)", "exclude the file"
    except MemoryError:
        return "fail", "memory", ""
    except Exception as exc:  # a reader bug: recorded with the file, as it would be in-process
        return "fail", f"{type(exc).__name__}: {exc}", ""


def _exit_with(parent: int) -> None:
    """End this process once its parent is gone (killed -9 while this one was stuck in a file, it sees no end of
    stdin): polled from a thread, which runs while a reader holds the GIL for no more than a switch interval."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def main() -> None:
    """Serve requests until stdin ends (the parent closed it, or died)."""
    threading.Thread(target=_exit_with, args=(os.getppid(),), daemon=True).start()
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a library printing to stdout must not corrupt the answers
    for module in READER_MODULES:
        try:
            __import__(module)
        except ImportError:  # its library is not installed: a file of that format fails with the reason when read
            pass
    address_mb = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    if address_mb:  # the hard ceiling behind the parent's watch of resident memory (see read_budget.py)
        size = int(open("/proc/self/statm").read().split()[0]) * os.sysconf("SC_PAGE_SIZE") if os.path.exists("/proc/self/statm") else 0
        limit = size + address_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    send(out, "ready")
    source = sys.stdin.buffer
    while (request := receive_file(source)) is not None:
        send(out, answer(request))


if __name__ == "__main__":
    main()
