"""`lodex mcp`: the index as an MCP server (the official `mcp` SDK) for agents: tools to search, read a window of a
document, list documents and show the index's status, and documents as resources; over stdio (this process's read
side) or streamable HTTP mounted on `lodex serve` at /mcp (its query threads, its key and Host checks); its tools call
the one method list (LodexAPI) of the application object, or of anything that has it."""

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.context import Context
from mcp.server.mcpserver.exceptions import ResourceError, ToolError, UnexpectedToolError
from mcp_types import CallToolResult, InputRequiredResult
from pydantic import Field, ValidationError

from lodex.api.mcp.cursor import Cursors
from lodex.api.models import Text
from lodex.api.protocol import LodexAPI
from lodex.api.request import Limits, check_extensions, one_line
from lodex.search.names import Mode
from lodex.store.errors import ConfigError, LodexError

if TYPE_CHECKING:
    from lodex.api.application import Application

T = TypeVar("T")
CITATION = re.compile(r"lodex://documents/(?P<id>[0-9a-f]{16})(?:#chars=(?P<start>[0-9]{1,12})-(?P<end>[0-9]{1,12}))?", re.ASCII)
MAX_READ_CHARS = 20_000
INSTRUCTIONS = (
    "lodex searches a local folder of long documents by meaning and keywords. Call `search` first; each "
    "passage has a `citation` (lodex://documents/{id}#chars=a-b) to quote, which `read` opens with the text "
    "around it (pass start/end or page to widen it). `list_documents` pages through what is indexed."
)


def citation(doc_id: str, start: int, end: int) -> str:
    """The stable URI of characters start..end of a document (offsets into its extracted text)."""
    return f"lodex://documents/{doc_id}#chars={start}-{end}"


def parse_document(document: str) -> tuple[str, int | None, int | None]:
    """(id, start, end) of a document id or a citation URI."""
    document = document.strip()
    if re.fullmatch(r"[0-9a-f]{16}", document):
        return document, None, None
    found = CITATION.fullmatch(document)
    if found is None:
        raise ConfigError(
            f"{document[:80]!r} is neither a document id nor a lodex citation",
            "pass a result's `id` or a passage's `citation` (lodex://documents/<16 hex digits>#chars=a-b)",
        )
    start, end = found["start"], found["end"]
    return found["id"], int(start) if start else None, int(end) if end else None


def _answer(call: Callable[[], T], error: type[ToolError] | type[ResourceError] = ToolError) -> T:
    """The tool's (or resource's) answer; a lodex error becomes an MCP tool (resource) error with its message and fix
    (the session goes on)."""
    try:
        return call()
    except LodexError as exc:
        raise error(exc.one_line()) from exc


