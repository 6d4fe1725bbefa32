"""The `lodex` command line: index, search and status; errors become one line with the fix."""

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from lodex.api.cli.common import ConfigOpt, DataDirOpt, DirArg, JsonOpt, command_settings, index_root
from lodex.api.cli.errors import ServerRefused, err
from lodex.api.cli.errors import friendly as _friendly
from lodex.api.cli.model import model_app
from lodex.api.cli.reports import eval_, status
from lodex.api.cli.serve import serve
from lodex.store.heap import limit_arenas

if TYPE_CHECKING:  # the CLI's module imports nothing heavy: a forwarded search must not load the search stack
    from lodex.indexer.run_state import RunSummary

app = typer.Typer(add_completion=False, no_args_is_help=True, help="lodex: local semantic search for folders of long documents.")


@app.callback()
def main_options(ctx: typer.Context, config: ConfigOpt = None, data_dir: DataDirOpt = None) -> None:
    """Options given before the command apply to it."""
    ctx.obj = {"config": config, "data_dir": data_dir}


def _writing(settings: Any, root: Path, rebuild: bool = False, long_lived: bool = False) -> Any:
    """The index opened to write `root` (the application object's write role: lock, job log, encoder, store, indexer),
    for a `with` block."""
    from lodex.api.cli.render import runtime_line
    from lodex.api.factory import open_app

    err.print(f"loading encoder…  data in {settings.location}", highlight=False)
    side = open_app(settings, "write", root, rebuild=rebuild, long_lived=long_lived)
    err.print(runtime_line(side.encoder.runtime()), highlight=False, markup=False)
    return side


def _print_summary(summary: "RunSummary", as_json: bool) -> None:
    from lodex.api.cli.progress import summary_lines

    if as_json:
        print(json.dumps(summary.to_dict()))
    else:
        for line in summary_lines(summary):
            err.print(line, highlight=False, markup=False)


