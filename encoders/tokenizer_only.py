"""A TransformersEncoder's tokenizer and constants without its model, for the Ray tasks that read and chunk files."""

import copy
from typing import TYPE_CHECKING

import numpy as np

from lodex.encoders.encoder import Encoder
from lodex.encoders.errors import ModelError
from lodex.encoders.pooling import token_offsets

if TYPE_CHECKING:
    from lodex.encoders.transformers_encoder import TransformersEncoder


class TokenizerOnly(Encoder):
    """A TransformersEncoder's tokenizer and constants without its model: what a Ray task reads and chunks files with
    (pickled to it: a few MB, where the model is hundreds)."""

    def __init__(self, encoder: "TransformersEncoder") -> None:
        super().__init__(batch_tokens=encoder.batch_tokens)
        self.tokenizer = copy.deepcopy(encoder.tokenizer)
        for name in (
            "model_id",
            "fingerprint",
            "dim",
            "max_length",
            "window_limit",
            "special_tokens",
            "pooling",
            "normalize",
            "precision",
            "query_prefix",
            "document_prefix",
            "layer_weights",
            "group_tokens",
        ):
            setattr(self, name, getattr(encoder, name))

    def token_spans(self, texts: list[str]) -> list[np.ndarray]:
        return token_offsets(self.tokenizer, texts)  # one task reads its files one at a time: no other thread shares it

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        raise ModelError("a tokenizer-only encoder cannot embed", "encode with the TransformersEncoder it was made from")
