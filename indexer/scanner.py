"""Walk a folder and list the files lodex should index, applying include/exclude globs and limits."""

import os
from collections import Counter
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath

from lodex.indexer.paths import key_path, not_regular, path_key
from lodex.indexer.readers.readers import format_of
from lodex.indexer.readers.sniffing import sniff_path
from lodex.indexer.settings import IndexSettings

_DEFAULTS = IndexSettings()  # ScanRules() are the documented defaults
# Extensions of media and program files: counted as skipped without opening them to sniff their content.
_MEDIA = frozenset(
    ".jpg .jpeg .png .gif .bmp .tif .tiff .webp .heic .svg .ico .mp3 .m4a .wav .flac .ogg .mp4 .m4v .mov .avi "
    ".mkv .webm .iso .dmg .exe .dll .so .dylib .o .a .pyc .class .jar .woff .woff2 .ttf .otf".split()
)
_MIB = 1024 * 1024


@dataclass(frozen=True)
class FileEntry:
    """A file found under the root: its path relative to the root (POSIX style), size and mtime."""

    path: str
    abspath: Path
    size: int
    mtime: float


@dataclass(frozen=True)
class ScanRules:
    """Which files to index: globs on the relative path (or the file name), hidden files, size limit."""

    include: list[str] = field(default_factory=lambda: list(_DEFAULTS.include))
    exclude: list[str] = field(default_factory=lambda: list(_DEFAULTS.exclude))
    skip_hidden: bool = _DEFAULTS.skip_hidden
    max_file_bytes: int = int(_DEFAULTS.max_file_mb * _MIB)
    follow_symlinks: bool = _DEFAULTS.follow_symlinks
    max_parsed_bytes: int = int(_DEFAULTS.max_parsed_mb * _MIB)  # formats read whole (all but plain text) above this are refused
    stream_bytes: int = int(_DEFAULTS.stream_above_mb * _MIB)  # plain-text files above this are read and committed in parts

    @classmethod
    def from_settings(cls, cfg: IndexSettings) -> "ScanRules":
        """The rules of the [index] settings."""
        return cls(
            list(cfg.include),
            list(cfg.exclude),
            cfg.skip_hidden,
            int(cfg.max_file_mb * _MIB),
            cfg.follow_symlinks,
            int(cfg.max_parsed_mb * _MIB),
            int(cfg.stream_above_mb * _MIB),
        )

    def wants(self, rel: str) -> bool:
        """True when `rel` passes the include/exclude globs and has a reader by its extension."""
        return format_of(rel) is not None and self.selects(rel)

    def selects(self, rel: str) -> bool:
        """True when `rel` passes the include/exclude globs."""
        name = rel.rsplit("/", 1)[-1]
        if not any(fnmatch(rel, g) or fnmatch(name, g) for g in self.include):
            return False
        return not any(fnmatch(rel, g) or fnmatch(name, g) for g in self.exclude)

    def skips_dir(self, name: str) -> bool:
        """True for directories never entered: .git always, hidden ones unless configured."""
        return name == ".git" or (self.skip_hidden and name.startswith("."))


@dataclass
class Scan:
    """What a scan found: files to index (sorted by path), {path: reason} for those refused (too large, not a regular
    file, a folder link that loops back), and how many files were left out for want of a reader, by extension."""

    files: list[FileEntry] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    skipped: Counter[str] = field(default_factory=Counter)

    def add(self, got: "FileEntry | tuple[str, str] | str | None") -> None:
        """Count one file's verdict (see _entry)."""
        if isinstance(got, FileEntry):
            self.files.append(got)
        elif isinstance(got, tuple):
            self.refused[got[0]] = got[1]
        elif isinstance(got, str):
            self.skipped[got] += 1


def scan(root: Path, rules: ScanRules, start: Path | None = None) -> Scan:
    """Files under `root` (or only under its folder `start`) to index, and those refused or skipped."""
    found = Scan()
    top = start or root
    ancestors = _ancestors(root, top)
    if ancestors is not None:
        _walk(root, top, rules, ancestors, found)
    found.files.sort(key=lambda f: f.path)
    return found


