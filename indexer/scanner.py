"""Walk a folder and list the files lodex should index, applying include/exclude globs and limits."""

import os
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path

from indexer.readers import format_of


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

    include: list[str] = field(default_factory=lambda: ["*"])
    exclude: list[str] = field(default_factory=list)
    skip_hidden: bool = True
    max_file_bytes: int = 1024 * 1024 * 1024
    follow_symlinks: bool = False
    max_parsed_bytes: int = 50 * 1024 * 1024  # formats read whole (all but plain text) above this are refused
    stream_bytes: int = 8 * 1024 * 1024  # plain-text files above this are read and committed in parts

    def wants(self, rel: str) -> bool:
        """True when `rel` passes the include/exclude globs and has a reader."""
        name = rel.rsplit("/", 1)[-1]
        if format_of(rel) is None:
            return False
        if not any(fnmatch(rel, g) or fnmatch(name, g) for g in self.include):
            return False
        return not any(fnmatch(rel, g) or fnmatch(name, g) for g in self.exclude)

    def skips_dir(self, name: str) -> bool:
        """True for directories never entered: .git always, hidden ones unless configured."""
        return name == ".git" or (self.skip_hidden and name.startswith("."))


def scan(root: Path, rules: ScanRules) -> tuple[list[FileEntry], dict[str, str]]:
    """Files under `root` to index, sorted by path, and {path: reason} for those refused by size."""
    files: list[FileEntry] = []
    refused: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=rules.follow_symlinks):
        dirnames[:] = sorted(d for d in dirnames if not rules.skips_dir(d))
        for name in filenames:
            got = _entry(root, Path(dirpath) / name, rules)
            if isinstance(got, FileEntry):
                files.append(got)
            elif isinstance(got, str):
                refused[(Path(dirpath) / name).relative_to(root).as_posix()] = got
    files.sort(key=lambda f: f.path)
    return files, refused


def _entry(root: Path, full: Path, rules: ScanRules) -> FileEntry | str | None:
    """One file as an entry, a refusal reason, or None when it is not to be indexed or absent."""
    rel = full.relative_to(root).as_posix()
    parts = rel.split("/")
    if any(rules.skips_dir(p) for p in parts[:-1]) or (rules.skip_hidden and parts[-1].startswith(".")) or not rules.wants(rel):
        return None
    try:
        if full.is_symlink() and not rules.follow_symlinks:
            return None
        stat = full.stat()
    except OSError:
        return None
    if stat.st_size > rules.max_file_bytes:
        return f"too large ({stat.st_size / 1e6:.1f} MB > index.max_file_mb {rules.max_file_bytes / 1e6:.1f} MB)"
    return FileEntry(rel, full, stat.st_size, stat.st_mtime)


def scan_paths(root: Path, paths: list[str], rules: ScanRules) -> tuple[list[FileEntry], dict[str, str]]:
    """Like scan(), restricted to root-relative paths: files, and folders (their whole subtree)."""
    files: dict[str, FileEntry] = {}
    refused: dict[str, str] = {}
    for rel in paths:
        full = root / rel
        if full.is_dir() and (rules.follow_symlinks or not full.is_symlink()):
            if any(rules.skips_dir(p) for p in Path(rel).parts):
                continue
            found, bad = scan(full, rules)
            prefix = rel.rstrip("/") + "/"
            files.update({prefix + f.path: FileEntry(prefix + f.path, f.abspath, f.size, f.mtime) for f in found})
            refused.update({prefix + p: r for p, r in bad.items()})
            continue
        got = _entry(root, full, rules)
        if isinstance(got, FileEntry):
            files[got.path] = got
        elif isinstance(got, str):
            refused[rel] = got
    return sorted(files.values(), key=lambda f: f.path), refused


def under(path: str, scopes: list[str]) -> bool:
    """True when `path` is one of `scopes` or lies inside one of them (as a folder)."""
    return any(path == s or path.startswith(s.rstrip("/") + "/") for s in scopes)
