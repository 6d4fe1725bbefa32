"""The encoders' error: a model that cannot be found or loaded."""

from lodex.store.errors import LodexError


class ModelError(LodexError):
    """The encoder model cannot be found or loaded."""

    code = "model_error"
