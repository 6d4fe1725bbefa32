"""GET and POST /search: rank documents and return each with its best passages."""

import asyncio
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Response

from lodex.api.application import Application
from lodex.api.http.route_helpers import ERRORS, App
from lodex.api.request import SearchRequest, search_request
from lodex.search.names import Mode
from lodex.search.results import SearchResponse

router = APIRouter(tags=["search"])


async def run_search(app: Application, request: SearchRequest) -> Response:
    """One search, within the application's request limits, answered as JSON (waiting on the query batcher off the
    event loop)."""
    search = request.checked(app.limits)
    response = await asyncio.wrap_future(app.served.search(search.query, search.k, search.filters, search.mode))
    return Response(response.to_json(), media_type="application/json")  # already the SearchResponse shape: no second validation


@router.get("/search", response_model=SearchResponse, responses=ERRORS)
async def search_get(
    app: App,
    q: Annotated[str, Query(description="The query, in plain words.", max_length=100_000)],
    k: Annotated[int | None, Query(description="Documents to return.")] = None,
    path_glob: Annotated[str | None, Query(description="Only documents whose relative path matches this glob.")] = None,
    path: Annotated[str | None, Query(description="path_glob's former name.", deprecated=True)] = None,
    ext: Annotated[list[str] | None, Query(description="File extensions (repeatable).")] = None,
    modified_after: Annotated[datetime | None, Query(description="ISO 8601 time or epoch seconds.")] = None,
    mode: Annotated[Mode | None, Query(description="Retrieval mode (default: search.mode).")] = None,
    lang: Annotated[list[str] | None, Query(description="Only documents in these languages (ISO 639-1, repeatable).")] = None,
) -> Response:
    """Rank documents (dense, keyword or hybrid retrieval); return each with its best passages."""
    return await run_search(
        app,
        search_request(q=q, k=k, path_glob=path if path_glob is None else path_glob, ext=ext, modified_after=modified_after, mode=mode, lang=lang),
    )


@router.post("/search", response_model=SearchResponse, responses=ERRORS)
async def search_post(app: App, body: SearchRequest) -> Response:
    """Same as GET /search, with a JSON body."""
    return await run_search(app, body)
