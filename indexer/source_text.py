"""A plain-text folder file read again, when it still holds the content that was indexed: a passage read in context
is cut from it (its offsets index it)."""

from pathlib import Path
from typing import Any

from lodex.indexer.identity import content_hash
from lodex.indexer.paths import PUSHED_PREFIX, key_path, open_regular
from lodex.indexer.readers.decoding import decode_source


def source_text(row: dict[str, Any], root: Path | None) -> str | None:
    """A plain-text folder file's decoded text, when the file still holds the indexed content; else None."""
    if root is None or row["format"] != "text" or row["path"].startswith(PUSHED_PREFIX):
        return None
    try:
        with open_regular(root / key_path(row["path"])) as fh:
            data = fh.read(row["size"] + 1)
        if content_hash(data) != row["content_hash"]:
            return None
        return decode_source(data)[0]
    except Exception:  # noqa: BLE001 — gone, unreadable, changed: the stored chunks answer instead
        return None
