"""The OpenAI-compatible embeddings door of `lodex serve`: POST /v1/embeddings and GET /v1/models, answered by the
index's own encoder on the query encoder's thread (a slice at a time, between searches), so a tool embeds its text
exactly as lodex does."""

import asyncio
import base64
from typing import Any, Literal, cast

import numpy as np
from fastapi import APIRouter, HTTPException, Response
from pydantic import BaseModel, Field, field_validator
from pydantic_core import PydanticCustomError, to_json

from lodex.api.application import Application
from lodex.api.models import ErrorOut, valid_text

Kind = Literal["query", "document"]
SUFFIXES: dict[str, Kind] = {":query": "query", ":document": "document"}  # a model name with one picks the kind
ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorOut} for code in (401, 403, 404, 413, 422, 429, 503)}
ROWS_PER_PIECE = 64  # vectors turned into JSON at once: a large answer is built in short pieces, off the event loop


class EmbeddingsIn(BaseModel):
    """POST /v1/embeddings body, as OpenAI's (token-id inputs are not taken: send text)."""

    input: str | list[str] = Field(description="A text, or a list of texts, to embed (token ids are not taken).")
    model: str = Field(description="The index's model id (GET /v1/models), optionally with :query or :document.")
    encoding_format: Literal["float", "base64"] = Field("float", description="float: lists of numbers; base64: little-endian float32 bytes.")
    dimensions: int | None = Field(None, strict=True, description="Must be the model's dimension when given (vectors are not shortened).")
    input_type: Kind | None = Field(
        None,
        description="Embed as search queries (the query prompt) or as documents (the document prompt); default query, or the model name's suffix.",
    )
    user: str | None = None

    @field_validator("input", mode="before")
    @classmethod
    def _texts(cls, value: Any) -> Any:
        """Text, or a list of texts; anything else (token ids, nulls, objects, nested lists) refused with a plain reason."""
        if _token_ids(value):
            raise PydanticCustomError("token_ids", "token ids are not accepted: send the texts themselves (a text or a list of texts)")
        if not isinstance(value, (str, list)):
            raise PydanticCustomError("not_text", "must be a text or a list of texts, not {kind}", {"kind": _json_kind(value)})
        for i, item in enumerate([value] if isinstance(value, str) else value):
            if not isinstance(item, str):
                raise PydanticCustomError("not_text", "item {i} is {kind}: every input must be a text", {"i": i, "kind": _json_kind(item)})
            try:
                valid_text(item)
            except ValueError as exc:
                raise PydanticCustomError("not_text", "item {i} {reason}", {"i": i, "reason": str(exc)}) from exc
        return value


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


def _numbers(value: Any) -> bool:
    """Whether `value` is a non-empty list of integers (one text's token ids)."""
    return isinstance(value, list) and bool(value) and all(type(x) is int for x in value)


def _token_ids(value: Any) -> bool:
    """Whether `value` is OpenAI's token-id input: a number, a list of numbers, or a list of such lists."""
    return type(value) is int or _numbers(value) or (isinstance(value, list) and bool(value) and all(_numbers(v) for v in value))


def _json_kind(value: Any) -> str:
    """What a JSON value is, in words."""
    kinds = ((type(None), "null"), (bool, "true or false"), ((int, float), "a number"), (dict, "an object"), (list, "a list"))
    return next((name for kind, name in kinds if isinstance(value, kind)), "not text")


def _encoded(vector: np.ndarray, encoding: str) -> list[float] | str:
    if encoding == "base64":
        return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    return cast(list[float], vector.tolist())


def embeddings_json(vectors: np.ndarray, tokens: int, model: str, encoding: str) -> bytes:
    """The EmbeddingsOut body as JSON bytes, built ROWS_PER_PIECE vectors at a time (a thread doing it lets the event
    loop in between pieces; pydantic's one call over 2,048 vectors held it for a tenth of a second and more)."""
    pieces = [
        to_json(
            [
                {"object": "embedding", "index": start + i, "embedding": _encoded(v, encoding)}
                for i, v in enumerate(vectors[start : start + ROWS_PER_PIECE])
            ]
        )[1:-1]
        for start in range(0, len(vectors), ROWS_PER_PIECE)
    ]
    usage = to_json({"prompt_tokens": tokens, "total_tokens": tokens})
    return b'{"object":"list","data":[' + b",".join(pieces) + b'],"model":' + to_json(model) + b',"usage":' + usage + b"}"


def embeddings_router(app: Application) -> APIRouter:
    """The /v1 routes over the serving application's encoder."""
    router = APIRouter(prefix="/v1", tags=["embeddings"])
    model_id = app.encoder.model_id
    limits = app.settings.api

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
    async def embeddings(body: EmbeddingsIn) -> Response:
        """Embed texts with the index's model, as OpenAI's embeddings API does (as queries by default: input_type or
        a :document model suffix for passages); texts longer than the model's window are cut as lodex cuts them. Too
        many texts or too long a one answers 413; more texts waiting than the server queues, 429 with Retry-After."""
        kind = kind_of(body)
        texts = [body.input] if isinstance(body.input, str) else body.input
        if not texts:
            raise HTTPException(422, "input is empty: send a text or a list of texts")
        if len(texts) > limits.max_embed_inputs:
            raise HTTPException(
                413, f"{len(texts)} inputs: at most {limits.max_embed_inputs} in one request (api.max_embed_inputs); send them in smaller batches"
            )
        if (longest := max(len(t) for t in texts)) > limits.max_embed_chars:
            raise HTTPException(
                413, f"an input of {longest} characters: at most {limits.max_embed_chars} (api.max_embed_chars); cut it into smaller texts"
            )
        if body.dimensions is not None and body.dimensions != app.encoder.dim:
            raise HTTPException(422, f"dimensions {body.dimensions}: this model gives {app.encoder.dim} (leave it out)")
        vectors, tokens = await asyncio.wrap_future(app.served.embed(texts, kind))  # BusyError (429) past the queue's bound
        content = await asyncio.to_thread(embeddings_json, vectors, tokens, body.model, body.encoding_format)
        return Response(content, media_type="application/json")  # the EmbeddingsOut shape, built off the event loop

    @router.get("/models", response_model=ModelsOut, responses=ERRORS)
    async def models() -> ModelsOut:
        """The model this server embeds with (the index's), as OpenAI lists models; add :query or :document to its id
        to choose how texts are embedded."""
        return ModelsOut(data=[ModelOut(id=model_id)])

    return router
