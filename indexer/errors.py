"""Errors of the indexing side: a file that cannot be read, a run asked to stop (a model that cannot be loaded is
encoders/errors.py's)."""

from lodex.store.errors import LodexError


class ReadError(LodexError):
    """One input file (or pushed text) cannot be indexed: binary, too large, undecodable, unparsable, not a regular file."""

    code = "read_error"


class Interrupted(LodexError):
    """The run was asked to stop (the process is stopping): what is committed stays, the next run does the rest."""

    code = "stopping"

    def __init__(self, message: str = "lodex is stopping: this change was not finished", fix: str = "it is applied when lodex starts again") -> None:
        super().__init__(message, fix)
