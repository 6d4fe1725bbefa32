"""The MCP `list_documents` cursor: an offset signed with this server's key and bound to the listing it pages
through, so that a forged, altered or borrowed cursor (another listing's, another server run's) is refused in words."""

import hashlib
import hmac
import json
import re
import secrets

from lodex.store.errors import ConfigError

_CURSOR = re.compile(r"(?P<offset>[0-9]{1,12})\.(?P<listing>[0-9a-f]{12})\.(?P<mac>[0-9a-f]{32})", re.ASCII)
_RESTART = "call list_documents without a cursor to start from the first page"


class Cursors:
    """Makes and checks the cursors of one server run (a new key each run: a cursor outlives no restart)."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key or secrets.token_bytes(32)

    @staticmethod
    def listing(path_glob: str | None, ext: list[str] | None) -> str:
        """A short fingerprint of the documents a listing pages through (its filters; the page size may change)."""
        asked = json.dumps([path_glob, sorted(ext or [])], ensure_ascii=True)
        return hashlib.sha256(asked.encode()).hexdigest()[:12]

    def _mac(self, offset: int, listing: str) -> str:
        return hmac.new(self._key, f"{offset}.{listing}".encode(), hashlib.sha256).hexdigest()[:32]

    def make(self, offset: int, listing: str) -> str:
        """The cursor of the page that starts at `offset` of `listing`."""
        return f"{offset}.{listing}.{self._mac(offset, listing)}"

    def offset(self, cursor: str | None, listing: str) -> int:
        """Where the page `cursor` names starts (0 without one); ConfigError for a cursor this server did not give
        for this listing."""
        if cursor is None:
            return 0
        found = _CURSOR.fullmatch(cursor)
        if found is None:
            raise ConfigError(
                f"cursor {cursor[:40]!r} is not one this server gave", f"pass the next_cursor of the previous answer unchanged, or {_RESTART}"
            )
        offset = int(found["offset"])
        if not hmac.compare_digest(found["mac"], self._mac(offset, found["listing"])):
            raise ConfigError(f"cursor {cursor[:40]!r} was altered or comes from an earlier run of this server", _RESTART)
        if found["listing"] != listing:
            raise ConfigError(
                "this cursor pages through another listing (other path_glob or ext)",
                f"pass the same path_glob and ext as the call that gave it, or {_RESTART}",
            )
        return offset
