"""Names of indexed files: a file's root-relative path as the index spells it (valid UTF-8, apart from pushed
documents), and back; opening only regular files, reading no more than a limit."""

import errno
import os
import re
import stat
from pathlib import Path
from typing import BinaryIO

from lodex.indexer.errors import ReadError

# Documents pushed through the API live under this path prefix; folder reconciliation leaves them alone.
PUSHED_PREFIX = "@api/"
# A folder file whose path would fall in the pushed namespace is spelled with this prefix instead ("./@api/x").
_FOLDER_ESCAPE = "./"
_TRAVERSAL = re.compile(r"(?:^|[/\\])\.{1,2}(?:[/\\]|$)")  # a "." or ".." segment, between slashes or backslashes
_ABSOLUTE = re.compile(r"^(?:[/\\]|~(?:[/\\]|$)|[A-Za-z]:[/\\])")  # /x, \\server\x, ~/x, C:\x
_ESCAPES = re.compile(r"\\\\|\\x([89a-f][0-9a-f])")
_KINDS = {
    stat.S_IFIFO: "named pipe",
    stat.S_IFCHR: "character device",
    stat.S_IFBLK: "block device",
    stat.S_IFSOCK: "socket",
    stat.S_IFDIR: "folder",
    stat.S_IFLNK: "symbolic link",
}


def path_key(rel: str) -> str:
    """The index's name for a root-relative path (as the OS layer spells it): itself when it is valid UTF-8 without a
    backslash; otherwise with each backslash doubled and each byte that is not UTF-8 (surrogate-escaped by the OS
    layer) written `\\xNN`, so that two files never share a name. A folder path that would read as a pushed
    document's (`@api/…`) is spelled `./@api/…`."""
    try:
        rel.encode("utf-8")
        plain = "\\" not in rel
    except UnicodeEncodeError:
        plain = False
    key = rel if plain else "".join("\\\\" if c == "\\" else f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF else c for c in rel)
    if key == PUSHED_PREFIX.rstrip("/") or key.startswith(PUSHED_PREFIX):
        key = _FOLDER_ESCAPE + key
    return key


def pushed_name_problem(name: str) -> str | None:
    """Why `name` cannot name a pushed document (stored as `@api/<name>`), or None: it must be a non-empty single line
    of printable characters, relative (no leading `/`, `\\`, `~/` or drive letter) and without `.` or `..` segments
    (between `/` or `\\`), so that no name reads as a path outside the pushed namespace. Names are refused, never
    rewritten: two different names never become one document."""
    if not name.strip():
        return "is empty: give the document a name"
    bad = next((c for c in name if not c.isprintable()), None)
    if bad is not None:
        return f"holds a control or invisible character ({bad.encode('unicode_escape').decode('ascii')}): use a single line of printable characters"
    if _ABSOLUTE.match(name):
        return "is absolute (starts with /, \\, ~/ or a drive letter): use a relative name such as notes/memo-1"
    if _TRAVERSAL.search(name):
        return "holds a '.' or '..' segment: use a name without them, such as notes/memo-1"
    return None


def key_path(key: str) -> str:
    """The root-relative path, as the OS layer spells it, of an index name (the inverse of path_key)."""
    rel = key[len(_FOLDER_ESCAPE) :] if key.startswith(_FOLDER_ESCAPE + PUSHED_PREFIX.rstrip("/")) else key
    if "\\" not in rel:
        return rel
    return _ESCAPES.sub(lambda m: "\\" if m.group(0) == "\\\\" else chr(0xDC00 + int(m.group(1), 16)), rel)


def printable(name: str) -> str:
    """A name safe to print on a terminal: control characters, invisible marks and lone surrogates escaped."""
    out = []
    for c in name:
        if 0xDC80 <= ord(c) <= 0xDCFF:  # a byte the OS layer could not decode
            out.append(f"\\x{ord(c) - 0xDC00:02x}")
        else:
            out.append(c if c.isprintable() else c.encode("unicode_escape").decode("ascii"))
    return "".join(out)


def not_regular(mode: int) -> str | None:
    """Why a file of this mode is not read (a pipe, device, socket, folder), or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return f"not a regular file ({_KINDS.get(stat.S_IFMT(mode), 'special file')}); skipped"


def open_regular(path: Path, follow_symlinks: bool = True) -> BinaryIO:
    """Open a file for reading only if it is a regular file: a named pipe or device is never waited on (the open does
    not block) and never read; a symbolic link is refused unless followed."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ReadError("a symbolic link (index.follow_symlinks is off); skipped") from exc
        raise
    try:
        reason = not_regular(os.fstat(fd).st_mode)
        if reason:
            raise ReadError(reason, "exclude it with index.exclude if it should not be scanned")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_limited(path: Path, limit: int, follow_symlinks: bool = True) -> bytes:
    """A regular file's bytes, refused once more than `limit` bytes were read (a file growing while read)."""
    with open_regular(path, follow_symlinks) as fh:
        data = fh.read(limit + 1)
    check_read(len(data), limit)
    return data


def check_read(seen: int, limit: int | None) -> None:
    """ReadError once `seen` bytes read from a file pass `limit` (None: no limit): the file grew after it was listed."""
    if limit is not None and seen > limit:
        raise ReadError(
            f"larger than {limit / 1e6:.1f} MB when read (it grew after it was listed)",
            "raise index.max_file_mb or index.max_parsed_mb, or exclude the file",
        )
