"""The one error hierarchy of lodex: every failure a user can meet, with the fix to apply."""


class LodexError(Exception):
    """A failure a user can act on: `message` says what happened, `fix` what to do."""

    code = "lodex_error"

    def __init__(self, message: str, fix: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def one_line(self) -> str:
        """The message and its fix on one line, for the CLI."""
        return f"{self.message} — {self.fix}" if self.fix else self.message


class ConfigError(LodexError):
    """The configuration file, an environment variable or a flag holds an invalid value."""

    code = "config_error"


class OriginMismatchError(LodexError):
    """The index was built with another encoder or other chunking settings."""

    code = "origin_mismatch"


class StoreError(LodexError):
    """The data directory cannot be opened, read or written."""

    code = "store_error"


class ModelError(LodexError):
    """The encoder model cannot be found or loaded."""

    code = "model_error"


class ReadError(LodexError):
    """One input file cannot be indexed (binary, too large, undecodable, unreadable)."""

    code = "read_error"

    def __init__(self, message: str, fix: str = "", permanent: bool = True) -> None:
        super().__init__(message, fix)
        self.permanent = permanent
