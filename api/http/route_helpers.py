"""What the HTTP routers share: what a route is given (the application object and its serve role's pieces, as FastAPI
dependencies), the error responses they document, lodex's version, the query thread, and waiting on a write queued on
the writer."""

import asyncio
from collections.abc import Callable
from concurrent.futures import Future
from importlib import metadata
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request

from lodex.api.application import Application
from lodex.api.models import ErrorOut
from lodex.api.serving import Serving
from lodex.indexer.errors import Interrupted

T = TypeVar("T")
ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorOut} for code in (400, 401, 403, 404, 409, 413, 422, 429, 503)}


def _app(request: Request) -> Application:
    return request.app.state.lodex  # type: ignore[no-any-return]


def _serving(request: Request) -> Serving:
    return _app(request).served


# What a route takes to reach the served application and its serve role's pieces (set on app.state by `create_app`).
App = Annotated[Application, Depends(_app)]
Served = Annotated[Serving, Depends(_serving)]


def lodex_version() -> str:
    """The installed package's version ("dev" in a source tree that is not installed)."""
    try:
        return metadata.version("lodex")
    except metadata.PackageNotFoundError:
        return "dev"


async def on_query_thread(serving: Serving, fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` run on the serve role's query threads, off the event loop."""
    return await asyncio.get_running_loop().run_in_executor(serving.queries, fn, *args)


async def writer_result(done: "Future[T]") -> T:
    """The result of a request queued on the writer; one cancelled because lodex is stopping answers 503."""
    try:  # shielded: a client that goes away does not cancel the write it asked for
        return await asyncio.shield(asyncio.wrap_future(done))
    except asyncio.CancelledError:
        if done.cancelled():
            raise Interrupted() from None  # the writer dropped it; the request itself was not cancelled
        raise
