"""The admin routes: reindex, health, identity, readiness, stats, status and Prometheus metrics."""

import time
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import JSONResponse

from lodex.api.http.metrics import Metrics
from lodex.api.http.route_helpers import ERRORS, App, Served, lodex_version, on_query_thread, writer_result
from lodex.api.http.server_record import CHALLENGE_PATTERN, Identity
from lodex.api.models import HealthOut, IdentityOut, IndexStatus, QueuedOut, ReadyOut, RunOut, StatsOut

router = APIRouter(tags=["admin"])


def _identity(request: Request) -> Identity:
    return request.app.state.identity  # type: ignore[no-any-return]


def _metrics(request: Request) -> Metrics:
    return request.app.state.metrics  # type: ignore[no-any-return]


@router.post(
    "/reindex",
    response_model=QueuedOut,
    status_code=202,
    responses={**ERRORS, 200: {"model": RunOut, "description": "With wait=true: the run is done."}},
)
async def reindex(
    app: App,
    serving: Served,
    wait: Annotated[
        bool, Query(description="Answer once the reconciliation is done (200, with its summary) instead of once it is queued (202).")
    ] = False,
) -> Response:
    """Queue a reconciliation of the index with the folder now."""
    done = app.queue_reindex()
    if not wait:
        return JSONResponse(QueuedOut(queued=True, queue_depth=serving.queue_depth).model_dump(), 202)
    summary = await writer_result(done)
    return JSONResponse(RunOut(**{k: v for k, v in summary.to_dict().items() if k in RunOut.model_fields}).model_dump())


@router.get("/health", response_model=HealthOut)
async def health() -> HealthOut:
    """Liveness: the process answers (no auth needed)."""
    return HealthOut(status="ok")


@router.get("/identity", response_model=IdentityOut, responses=ERRORS)
async def prove_identity(
    identity: Annotated[Identity, Depends(_identity)],
    challenge: Annotated[str, Query(pattern=CHALLENGE_PATTERN, description="A fresh random nonce: 32 to 128 lowercase hex digits.")],
) -> IdentityOut:
    """Proof that this is the server recorded in its data dir's server.json, asked (no key needed) by `lodex
    search` and `lodex status` before they send the API key: HMAC-SHA256 of the challenge under the per-start
    secret only that file (mode 0600) holds."""
    return IdentityOut(instance=identity.instance, proof=identity.proof(challenge))


@router.get("/ready", response_model=ReadyOut, responses=ERRORS)
async def ready(app: App, serving: Served) -> ReadyOut:
    """Readiness: the model is loaded and the index opens; `indexing` says whether changes (the startup
    reconciliation of the folder among them) are still being applied."""
    counts = await on_query_thread(serving, lambda: serving.reader().counts())
    indexing, left = serving.indexing()
    return ReadyOut(ready=True, model=app.encoder.model_id, documents=counts["documents"], indexing=indexing, files_left=left)


@router.get("/stats", response_model=StatsOut, responses=ERRORS)
async def stats(app: App, serving: Served) -> StatsOut:
    """The index's status (what GET /status gives) and the server's own figures: version, queue depth, encoder
    tokens/s, uptime."""
    status = await on_query_thread(serving, app.status)
    return StatsOut(
        **status.model_dump(),
        version=lodex_version(),
        queue_depth=serving.queue_depth,
        encode_tokens_per_s=round(serving.encode_tokens_per_s, 1),
        uptime_s=round(time.time() - serving.started_at, 1),
    )


@router.get("/status", response_model=IndexStatus, responses=ERRORS)
async def index_status(app: App, serving: Served) -> IndexStatus:
    """What the index holds: counts, model, folder, failures and the last run (what `lodex.Client.status()` gives)."""
    return await on_query_thread(serving, app.status)


@router.get("/metrics", response_class=Response, responses=ERRORS)
async def prometheus(serving: Served, metrics: Annotated[Metrics, Depends(_metrics)]) -> Response:
    """Prometheus text: request latency histogram, documents, chunks, queue depth, encoder tokens/s."""
    body = await on_query_thread(serving, metrics.render)
    return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")
