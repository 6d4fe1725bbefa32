"""End to end against the pipelines users would pick instead (issue 42): the same folders indexed by lodex (defaults),
txtai, LlamaIndex's ingestion pipeline and a hand-rolled reader + sentence-transformers + FAISS script; wall time
(process start included), peak RSS of the process tree and retrieval quality on labelled questions, one table a folder.

usage: python bench/indexing/pipelines.py [--folders cranfield,html,pdf] [--pipelines lodex,txtai,llamaindex,handrolled]
                                 [--limit N] [--json OUT.json] [--no-warmup]
       python bench/indexing/pipelines.py --cores 1,2 [--folders ...] [--limit N]   (lodex index under taskset, scaling table)
Each pipeline indexes in its own child process and saves its index; the questions are then answered by another child
(not timed). lodex: `lodex index DIR --json` with a fresh data dir, in a folder with no config.toml (the defaults, as
they are at run time), HF_HUB_OFFLINE=1; its quality is that of its default search, its dense search beside it. The
peers run in bench/.peers-venv (made on first use from bench/peers/pipelines-peers.txt; see bench/peers/pipeline_peers.py for what
each does), all with the bundled all-MiniLM-L6-v2 from its local directory. Before the timed runs every pipeline
indexes a few files once (--no-warmup: not), so that each starts with its libraries in the page cache and lodex with
its cached int8 model, as a second run would. Folders and questions: bench/indexing/pipeline_folders.py (built in
bench/out/pipelines; nothing of them is committed but the questions). --limit N takes the first N files of each
folder and the questions that have their target among them (quick checks; not figures to quote).
"""

import argparse
import datetime
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.harness import LODEX_CLI, OUT, command_line, machine_line  # noqa: E402
from bench.indexing.pipeline_folders import NAMES, Folder, build, files_of, limited  # noqa: E402
from bench.indexing.pipeline_runs import Measured, measure, peers_python  # noqa: E402
from bench.indexing.pipeline_scores import DEPTH, quality, quality_line  # noqa: E402

WORK = OUT / "pipelines"
PIPELINES = ("lodex", "txtai", "llamaindex", "handrolled")
LABELS = {
    "lodex": "lodex index (defaults)",
    "txtai": "txtai Embeddings.index (Textractor paragraphs)",
    "llamaindex": "LlamaIndex IngestionPipeline (SentenceSplitter 256/32)",
    "handrolled": "hand-rolled: read + 160-word windows + sentence-transformers + FAISS flat",
}


def model_dir() -> str:
    from lodex.encoders.transformers_encoder import bundled_model_dir

    return str(bundled_model_dir())