@app.command()
@_friendly
def index(
    ctx: typer.Context,
    directory: DirArg = None,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Delete the index and build it anew.")] = False,
    ray: Annotated[bool, typer.Option("--ray", help='Read, chunk and encode on Ray (index.engine = "ray"; pip install lodex[cluster]).')] = False,
    ray_address: Annotated[str | None, typer.Option("--ray-address", help="Ray cluster to use with --ray (default: start a local one).")] = None,
    ray_actors: Annotated[int | None, typer.Option("--ray-actors", help="Encoder actors with --ray (default: as the CPUs allow).")] = None,
    ray_cpus: Annotated[float | None, typer.Option("--ray-cpus-per-actor", help="CPUs (model threads) of each encoder actor.")] = None,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Index new and changed files of DIR, drop deleted ones; unchanged files are never encoded again."""
    from lodex.api.cli.progress import process_seconds, progress_bar
    from lodex.api.model.cache import encoder_languages
    from lodex.encoders.model_languages import language_note

    settings = command_settings(
        ctx,
        config,
        data_dir,
        index__engine="ray" if ray or ray_address else None,
        index__ray_address=ray_address,
        index__ray_actors=ray_actors,
        index__ray_cpus_per_actor=ray_cpus,
    )
    root = index_root(settings, directory)
    with _writing(settings, root, rebuild) as side, progress_bar(err) as update:
        start = process_seconds()  # imports, the encoder and the store: what a user waits for before the run
        summary = side.indexer.run(root, progress=update)
        summary.phases = {"start": round(start, 3), **summary.phases}
        note = language_note(side.store.language_mix(), encoder_languages(settings), not settings.encoder.model)
        summary.notes += [note] if note else []
    _print_summary(summary, as_json)


@app.command()
@_friendly
def retry(
    ctx: typer.Context,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Try the files that failed again (after fixing them), and index those that now work."""
    from lodex.api.index_files import read_job_log

    settings = command_settings(ctx, config, data_dir)
    jobs = read_job_log(settings)
    root, failed = jobs.root, list(jobs.failed())
    jobs.close()
    if not failed or root is None:
        err.print("no failed files to retry")
        if as_json:
            print(json.dumps({"retried": 0}))
        return
    with _writing(settings, Path(root)) as side:
        summary = side.indexer.run(Path(root), only=failed, kind="retry")
    _print_summary(summary, as_json)


@app.command()
@_friendly
def watch(
    ctx: typer.Context,
    directory: DirArg = None,
    polling: Annotated[
        bool | None, typer.Option("--polling/--native", help="Poll the folder (network filesystems) instead of native events.")
    ] = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Keep the index in step with DIR: catch up with changes made meanwhile, then follow every change."""
    import signal
    import threading

    from lodex.api.cli.logs import file_logger, scan_logger
    from lodex.api.factory import build_watch
    from lodex.indexer.writer import RunHooks

    settings = command_settings(ctx, config, data_dir, watch__polling=polling)
    root = index_root(settings, directory)
    with _writing(settings, root, long_lived=True) as side:
        service = build_watch(settings, side.indexer, root, RunHooks(on_file=file_logger(err), progress=scan_logger(err)))
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        service.start()
        err.print(f"watching {root} ({'polling' if settings.watch.polling else 'native events'}); Ctrl-C to stop", highlight=False)
        stop.wait()
        err.print("stopping: finishing queued changes…")
        service.stop()


app.command()(serve)  # in serve.py; registered here, in its place among the commands in --help


@app.command()
@_friendly
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to look for, in plain words.")],
    k: Annotated[int | None, typer.Option("-k", "--k", help="Documents to return (default: search.k; at most api.max_k).")] = None,
    path_glob: Annotated[str | None, typer.Option("--path-glob", "--path", help="Only documents whose relative path matches this glob.")] = None,
    ext: Annotated[list[str] | None, typer.Option("--ext", help="Only these file extensions (repeatable).")] = None,
    mode: Annotated[str | None, typer.Option("--mode", help="dense, bm25 or hybrid (default: search.mode).")] = None,
    lang: Annotated[list[str] | None, typer.Option("--lang", help="Only documents in this language (ISO 639-1, e.g. zh; repeatable).")] = None,
    modified_after: Annotated[
        str | None,
        typer.Option(
            "--modified-after",
            help="Only documents modified after this time: ISO 8601 (2024-05-01, 2024-05-01T12:00:00+02:00; no zone: local time) or epoch seconds.",
        ),
    ] = None,
    local: Annotated[bool, typer.Option("--local", help="Search in this process even when a `lodex serve` of this index runs.")] = False,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Rank indexed documents by meaning and keywords and show their best passages, query words marked (asked of the
    `lodex serve` of the same data dir when one runs: no model to load; it searches here only when that server cannot
    be reached or fails, and shows the error it answers to a bad request)."""
    from lodex.api.cli.render import print_search
    from lodex.api.http.forward import ask_server
    from lodex.api.request import Limits, search_request
    from lodex.search.results import SearchResponse

    settings = command_settings(ctx, config, data_dir)
    query = query.encode("utf-8", "surrogateescape").decode("utf-8", "replace")  # bytes the shell gave that are not UTF-8
    request = search_request(q=query, k=k, path_glob=path_glob, ext=ext, modified_after=modified_after, mode=mode or settings.search.mode, lang=lang)
    asked = request.checked(Limits.of(settings))  # checked here as the server checks it: its k is this config's default
    answer = (
        None if local else ask_server(settings.data_dir, settings.api.api_key, "POST", "/search", request.model_copy(update={"k": asked.k}).body())
    )
    if answer is not None and answer.refused:
        raise ServerRefused(answer.reason, answer.error, answer.status)  # a 4xx: the request is at fault, not the server
    if answer is not None and answer.body is not None:
        response = SearchResponse.from_dict(answer.body)
    else:
        from lodex.api.index_files import require_index

        require_index(settings)
        if answer is not None and answer.reason:
            err.print(f"{answer.reason}; searching the index here", highlight=False, markup=False)
        response = _search_here(settings, asked)
    if as_json:
        print(json.dumps(response.to_dict(), ensure_ascii=False))
        return
    print_search(Console(), response)


def _search_here(settings: Any, asked: Any) -> Any:
    """Search the index in this process: the application object's read role (query encoder, read-only store, searcher)."""
    from lodex.api.factory import open_app

    with open_app(settings, "read") as index:
        return index.run_search(asked)


@app.command()
@_friendly
def mcp(
    ctx: typer.Context,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Serve the index to an agent over MCP on stdin/stdout (tools: search, read, list_documents, status; documents as
    resources). Register it in the agent's MCP config as the command `lodex mcp --data-dir DIR`."""
    import anyio

    from lodex.api.factory import open_app
    from lodex.api.http.route_helpers import lodex_version
    from lodex.api.mcp.server import build_mcp

    settings = command_settings(ctx, config, data_dir)
    err.print(f"loading encoder…  data in {settings.location}", highlight=False)
    with open_app(settings, "read") as index:
        server = build_mcp(index, index.limits, lodex_version())
        err.print("lodex mcp: serving on stdio", highlight=False)
        anyio.run(server.run_stdio_async)


app.command(name="eval")(eval_)
app.command()(status)
app.add_typer(model_app, name="model")


def main() -> None:
    """Console-script entry point."""
    limit_arenas()
    app(prog_name="lodex")


if __name__ == "__main__":
    main()
