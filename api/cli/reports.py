"""`lodex eval` and `lodex status`: the commands that report on a collection or an index (cli.py registers them)."""

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from lodex.api.cli.common import ConfigOpt, DataDirOpt, JsonOpt, command_settings
from lodex.api.cli.errors import err
from lodex.api.cli.errors import friendly as _friendly
from lodex.store.errors import ConfigError


@_friendly
def eval_(
    ctx: typer.Context,
    dataset: Annotated[Path, typer.Argument(help="A BEIR-layout folder: corpus.jsonl, queries.jsonl, qrels.tsv.", show_default=False)],
    bundle: Annotated[int, typer.Option("--bundle", min=1, help="Concatenate every N documents into one long file (1 = one file each).")] = 1,
    mode: Annotated[str, typer.Option("--mode", help="dense, bm25, hybrid or all.")] = "all",
    ranking: Annotated[
        str, typer.Option("--ranking", help="Also compare document rankings in dense and hybrid mode: max, topm, mean, blend or all.")
    ] = "",
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Measure retrieval quality on a labelled collection: nDCG@10, Recall@100 and MRR@10 per mode."""
    from lodex.api.cli.progress import progress_bar
    from lodex.api.cli.render import print_evaluation
    from lodex.api.evaluation import evaluate_dataset
    from lodex.search.searcher import MODES, RANKINGS

    settings = command_settings(ctx, config, None)
    dataset = dataset.expanduser().resolve()
    missing = [name for name in ("corpus.jsonl", "queries.jsonl", "qrels.tsv") if not (dataset / name).is_file()]
    if missing:
        raise ConfigError(
            f"{dataset} is not a BEIR-layout collection (missing {', '.join(missing)})",
            "pass a folder holding corpus.jsonl, queries.jsonl and qrels.tsv",
        )
    asked = MODES if mode == "all" else tuple(m.strip() for m in mode.split(","))
    asked_rankings = () if not ranking else RANKINGS if ranking == "all" else tuple(r.strip() for r in ranking.split(","))
    if bad := [m for m in asked if m not in MODES] + [r for r in asked_rankings if r not in RANKINGS]:
        raise ConfigError(f"unknown mode or ranking: {', '.join(bad)}", f"modes: {', '.join(MODES)}, all; rankings: {', '.join(RANKINGS)}, all")
    modes = tuple(m for m in MODES if m in asked)
    rankings = tuple(r for r in RANKINGS if r in asked_rankings)
    err.print(f"evaluating {dataset.name} (bundle {bundle}) with {settings.encoder.model or 'the bundled all-MiniLM-L6-v2'}…", highlight=False)
    with progress_bar(err) as update:
        result = evaluate_dataset(dataset, settings, bundle, modes, rankings, progress=update)
    if as_json:
        print(json.dumps(result))
        return
    print_evaluation(Console(), result, bundle)


@_friendly
def status(
    ctx: typer.Context,
    failed: Annotated[bool, typer.Option("--failed", help="List the files that failed, with their reasons.")] = False,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Show what the index holds: counts, model, folder, data dir, the last run and failed files."""
    from lodex.api.cli.render import print_failures, print_status
    from lodex.api.http.forward import ask_server
    from lodex.api.index_files import read_job_log, require_index
    from lodex.api.models import IndexStatus
    from lodex.encoders.cpu import cpu_info
    from lodex.store.keyword_scheme import REINDEX_HINT

    settings = command_settings(ctx, config, data_dir)
    manifest = require_index(settings)  # its record copied into the cache first, for one on object storage
    jobs = read_job_log(settings, manifest)
    try:
        served = ask_server(settings.data_dir, settings.api.api_key, "GET", "/stats").body  # a running server's status
        if served is not None:  # (and the search stack is not loaded here: a forwarded status stays fast)
            status = IndexStatus.model_validate({key: served[key] for key in IndexStatus.model_fields if key in served})
        else:
            from lodex.api.factory import open_reader
            from lodex.api.reading import index_status

            dim = int(manifest.record["dim"])  # (require_index: an index is there, its record says)
            reader = open_reader(settings, dim, manifest)
            status = index_status(reader, jobs, manifest.model_id or "", dim, str(settings.location))
        failures = jobs.failed()
    finally:
        jobs.close()
    info = {
        **status.model_dump(),
        "keyword_note": None if status.keywords_segmented else REINDEX_HINT,
        "failures": failures,
        "origin": manifest.record,
        "cpu": cpu_info().to_dict(),
    }
    if as_json:
        print(json.dumps(info))
        return
    if failed:
        print_failures(Console(), failures)
    else:
        print_status(Console(), info)