def base_env(threads: int | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LODEX_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false", PYTHONPATH=str(ROOT))
    if threads:
        env.update(LODEX_ENCODER__THREADS=str(threads), OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    return env


def lodex_cmd() -> list[str]:
    script = Path(sys.executable).parent / "lodex"
    return [str(script)] if script.exists() else LODEX_CLI


def index_cmd(pipeline: str, folder: Path, work: Path) -> tuple[list[str], dict[str, str]]:
    """The command that indexes `folder` into `work` (emptied first) with `pipeline`, and its environment."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    if pipeline == "lodex":
        return [*lodex_cmd(), "index", str(folder), "--json"], {**base_env(), "LODEX_DATA_DIR": str(work / "data")}
    return (
        [str(peers_python()), str(ROOT / "bench" / "peers" / "pipeline_peers.py"), "index", pipeline, str(folder), str(work), model_dir()],
        base_env(),
    )


def answer(pipeline: str, folder: Folder, work: Path) -> dict[str, dict[str, list[str]]]:
    """The questions of `folder` answered from the index in `work`: {search: {qid: files, best first}}."""
    questions, out = work / "questions.json", work / "runs.json"
    questions.write_text(json.dumps(folder.queries), encoding="utf-8")
    if pipeline == "lodex":
        cmd = [sys.executable, __file__, "--lodex-query", str(work / "data"), str(questions), str(out)]
    else:
        cmd = [
            str(peers_python()),
            str(ROOT / "bench" / "peers" / "pipeline_peers.py"),
            "query",
            pipeline,
            str(work),
            model_dir(),
            str(questions),
            str(out),
        ]
    done = measure(cmd, base_env(), work, name="query")
    if done.returncode:
        raise RuntimeError(f"{pipeline}: answering failed: {done.stderr.strip().splitlines()[-1:]}")
    runs = json.loads(out.read_text(encoding="utf-8"))
    return runs if pipeline == "lodex" else {"default": runs}


def lodex_query(data: Path, questions: Path, out: Path) -> None:
    """(child) Answer the questions with lodex's default search and with dense search."""
    import lodex

    queries = json.loads(questions.read_text(encoding="utf-8"))
    index = lodex.open(data)
    runs = {
        mode or "default": {q: [hit.path for hit in index.search(text, k=DEPTH, mode=mode).results] for q, text in queries.items()}
        for mode in (None, "dense")
    }
    index.close()
    out.write_text(json.dumps(runs), encoding="utf-8")


def summary_of(done: Measured) -> dict:
    """The JSON object a pipeline printed last (lodex index --json's summary, the peers' {chunks, notes}), or {}."""
    try:
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def run_pipeline(pipeline: str, folder: Folder) -> dict:
    """Index `folder` with `pipeline` (timed), then answer its questions; a failure is a row with its reason."""
    work = WORK / "runs" / f"{folder.name}-{pipeline}"
    cmd, env = index_cmd(pipeline, folder.path, work)
    print(f"  {pipeline}: indexing {folder.path.name} ...", file=sys.stderr, flush=True)
    done = measure(cmd, env, work)
    summary = summary_of(done)
    row = {
        "pipeline": pipeline,
        "label": LABELS[pipeline],
        "wall_s": round(done.wall_s, 2),
        "peak_rss_mib": round(done.peak_mib),
        "chunks": summary.get("chunks"),
        "notes": summary.pop("notes", []),
    }
    if pipeline == "lodex":
        if failures := summary.pop("failures", None):
            row["notes"].append(f"{len(failures)} files failed, e.g. {next(iter(failures.items()))}")
        row["summary"] = summary  # its phases, tokens, precision: where the time went
    if done.returncode:
        reason = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return {**row, "error": reason[:300]}
    try:
        answered = answer(pipeline, folder, work)
    except (RuntimeError, OSError, ValueError) as exc:  # the timing stands; the row says why it has no quality
        return {**row, "error": str(exc)[:300]}
    for search, runs in answered.items():
        row["quality" if search == "default" else f"quality_{search}"] = quality(runs, folder.qrels)
    print(f"  {pipeline}: {done.wall_s:.1f} s, {done.peak_mib:.0f} MiB", file=sys.stderr, flush=True)
    return row


def warm_up(pipelines: list[str], folder: Folder) -> None:
    """Each pipeline indexes the first 5 files of `folder` once, untimed."""
    small = limited(folder, 5, WORK)
    for pipeline in pipelines:
        work = WORK / "runs" / f"warmup-{pipeline}"
        cmd, env = index_cmd(pipeline, small.path, work)
        done = measure(cmd, env, work)
        if done.returncode:
            print(f"  warm-up of {pipeline} failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}", file=sys.stderr)


def table(folder: Folder, rows: list[dict]) -> str:
    """The folder's markdown table: wall, its ratio to lodex's, peak RSS, chunks, quality."""
    lodex_wall = next((r["wall_s"] for r in rows if r["pipeline"] == "lodex" and "error" not in r), None)
    lines = [
        f"### {folder.source}",
        "",
        "| pipeline | wall s | × lodex wall | peak RSS MiB | chunks | quality |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['label']} | {r['wall_s']:.1f} | — | {r['peak_rss_mib']} | — | failed: {r['error']} |")
            continue
        ratio = f"{r['wall_s'] / lodex_wall:.2f}" if lodex_wall else "—"
        cell = quality_line(r["quality"], folder.graded)
        if "quality_dense" in r:
            cell += f" (dense search: {quality_line(r['quality_dense'], folder.graded)})"
        lines.append(f"| {r['label']} | {r['wall_s']:.1f} | {ratio} | {r['peak_rss_mib']} | {r['chunks'] or '?'} | {cell} |")
    lines += [f"- {r['pipeline']}: {note}" for r in rows for note in r.get("notes", [])]
    return "\n".join(lines)


def cores_table(folder: Folder, cores: list[int]) -> tuple[str, list[dict]]:
    """lodex index of `folder` under `taskset -c 0..n-1` with n encoder threads, for each n of `cores`."""
    rows: list[dict[str, Any]] = []
    for n in cores:
        work = WORK / "runs" / f"{folder.name}-cores{n}"
        cmd, _ = index_cmd("lodex", folder.path, work)
        env = {**base_env(threads=n), "LODEX_DATA_DIR": str(work / "data")}
        done = measure(["taskset", "-c", ",".join(str(c) for c in range(n)), *cmd], env, work)
        if done.returncode:
            raise SystemExit(f"lodex index on {n} cores failed: {done.stderr.strip().splitlines()[-1:]}")
        summary = summary_of(done)
        rows.append(
            {
                "cores": n,
                "wall_s": round(done.wall_s, 2),
                "peak_rss_mib": round(done.peak_mib),
                "chunks": summary.get("chunks"),
                "tokens": summary.get("tokens"),
                "summary": summary,
            }
        )
        print(f"  {n} cores: {done.wall_s:.1f} s", file=sys.stderr, flush=True)
    first = float(rows[0]["wall_s"])
    lines = [
        f"### {folder.source}: lodex index on 1..n cores",
        "",
        "| cores | wall s | speed-up vs 1 core | chunk tokens / wall s | peak RSS MiB |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += [
        f"| {r['cores']} | {r['wall_s']:.1f} | {first / r['wall_s']:.2f} | {(r['tokens'] or 0) / r['wall_s']:,.0f} | {r['peak_rss_mib']} |"
        for r in rows
    ]
    return "\n".join(lines), rows


def header() -> list[str]:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return [f"- date: {now}", f"- machine: {machine_line()}; os.cpu_count() {os.cpu_count()}", f"- command: `{command_line()}`", ""]


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--lodex-query":
        return lodex_query(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--folders", default=",".join(NAMES), help="cranfield,html,pdf")
    parser.add_argument("--pipelines", default=",".join(PIPELINES), help=",".join(PIPELINES))
    parser.add_argument("--limit", type=int, default=None, help="the first N files of each folder (quick checks)")
    parser.add_argument("--cores", default=None, help="e.g. 1,2: lodex index under taskset on that many cores, no peers")
    parser.add_argument("--json", type=Path, default=None, help="write every figure here too")
    parser.add_argument("--no-warmup", action="store_true")
    args = parser.parse_args()
    names = [n for n in args.folders.split(",") if n]
    pipelines = [p for p in args.pipelines.split(",") if p]
    if unknown := [n for n in names if n not in NAMES] + [p for p in pipelines if p not in PIPELINES]:
        raise SystemExit(f"unknown folder or pipeline: {', '.join(unknown)} (folders {', '.join(NAMES)}; pipelines {', '.join(PIPELINES)})")
    if any(p != "lodex" for p in pipelines) and not args.cores:
        peers_python()
    folders = [limited(build(name, WORK), args.limit, WORK) for name in names]
    report: dict = {"header": header(), "folders": {}}
    print("\n".join(report["header"]))
    if not args.no_warmup:
        warm_up(["lodex"] if args.cores else pipelines, folders[0])
    for folder in folders:
        print(f"{folder.name}: {len(files_of(folder.path))} files, {len(folder.queries)} questions", file=sys.stderr)
        if args.cores:
            text, rows = cores_table(folder, [int(c) for c in args.cores.split(",")])
        else:
            rows = [run_pipeline(p, folder) for p in pipelines]
            text = table(folder, rows)
        report["folders"][folder.name] = {"source": folder.source, "rows": rows}
        print(text + "\n", flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
