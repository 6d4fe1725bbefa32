"""The base of lodex's errors (in the store, below every layer that raises them): a failure a user can act on, of a
kind (its `code`), with the fix to apply; the store's own errors; a wrong setting."""


class LodexError(Exception):
    """A failure a user can act on: `message` says what happened, `fix` what to do. Each subclass names its kind,
    `code`; the doors map kinds to what they answer (the HTTP status: api/http/errors.py's STATUS_OF_KIND)."""

    code = "lodex_error"

    def __init__(self, message: str, fix: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def one_line(self) -> str:
        """The message and its fix on one line, for the CLI."""
        return f"{self.message} — {self.fix}" if self.fix else self.message


class ConfigError(LodexError):
    """The configuration file, an environment variable, a flag or a request holds an invalid value."""

    code = "config_error"


class OriginMismatchError(LodexError):
    """The index was built with another encoder or other chunking settings."""

    code = "origin_mismatch"


class StoreError(LodexError):
    """The data directory cannot be opened, read or written."""

    code = "store_error"


class ReadOnlyError(LodexError):
    """A write (push, delete, reindex) asked of a read-only replica (`lodex serve --read-only`)."""

    code = "read_only"


class BusyError(LodexError):
    """A write refused because as many requests wait already as lodex keeps: the client sends it again later, after
    `retry_after` seconds."""

    code = "busy"

    def __init__(self, message: str, fix: str = "", retry_after: float = 5.0) -> None:
        super().__init__(message, fix)
        self.retry_after = retry_after


class NotFoundError(LodexError):
    """A document asked for by id (or citation) that the index does not hold."""

    code = "not_found"