class LodexMCP(MCPServer):
    """The SDK's server, saying what is wrong with a tool's arguments in one plain line (the argument and the rule it
    breaks, as the JSON API does), not in pydantic's report of several lines and a link."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc, UnexpectedToolError) or not isinstance(exc.__cause__, ValidationError):
                raise
            raise ToolError(f"Error executing tool {name}: {one_line(exc.__cause__)} — see the tool's input schema (tools/list)") from exc.__cause__


def _read_range(first: int, last: int | None, window_start: int, window_end: int, path: str) -> None:
    """ConfigError for a range `read` cannot answer with text: one that ends before it starts, or that starts at or
    past the end of the document (whose window the read side clamped to `window_start`..`window_end`)."""
    if last is not None and last <= first:
        raise ConfigError(f"end {last} is not after start {first}", "pass an end greater than start, or no end")
    if first > 0 and window_start == window_end and first >= window_end:
        raise ConfigError(f"start {first} is past the end of {path}, which has {window_end} characters", f"pass a start below {window_end}")


def build_mcp(index: LodexAPI, limits: Limits = Limits(), version: str = "") -> MCPServer:
    """The MCP server over `index` (read-only tools and the documents as resources); `limits`: what its tools
    describe (the index checks each search against its own, as the HTTP API does)."""
    server: MCPServer = LodexMCP("lodex", instructions=INSTRUCTIONS, version=version, log_level="WARNING")
    _add_search(server, index, limits)
    _add_read(server, index)
    _add_listings(server, index)
    return server


def _add_search(server: MCPServer, index: LodexAPI, limits: Limits) -> None:
    """The `search` tool: the best documents, each with its best passages and their citations."""

    @server.tool(
        description="Search the indexed documents by meaning (and keywords in hybrid mode). Returns the best "
        "documents, each with its best passages: text, score, page, section, character offsets and a "
        "citation URI to quote or to pass to `read` for the surrounding text."
    )
    def search(
        query: Annotated[
            str, Field(description=f"What to look for, in plain words (a question or a few keywords; at most {limits.max_query_chars} characters).")
        ],
        k: Annotated[int, Field(description=f"How many documents to return (1 to {limits.max_k}).")] = limits.default_k,
        mode: Annotated[Mode | None, Field(description="dense (meaning), bm25 (exact words) or hybrid; default: the server's.")] = None,
        path_glob: Annotated[str | None, Field(description="Only documents whose relative path matches this glob, e.g. 'reports/*.pdf'.")] = None,
        ext: Annotated[list[str] | None, Field(description="Only these file extensions, e.g. ['pdf', 'md'].")] = None,
        modified_after: Annotated[str | None, Field(description="Only documents modified after this time (ISO 8601 or epoch seconds).")] = None,
        lang: Annotated[
            list[str] | None, Field(description="Only documents in these languages (ISO 639-1 codes, e.g. ['zh', 'de']; status() lists the index's).")
        ] = None,
    ) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            response = index.search(query, k, path_glob=path_glob, ext=ext, modified_after=modified_after, mode=mode, lang=lang)
            return {
                "query": response.query,
                "mode": response.mode,
                "results": [
                    {
                        "id": hit.doc_id,
                        "path": hit.path,
                        "title": hit.title,
                        "score": hit.score,
                        "uri": f"lodex://documents/{hit.doc_id}",
                        "passages": [
                            {
                                "text": p.text,
                                "score": p.score,
                                "page": p.page,
                                "page_end": p.page_end,
                                "section": p.section,
                                "char_start": p.char_start,
                                "char_end": p.char_end,
                                "citation": citation(hit.doc_id, p.char_start, p.char_end),
                            }
                            for p in hit.passages
                        ],
                    }
                    for hit in response.results
                ],
            }

        return _answer(run)


def _add_read(server: MCPServer, index: LodexAPI) -> None:
    """The `read` tool: a window of a document's text, from its id or a passage's citation."""

    @server.tool(
        description="Read a window of a document's text: pass a search result's `id` or a passage's `citation`; "
        "widen it with `start`/`end` (character offsets) or read a whole `page`. Returns the text with "
        "where it sits (offsets, page, section) and, when there is more, how to read on."
    )
    def read(
        document: Annotated[str, Field(description="A document id (16 hex digits) or a citation lodex://documents/{id}#chars=a-b.")],
        start: Annotated[int | None, Field(description="First character to read (default: the citation's start, else 0).", ge=0)] = None,
        end: Annotated[int | None, Field(description="Character after the last one to read (default: start + max_chars).", ge=0)] = None,
        page: Annotated[int | None, Field(description="Read this page (PDF page, slide) instead of offsets.", ge=0)] = None,
        max_chars: Annotated[int, Field(description="The most characters to return.", ge=1, le=MAX_READ_CHARS)] = 4000,
    ) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            doc_id, cited_start, cited_end = parse_document(document)
            first = start if start is not None else cited_start or 0
            last = end if end is not None else (cited_end if start is None else None)
            window = index.read(doc_id, first, last, page=page, max_chars=max_chars)
            if page is None:
                _read_range(first, last, window.start, window.end, window.path)
            asked_end = window.start + max_chars if last is None or page is not None else last
            answer = {**window.model_dump(), "citation": citation(doc_id, window.start, window.end)}
            if window.end - window.start >= max_chars or (window.end < asked_end and window.end - window.start == max_chars):
                answer["more"] = f"cut at max_chars={max_chars}: call read(document={doc_id!r}, start={window.end}) to read on"
            return answer

        return _answer(run)


def _add_listings(server: MCPServer, index: LodexAPI) -> None:
    """The `list_documents` (its cursors signed) and `status` tools, and the documents as resources."""
    cursors = Cursors()

    @server.tool(
        description="List the indexed documents by path, a page at a time (pass the `next_cursor` of one answer "
        "as `cursor` to get the next page); filter by path glob and extensions."
    )
    def list_documents(
        path_glob: Annotated[str | None, Field(description="Only paths matching this glob, e.g. 'notes/*'.", max_length=1000)] = None,
        ext: Annotated[list[str] | None, Field(description="Only these file extensions.", max_length=50)] = None,
        limit: Annotated[int, Field(description="Documents per page.", ge=1, le=500)] = 50,
        cursor: Annotated[str | None, Field(description="The next_cursor of the previous page; none for the first page.")] = None,
    ) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            check_extensions(ext)
            listing = cursors.listing(path_glob, ext)
            offset = cursors.offset(cursor, listing)
            page = index.documents(offset, limit, path_glob=path_glob, ext=ext)
            total, docs = page.total, page.documents
            following = offset + len(docs)
            return {
                "total": total,
                "documents": [
                    {
                        "id": d.id,
                        "path": d.path,
                        "title": d.title,
                        "format": d.format,
                        "size": d.size,
                        "mtime": d.mtime,
                        "chunks": d.chunk_count,
                        "uri": f"lodex://documents/{d.id}",
                    }
                    for d in docs
                ],
                "next_cursor": cursors.make(following, listing) if following < total else None,
            }

        return _answer(run)

    @server.tool(description="What the index holds: documents, chunks, failed files, the model, the folder and the last indexing run.")
    def status() -> dict[str, Any]:
        return _answer(lambda: index.status().model_dump())

    @server.resource(
        "lodex://documents/{doc_id}",
        name="document",
        mime_type="text/plain",
        description="A document's extracted text (its first 20,000 characters; the `read` tool reads further).",
    )
    def document(doc_id: str) -> str:
        return _answer(lambda: index.read(doc_id, 0, None, max_chars=MAX_READ_CHARS).text, ResourceError)


def add_write_tools(server: MCPServer, app: "Application") -> None:
    """The write tools (mcp.allow_writes), through the application's one writer."""

    @server.tool(description="Add or replace a text document in the index (same name replaces it); answers once it is indexed.")
    def push_text(
        name: Annotated[str, Field(description="A unique relative name, e.g. 'notes/meeting-2024-05-01.md'.", min_length=1, max_length=300)],
        text: Annotated[Text, Field(description="The document's text (at most api.max_document_kb KiB in UTF-8).")],
        title: Annotated[Text, Field(description="Its title (default: none).", max_length=1000)] = "",
    ) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            pushed = app.push(name, text, title=title)
            return {"id": pushed.id, "status": pushed.status, "chunks": pushed.chunks, "uri": f"lodex://documents/{pushed.id}"}

        return _answer(run)

    @server.tool(description="Delete a document pushed with push_text (files of the watched folder are removed by deleting the file).")
    def delete_document(document: Annotated[str, Field(description="The document's id or a citation of it.")]) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            doc_id = parse_document(document)[0]
            return {"deleted": doc_id, "existed": app.queue_delete(doc_id).result()}

        return _answer(run)

    @server.tool(description="Reconcile the index with its folder now (new, changed and deleted files); answers with the run's summary.")
    def reindex() -> dict[str, Any]:
        return _answer(lambda: app.queue_reindex().result().to_dict())
