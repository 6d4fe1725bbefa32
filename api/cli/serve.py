"""`lodex serve`: the JSON API, search page and /mcp over HTTP, with the folder watched, in one process (main.py registers it)."""

from typing import TYPE_CHECKING, Annotated, Any

import typer

from lodex.api.cli.common import ConfigOpt, DataDirOpt, DirArg, command_settings, index_root
from lodex.api.cli.errors import err
from lodex.api.cli.errors import friendly as _friendly
from lodex.store.errors import ConfigError

if TYPE_CHECKING:  # the CLI's modules import nothing heavy: a forwarded search must not load the search stack
    from lodex.api.settings import Settings


@_friendly
def serve(
    ctx: typer.Context,
    directory: DirArg = None,
    host: Annotated[str | None, typer.Option("--host", help="Address to bind (default: api.host, 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option("--port", help="TCP port (default: api.port, 8765).")] = None,
    no_watch: Annotated[bool, typer.Option("--no-watch", help="Serve the API only; do not watch the folder.")] = False,
    insecure: Annotated[bool, typer.Option("--insecure", help="Allow a non-loopback address without an API key.")] = False,
    read_only: Annotated[
        bool | None,
        typer.Option(
            "--read-only",
            help="A replica: answer searches from the latest committed version (refreshed every serve.refresh_s), write nothing (no DIR, no watcher; writes answer 409).",
        ),
    ] = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Watch DIR and serve the JSON API and search page over HTTP, in one process (or, with --read-only, serve an index
    another process writes)."""
    from lodex.api.cli.logs import file_logger
    from lodex.api.cli.render import runtime_line
    from lodex.api.factory import open_app
    from lodex.api.http.server_record import forget_server

    settings = command_settings(ctx, config, data_dir, serve__read_only=read_only)
    host = host or settings.api.host
    port = port or settings.api.port
    _check_exposure(settings, host, insecure)
    read_only = settings.serve.read_only
    root = index_root(settings, directory) if not read_only else None
    err.print(f"loading encoder…  data in {settings.location}", highlight=False)
    service = open_app(settings, "serve", root, watch=not no_watch, on_file=file_logger(err))
    try:
        following = (
            f"read-only, refreshed every {settings.serve.refresh_s:g} s" if read_only else f"{'watching' if not no_watch else 'not watching'} {root}"
        )
        err.print(f"model {service.encoder.model_id} ({service.encoder.dim} dims); index {settings.location}; {following}", highlight=False)
        err.print(runtime_line(service.encoder.runtime()), highlight=False, markup=False)
        service.start()
        err.print(f"lodex is serving on http://{host}:{port}/  (API docs: http://{host}:{port}/docs)", highlight=False)
        _run_http(settings, service, host, port)
    finally:
        forget_server(settings.data_dir)
        service.close()


def _check_exposure(settings: "Settings", host: str, insecure: bool) -> None:
    """Refuse a non-loopback `host` without an API key (ConfigError), unless `insecure`: then warn."""
    from lodex.api.http.errors import is_loopback

    if is_loopback(host) or settings.api.api_key:
        return
    if not insecure:
        raise ConfigError(
            f"refusing to serve on {host} without an API key: anyone on the network could read the index",
            "set api.api_key (or LODEX_API__API_KEY), bind 127.0.0.1, or pass --insecure",
        )
    err.print(
        f"[yellow]warning:[/yellow] serving on {host} without an API key (--insecure): anyone who can reach this "
        "address can read, add and delete documents",
        highlight=False,
    )


def _run_http(settings: "Settings", service: Any, host: str, port: int) -> None:
    """Serve the started `service` with uvicorn on `host`:`port` until stopped, recorded in the data dir meanwhile (so
    that `lodex search` and `lodex status` ask it)."""
    import uvicorn

    from lodex.api.http.app import create_app
    from lodex.api.http.errors import HaltingServer, JsonErrorsProtocol
    from lodex.api.http.server_record import Identity, forget_server, record_server

    def shutdown() -> None:
        forget_server(settings.data_dir)  # before the signal that stopped uvicorn ends the process
        err.print("stopping: finishing queued changes…")
        service.close()
        err.print("stopped")

    # uvicorn runs the app's shutdown (which closes the service) before it re-raises SIGINT/SIGTERM
    identity = Identity.new()  # proven to `lodex search` before it sends the key; its secret only in server.json
    server_config = uvicorn.Config(
        create_app(service, on_shutdown=shutdown, host=host, identity=identity),
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        http=JsonErrorsProtocol,
        timeout_graceful_shutdown=5,
    )
    record_server(settings.data_dir, host, port, identity)  # `lodex search` and `lodex status` ask this server from now on
    HaltingServer(server_config, on_exit=service.halt).run()