def _ancestors(root: Path, folder: Path) -> set[tuple[int, int]] | None:
    """(device, inode) of every folder from `root` down to `folder`'s parent; None when one cannot be read."""
    seen: set[tuple[int, int]] = set()
    current = root
    try:
        for part in folder.relative_to(root).parts:
            info = current.stat()
            seen.add((info.st_dev, info.st_ino))
            current = current / part
    except (OSError, ValueError):
        return None
    return seen


def _walk(root: Path, folder: Path, rules: ScanRules, ancestors: set[tuple[int, int]], found: Scan) -> None:
    """Depth-first walk; a folder whose (device, inode) is one of its own ancestors' (a link loop) is refused."""
    try:
        info = folder.stat()
        here = (info.st_dev, info.st_ino)
        if here in ancestors:
            found.refused[path_key(folder.relative_to(root).as_posix())] = "symbolic link loop (links back to a folder above it); skipped"
            return
        with os.scandir(folder) as listing:
            items = sorted(listing, key=lambda e: e.name)
    except OSError:
        return
    below = ancestors | {here}
    for item in items:
        full = Path(item.path)
        try:
            is_link = item.is_symlink()
            is_dir = item.is_dir(follow_symlinks=rules.follow_symlinks)
        except OSError:
            continue
        if is_dir:
            if not rules.skips_dir(item.name) and (rules.follow_symlinks or not is_link):
                _walk(root, full, rules, below, found)
            continue
        found.add(_entry(root, full, rules))


def _entry(root: Path, full: Path, rules: ScanRules) -> FileEntry | tuple[str, str] | str | None:
    """One file as an entry, (path, reason) when it is refused, its extension when no reader takes it (a file whose
    content is a format lodex reads is taken whatever its extension), or None when it is left out or absent."""
    rel = full.relative_to(root).as_posix()
    parts = rel.split("/")
    if any(rules.skips_dir(p) for p in parts[:-1]) or (rules.skip_hidden and parts[-1].startswith(".")) or not rules.selects(rel):
        return None
    if format_of(rel) is None:
        suffix = PurePosixPath(rel).suffix.lower()
        if suffix in _MEDIA or sniff_path(full) is None:  # media files are not opened to be sniffed
            return suffix or "(no extension)"
    key = path_key(rel)
    try:
        if full.is_symlink() and not rules.follow_symlinks:
            return None
        info = full.stat()
    except OSError:
        return None
    reason = not_regular(info.st_mode)
    if reason:
        return key, reason
    if info.st_size > rules.max_file_bytes:
        return key, f"too large ({info.st_size / 1e6:.1f} MB > index.max_file_mb {rules.max_file_bytes / 1e6:.1f} MB)"
    return FileEntry(key, full, info.st_size, info.st_mtime)


def scan_paths(root: Path, paths: list[str], rules: ScanRules) -> Scan:
    """Like scan(), restricted to `paths` as the index names them (path_key of root-relative paths): files, and folders
    (their whole subtree)."""
    found = Scan()
    for given in paths:
        rel = key_path(given)
        full = root / rel
        if full.is_dir() and (rules.follow_symlinks or not full.is_symlink()):
            if not any(rules.skips_dir(p) for p in Path(rel).parts):
                below = scan(root, rules, full)
                found.files += below.files
                found.refused.update(below.refused)
                found.skipped.update(below.skipped)
            continue
        found.add(_entry(root, full, rules))
    unique = {f.path: f for f in found.files}
    found.files = sorted(unique.values(), key=lambda f: f.path)
    return found


def under(path: str, scopes: list[str]) -> bool:
    """True when the index name `path` is one of the index names `scopes` or lies inside one of them (as a folder)."""
    return any(path == s or path.startswith(s.rstrip("/") + "/") for s in scopes)
