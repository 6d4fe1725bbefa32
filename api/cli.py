"""The `lodex` command line: index, search and status; errors become one line with the fix."""

import json
import os
import shutil
import sys
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, Callable

import typer
from rich.console import Console

from store.errors import ConfigError, LodexError, StoreError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="lodex: local semantic search for folders of long documents.")
err = Console(stderr=True, soft_wrap=True)

ConfigOpt = Annotated[Path | None, typer.Option("--config", envvar="LODEX_CONFIG", help="config.toml to read (default ./config.toml).")]
DataDirOpt = Annotated[Path | None, typer.Option("--data-dir", envvar="LODEX_DATA_DIR", help="Index directory (default: index.data_dir).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]


def _friendly(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn lodex errors (and anything unexpected) into one line on stderr and exit code 2."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except LodexError as exc:
            err.print(f"[red]error:[/red] {exc.one_line()}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            err.print("interrupted; committed work is kept, run the command again to finish")
            raise typer.Exit(130) from None
        except typer.Exit:
            raise
        except Exception as exc:  # the last line of defence: no stack trace reaches a user
            if os.environ.get("LODEX_DEBUG"):
                raise
            err.print(f"[red]error:[/red] unexpected {type(exc).__name__}: {exc} — rerun with LODEX_DEBUG=1 for details and report it", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from None

    return wrapper


def _settings(ctx: typer.Context, config: Path | None, data_dir: Path | None):
    from api.settings import load_settings

    globals_ = ctx.obj or {}
    settings = load_settings(config or globals_.get("config"))
    chosen = data_dir or globals_.get("data_dir")
    if chosen is not None:
        settings.index.data_dir = str(chosen.resolve())
    return settings


@app.callback()
def main_options(ctx: typer.Context, config: ConfigOpt = None, data_dir: DataDirOpt = None) -> None:
    """Options given before the command apply to it."""
    ctx.obj = {"config": config, "data_dir": data_dir}


def _root(settings, directory: Path | None) -> Path:
    if directory is not None:
        root = directory.expanduser().resolve()
    elif settings.index.root:
        root = settings.path(settings.index.root)
    else:
        raise ConfigError("no folder to index", "pass DIR (lodex index DIR) or set index.root in config.toml")
    if not root.is_dir():
        raise ConfigError(f"{root} is not a folder", "pass an existing folder")
    return root


def _wipe(data_dir: Path) -> None:
    """Remove an index (only a folder that holds one, or an empty one)."""
    if not data_dir.exists():
        return
    if not (data_dir / "origin.json").exists() and any(data_dir.iterdir()):
        raise StoreError(f"{data_dir} does not look like a lodex index; not deleting it", "pass the right --data-dir")
    shutil.rmtree(data_dir)


@app.command()
@_friendly
def index(
    ctx: typer.Context,
    directory: Annotated[Path | None, typer.Argument(help="Folder to index (default: index.root).", show_default=False)] = None,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Delete the index and build it anew.")] = False,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Index new and changed files of DIR, drop deleted ones; unchanged files are never encoded again."""
    from api.factory import build_encoder, build_indexer, open_store
    from api.progress import progress_bar, summary_lines
    from store.run_records import RunRecords

    settings = _settings(ctx, config, data_dir)
    root = _root(settings, directory)
    if rebuild:
        _wipe(settings.data_dir)
    records = RunRecords(settings.data_dir)
    if records.root and Path(records.root) != root:
        raise ConfigError(
            f"the index in {settings.data_dir} mirrors {records.root}, not {root}",
            "use another --data-dir for this folder, or --rebuild to replace the index",
        )
    err.print(f"loading encoder…  data in {settings.data_dir}", highlight=False)
    encoder = build_encoder(settings)
    store = open_store(settings, encoder, settings.data_dir, create=True)
    with progress_bar(err) as update:
        summary = build_indexer(settings, encoder, store).run(root, progress=update)
    records.save_run(str(root), {k: v for k, v in summary.to_dict().items() if k != "failures"}, summary.failures)
    if as_json:
        print(json.dumps(summary.to_dict()))
    else:
        for line in summary_lines(summary):
            err.print(line, highlight=False, soft_wrap=True)


@app.command()
@_friendly
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to look for, in plain words.")],
    k: Annotated[int | None, typer.Option("-k", "--k", min=1, max=1000, help="Documents to return (default: search.k).")] = None,
    path: Annotated[str | None, typer.Option("--path", help="Only documents whose relative path matches this glob.")] = None,
    ext: Annotated[list[str] | None, typer.Option("--ext", help="Only these file extensions (repeatable).")] = None,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Rank indexed documents by meaning and show their best passages."""
    from api.factory import build_encoder, build_searcher, open_store
    from search.results import SearchFilters

    settings = _settings(ctx, config, data_dir)
    if not query.strip():
        raise ConfigError("the query is empty", "pass some words to look for")
    if not (settings.data_dir / "origin.json").exists():
        raise StoreError(f"no index in {settings.data_dir}", "build one first with `lodex index DIR`")
    encoder = build_encoder(settings)
    store = open_store(settings, encoder, settings.data_dir, create=False)
    response = build_searcher(settings, encoder, store).search(query, k or settings.search.k, SearchFilters(path, tuple(ext or ())))
    if as_json:
        print(json.dumps(response.to_dict(), ensure_ascii=False))
        return
    out = Console()
    if not response.results:
        out.print("no results")
    for rank, hit in enumerate(response.results, start=1):
        out.print(f"[bold]{rank}. {hit.path}[/bold]  score {hit.score:.3f}  — {hit.title}", highlight=False, soft_wrap=True)
        for passage in hit.passages:
            text = " ".join(passage.text.split())
            snippet = text if len(text) <= 240 else text[:237] + "…"
            out.print(f"   [{passage.char_start}:{passage.char_end}] ({passage.score:.3f}) {snippet}", highlight=False, soft_wrap=True, markup=False)
    out.print(f"{len(response.results)} documents in {response.took_ms:.0f} ms", style="dim")


@app.command()
@_friendly
def status(
    ctx: typer.Context,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Show what the index holds: counts, model, folder, data dir and the last run."""
    from store.lance_store import Store
    from store.origin import read_origin
    from store.run_records import RunRecords

    settings = _settings(ctx, config, data_dir)
    origin = read_origin(settings.data_dir)
    if origin is None:
        raise StoreError(f"no index in {settings.data_dir}", "build one first with `lodex index DIR`")
    counts = Store(settings.data_dir, int(origin["dim"])).counts()
    records = RunRecords(settings.data_dir)
    info = {
        **counts, "failed": len(records.failed), "data_dir": str(settings.data_dir), "root": records.root,
        "model": origin.get("model_id"), "dim": origin.get("dim"), "last_run": records.last_run,
        "failures": records.failed, "origin": origin,
    }
    if as_json:
        print(json.dumps(info))
        return
    out = Console()
    out.print(f"index     {settings.data_dir}\nfolder    {records.root}\nmodel     {info['model']} ({info['dim']} dims, {origin.get('pooling')} pooling)", highlight=False)
    out.print(f"documents {counts['documents']:,}\nchunks    {counts['chunks']:,}\nfailed    {info['failed']}", highlight=False)
    if records.last_run:
        run = records.last_run
        out.print(f"last run  {run['added']} added, {run['updated']} updated, {run['unchanged']} unchanged, {run['deleted']} deleted, {run['failed']} failed in {run['seconds']:.1f} s", highlight=False)
    for path, failure in sorted(records.failed.items()):
        out.print(f"  failed: {path}: {failure['reason']}", highlight=False, markup=False)


def main() -> None:
    """Console-script entry point."""
    app(prog_name="lodex")


if __name__ == "__main__":
    sys.exit(main())
