"""Errors of the indexing side: a file that cannot be read, a model that cannot be loaded."""

from lodex.store.errors import LodexError


class ModelError(LodexError):
    """The encoder model cannot be found or loaded."""

    code = "model_error"
    status = 503


class ReadError(LodexError):
    """One input file (or pushed text) cannot be indexed: binary, too large, undecodable, unparsable, not a regular file."""

    code = "read_error"
    status = 422
