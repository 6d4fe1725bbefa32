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
    max_file_bytes: int = 50 * 1024 * 1024
    follow_symlinks: bool = False

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
        base = Path(dirpath)
        for name in filenames:
            if rules.skip_hidden and name.startswith("."):
                continue
            full = base / name
            rel = full.relative_to(root).as_posix()
            if not rules.wants(rel):
                continue
            try:
                if full.is_symlink() and not rules.follow_symlinks:
                    continue
                stat = full.stat()
            except OSError:
                continue  # vanished or dangling link: nothing to index
            if stat.st_size > rules.max_file_bytes:
                refused[rel] = f"too large ({stat.st_size / 1e6:.1f} MB > index.max_file_mb {rules.max_file_bytes / 1e6:.1f} MB)"
                continue
            files.append(FileEntry(rel, full, stat.st_size, stat.st_mtime))
    files.sort(key=lambda f: f.path)
    return files, refused
