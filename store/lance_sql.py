"""Lance SQL predicates, built here and nowhere else: every value put into one is checked first (document ids and
content hashes are lowercase hex, chunk ids integers), so no text from a file, a request or a table can change what a
predicate means."""

import re
from collections.abc import Iterator, Sequence

IN_BATCH = 2_000  # values per `IN (...)` predicate
_HEX = re.compile(r"[0-9a-f]{1,64}")


def is_hex(value: object) -> bool:
    """Whether `value` can be a document id or content hash: lowercase hex, 1 to 64 digits."""
    return isinstance(value, str) and _HEX.fullmatch(value) is not None


def literal(value: str | int) -> str:
    """A value as a SQL literal: a hex string quoted, an integer as its digits; any other string is refused."""
    if isinstance(value, str):
        if not is_hex(value):
            raise ValueError(f"not a hex id: {value[:80]!r}")
        return f"'{value}'"
    return str(int(value))


def equals(column: str, value: str | int) -> str:
    """`column = value`."""
    return f"{column} = {literal(value)}"


def version_of(doc_id: str, content_hash: str) -> str:
    """The chunk rows of one document version."""
    return f"document_id = {literal(doc_id)} AND content_hash = {literal(content_hash)}"


def in_lists(column: str, values: Sequence[str | int]) -> Iterator[str]:
    """`column IN (...)` predicates that cover `values`, IN_BATCH of them each (all checked before the first)."""
    literals = [literal(v) for v in values]
    for i in range(0, len(literals), IN_BATCH):
        yield f"{column} IN ({', '.join(literals[i : i + IN_BATCH])})"
