"""What the HTTP routers share: what a route is given (the app's service and reads, as FastAPI dependencies), the
error responses they document, lodex's version, the query thread, and waiting on a write queued on the writer."""

import asyncio
from collections.abc import Callable
from concurrent.futures import Future
from importlib import metadata
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request

from lodex.api.models import ErrorOut
from lodex.api.read_side import ServedReads
from lodex.api.service import LodexService
from lodex.indexer.errors import Interrupted

T = TypeVar("T")
ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorOut} for code in (400, 401, 403, 404, 409, 413, 422, 429, 503)}


def _service(request: Request) -> LodexService:
    return request.app.state.service  # type: ignore[no-any-return]


def _reads(request: Request) -> ServedReads:
    return request.app.state.reads  # type: ignore[no-any-return]


# What a route takes to reach the running service and its reads (set on app.state by `create_app`).
Service = Annotated[LodexService, Depends(_service)]
Reads = Annotated[ServedReads, Depends(_reads)]


def lodex_version() -> str:
    """The installed package's version ("dev" in a source tree that is not installed)."""
    try:
        return metadata.version("lodex")
    except metadata.PackageNotFoundError:
        return "dev"


async def on_query_thread(service: LodexService, fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` run on `service`'s query threads, off the event loop."""
    return await asyncio.get_running_loop().run_in_executor(service.queries, fn, *args)


async def writer_result(done: "Future[T]") -> T:
    """The result of a request queued on the writer; one cancelled because lodex is stopping answers 503."""
    try:  # shielded: a client that goes away does not cancel the write it asked for
        return await asyncio.shield(asyncio.wrap_future(done))
    except asyncio.CancelledError:
        if done.cancelled():
            raise Interrupted() from None  # the writer dropped it; the request itself was not cancelled
        raise
