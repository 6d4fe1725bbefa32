"""Lance fragments written and appended through pylance directly: the rival writer of bench/scale/scaleout.py (another
process's commits racing the committer's), and the lookup of a commit whose reply was lost (its fragments in the latest
version: it landed, and must not be made twice)."""

import time
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

ATTEMPTS = 8  # tries of a write or a commit that the object store keeps failing (each after Lance's own retries)


@dataclass
class Tries:
    """How often writes and commits had to be tried again, and how many commits had landed though their reply was lost."""

    writes: int = 0
    commits: int = 0
    landed_unseen: int = 0


def dataset(uri: str, options: dict[str, str]) -> Any:
    """The Lance dataset at `uri`, at its latest version."""
    import lance

    return lance.dataset(uri, storage_options=options)


def write(table: pa.Table, uri: str, options: dict[str, str], tries: Tries) -> list[Any]:
    """The rows of `table` written as fragments of the dataset at `uri`, not committed: their FragmentMetadata. A write
    that fails is made again (into new files: the failed one's are referred to by no version)."""
    import lance

    for attempt in range(ATTEMPTS):
        try:
            return list(lance.fragment.write_fragments(table, uri, table.schema, storage_options=options))
        except OSError:
            if attempt == ATTEMPTS - 1:
                raise
            tries.writes += 1
            time.sleep(0.1 * 2**attempt)
    raise AssertionError("unreachable")


def files_of(fragments: list[Any]) -> set[str]:
    """The data files these fragments' rows are in (unique names: a fragment's files are its identity)."""
    return {f.path for fragment in fragments for f in fragment.data_files()}


def committed_files(ds: Any) -> set[str]:
    """The data files of every fragment of this dataset version."""
    return files_of([fragment.metadata for fragment in ds.get_fragments()])


def append(uri: str, fragments: list[Any], read_version: int, options: dict[str, str], tries: Tries) -> Any:
    """Commit these fragments to the dataset at `uri` in one Append (Lance rebases it on any version committed since
    `read_version`: appends do not conflict); the new version. A failed commit is looked up before it is tried again:
    when its fragments are in the latest version, its reply was lost and it is not made twice."""
    import lance

    for attempt in range(ATTEMPTS):
        try:
            return lance.LanceDataset.commit(uri, lance.LanceOperation.Append(fragments), read_version=read_version, storage_options=options)
        except OSError:
            if attempt == ATTEMPTS - 1:
                raise
            tries.commits += 1
            time.sleep(0.1 * 2**attempt)
            latest = _latest(uri, options)  # never tried again before the lookup answers: it could land twice
            if files_of(fragments) <= committed_files(latest):
                tries.landed_unseen += 1
                return latest
            read_version = latest.version
    raise AssertionError("unreachable")


def landed(uri: str, fragments: list[Any], options: dict[str, str]) -> bool:
    """Whether these fragments are in the latest version of the dataset at `uri` (a commit that failed took effect)."""
    return files_of(fragments) <= committed_files(_latest(uri, options))


def _latest(uri: str, options: dict[str, str]) -> Any:
    """The latest version, read again while the object store fails."""
    for attempt in range(ATTEMPTS):
        try:
            return dataset(uri, options)
        except OSError:
            if attempt == ATTEMPTS - 1:
                raise
            time.sleep(0.1 * 2**attempt)
    raise AssertionError("unreachable")
