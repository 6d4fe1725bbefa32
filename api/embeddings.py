"""The OpenAI-compatible embeddings door of `lodex serve`: POST /v1/embeddings and GET /v1/models, answered by the
index's own encoder on the query encoder's thread (as searches are), so a tool embeds its text exactly as lodex does."""

import asyncio
import base64
from typing import Any, Literal

import numpy as np
from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, Field

from lodex.api.models import ErrorOut, Text
from lodex.api.service import LodexService

Kind = Literal["query", "document"]
SUFFIXES: dict[str, Kind] = {":query": "query", ":document": "document"}  # a model name with one picks the kind
ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorOut} for code in (401, 403, 404, 413, 422, 503)}


class EmbeddingsIn(BaseModel):
    """POST /v1/embeddings body, as OpenAI's (token-id inputs are not taken: send text)."""

    input: Text | list[Text] = Field(description="A text, or a list of texts, to embed.")
    model: str = Field(description="The index's model id (GET /v1/models), optionally with :query or :document.")
    encoding_format: Literal["float", "base64"] = Field("float", description="float: lists of numbers; base64: little-endian float32 bytes.")
    dimensions: int | None = Field(None, description="Must be the model's dimension when given (vectors are not shortened).")
    input_type: Kind | None = Field(None, description="Embed as search queries (the query prompt) or as documents "
                                                      "(the document prompt); default query, or the model name's suffix.")
    user: str | None = None


class EmbeddingOut(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str


class UsageOut(BaseModel):
    prompt_tokens: int
    total_tokens: int


class EmbeddingsOut(BaseModel):
    object: Literal["list"] = "list"
    data: list[EmbeddingOut]
    model: str
    usage: UsageOut


class ModelOut(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "lodex"


class ModelsOut(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelOut]


def _encoded(vector: np.ndarray, encoding: str) -> list[float] | str:
    if encoding == "base64":
        return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    return vector.tolist()


def embeddings_router(service: LodexService) -> APIRouter:
    """The /v1 routes over `service`'s encoder."""
    router = APIRouter(prefix="/v1", tags=["embeddings"])
    model_id = service.encoder.model_id
    limits = service.settings.api

    def kind_of(body: EmbeddingsIn) -> Kind:
        base, suffix = body.model, None
        for tail, kind in SUFFIXES.items():
            if body.model.endswith(tail):
                base, suffix = body.model[: -len(tail)], kind
        if base not in (model_id, "lodex"):
            raise HTTPException(404, f"model {body.model[:200]!r} is not served here: use {model_id!r} (or with :query or :document)")
        if body.input_type and suffix and body.input_type != suffix:
            raise HTTPException(422, f"input_type {body.input_type!r} contradicts the model name's {suffix!r}: give one")
        return body.input_type or suffix or "query"

    @router.post("/embeddings", response_model=EmbeddingsOut, responses=ERRORS)
    async def embeddings(body: EmbeddingsIn) -> EmbeddingsOut:
        """Embed texts with the index's model, as OpenAI's embeddings API does (as queries by default: input_type or
        a :document model suffix for passages); texts longer than the model's window are cut as lodex cuts them."""
        kind = kind_of(body)
        texts = [body.input] if isinstance(body.input, str) else body.input
        if not texts:
            raise HTTPException(422, "input is empty: send a text or a list of texts")
        if len(texts) > limits.max_embed_inputs:
            raise HTTPException(422, f"{len(texts)} inputs: at most {limits.max_embed_inputs} in one request (api.max_embed_inputs)")
        if (longest := max(len(t) for t in texts)) > limits.max_embed_chars:
            raise HTTPException(422, f"an input of {longest} characters: at most {limits.max_embed_chars} (api.max_embed_chars)")
        if body.dimensions is not None and body.dimensions != service.encoder.dim:
            raise HTTPException(422, f"dimensions {body.dimensions}: this model gives {service.encoder.dim} (leave it out)")
        vectors, tokens = await asyncio.wrap_future(service.embed(texts, kind))
        data = [EmbeddingOut(index=i, embedding=_encoded(v, body.encoding_format)) for i, v in enumerate(vectors)]
        return EmbeddingsOut(data=data, model=body.model, usage=UsageOut(prompt_tokens=tokens, total_tokens=tokens))

    @router.get("/models", response_model=ModelsOut, responses=ERRORS)
    async def models() -> ModelsOut:
        """The model this server embeds with (the index's), as OpenAI lists models; add :query or :document to its id
        to choose how texts are embedded."""
        return ModelsOut(data=[ModelOut(id=model_id)])

    return router
