"""Terminal rendering of the CLI's answers: search results, evaluation tables, index status and failed files. Names
and passages are printed escaped, so a file name or text cannot send terminal escapes."""

from typing import Any

from rich.console import Console
from rich.text import Text

from lodex.api.cli.progress import skipped_line
from lodex.indexer.paths import printable
from lodex.search.results import Passage, SearchResponse


def print_search(out: Console, response: SearchResponse) -> None:
    """Ranked documents, each with its passages (offsets, score, query words highlighted), then the count and time."""
    if not response.results:
        out.print("no results")
    for rank, hit in enumerate(response.results, start=1):
        out.print(
            Text(f"{rank}. {printable(hit.path)}", style="bold") + Text(f"  score {hit.score:.3f}  — {printable(hit.title)}"),
            highlight=False,
            soft_wrap=True,
        )
        for passage in hit.passages:  # control characters shown as spaces: same offsets, one line, no terminal escapes
            snippet = Text("".join(" " if c.isspace() or not c.isprintable() else c for c in passage.text))
            for start, end in passage.highlights:
                snippet.stylize("bold yellow", start, end)
            if len(snippet) > 240:
                snippet = snippet[:237] + "…"
            out.print(
                Text(f"   [{passage.char_start}:{passage.char_end}]{_location(passage)} ({passage.score:.3f}) ") + snippet,
                highlight=False,
                soft_wrap=True,
            )
    out.print(f"{len(response.results)} documents in {response.took_ms:.0f} ms", style="dim")


def _location(passage: Passage) -> str:
    """' p. 12' (' pp. 12–13'), then ' § 2 Methods › 2.3 Sampling', for the passages of formats that have them."""
    where = ""
    if passage.page is not None:
        end = passage.page_end if passage.page_end is not None else passage.page
        where += f" p. {passage.page}" if end == passage.page else f" pp. {passage.page}–{end}"
    if passage.section:
        where += f" § {printable(passage.section)}"
    return where


def print_evaluation(out: Console, result: dict[str, Any], bundle: int) -> None:
    """One line about the collection, then nDCG@10, Recall@100, MRR@10 and ms/query per mode and ranking."""
    out.print(
        f"{result['dataset']}  bundle {bundle}: {result['files']} files, {result['chunks']:,} chunks, {result['queries']} judged queries; "
        f"indexed in {result['index_s']:.1f} s (default: {result['default']['mode']}, ranking {result['default']['ranking']})",
        highlight=False,
    )
    out.print(f"{'run':16s} {'nDCG@10':>8s} {'R@100':>8s} {'MRR@10':>8s} {'ms/query':>9s}", highlight=False)
    for name, m in list(result["modes"].items()) + list(result["rankings"].items()):
        out.print(f"{name:16s} {m['ndcg@10']:8.4f} {m['recall@100']:8.4f} {m['mrr@10']:8.4f} {m['query_ms']:9.1f}", highlight=False)


def print_failures(out: Console, failures: dict[str, dict[str, Any]]) -> None:
    """Each failed file with its reason and attempts, then what to do."""
    for path, failure in failures.items():
        out.print(f"{printable(path)}: {printable(failure['reason'])} (attempts: {failure['attempts']})", highlight=False, markup=False)
    out.print(f"{len(failures)} failed; fix them and run `lodex retry`" if failures else "no failed files", style="dim")


def runtime_line(runtime: str) -> str:
    """The encoder's runtime and the CPU it runs on (model, cores, the flags that decide its speed)."""
    from lodex.encoders.cpu import cpu_info

    return f"encoder: {runtime}\n{cpu_info().line()}"


def language_line(mix: dict[str, int]) -> str:
    """'zh 82% (41), en 18% (9)': a folder's documents per language, most first."""
    total = sum(mix.values()) or 1
    return ", ".join(f"{code} {100 * n / total:.0f}% ({n:,})" for code, n in mix.items())


def print_status(out: Console, info: dict[str, Any]) -> None:
    """Where the index is, what it mirrors, its model, counts and last run (`info`: what `status --json` prints)."""
    origin, last_run, failed = info["origin"], info["last_run"], info["failed"]
    out.print(
        f"index     {info['data_dir']}\nfolder    {info['root']}\nmodel     {info['model']} ({info['dim']} dims, {origin.get('pooling')} pooling)",
        highlight=False,
        markup=False,
    )
    out.print(
        f"documents {info['documents']:,}\nchunks    {info['chunks']:,}\nfailed    {failed}" + (" (lodex status --failed)" if failed else ""),
        highlight=False,
    )
    if info.get("languages"):
        out.print(f"languages {language_line(info['languages'])}", highlight=False, markup=False)
    if info.get("keyword_note"):
        out.print(f"note      {info['keyword_note']}", highlight=False, markup=False)
    if info.get("cpu"):
        out.print(
            f"cpu       {info['cpu']['model']}, {info['cpu']['physical_cores']} cores; flags {' '.join(info['cpu']['features']) or '-'}; "
            f"int8 {info['cpu']['int8_kernel']}",
            highlight=False,
            markup=False,
        )
    if last_run:
        out.print(
            f"last run  {last_run['kind']}: {last_run['added']} added, {last_run['updated']} updated, {last_run['reused']} re-used, "
            f"{last_run['unchanged']} unchanged, {last_run['deleted']} deleted, {last_run['failed']} failed in {last_run['seconds']:.1f} s",
            highlight=False,
        )
        if last_run.get("skipped"):
            out.print(f"skipped   {skipped_line(last_run['skipped'])} (no reader)", highlight=False, markup=False)


def print_model_check(out: Console, report: dict[str, Any]) -> None:
    """What `lodex model check` found (`report`: what `model check --json` prints), each choice with where it came from."""

    def line(name: str, value: str) -> None:
        out.print(f"{name:15s} {value}", highlight=False, markup=False, soft_wrap=True)

    def chosen(name: str, key: str, shown: str | None = None) -> None:
        choice = report[key]
        line(name, f"{shown if shown is not None else choice['value']}  ← {choice['source']}")

    line("model", f"{report['model_id']}  {printable(report['model'])}")
    parameters = report["parameters"]
    line(
        "architecture",
        f"{report['architecture']} ({report['model_type']}, {report['kind']}), {parameters / 1e6:.1f}M parameters, {report['dim']} dims",
    )
    chosen("window", "window", f"{report['window']['value']} tokens")
    chosen("pooling", "pooling")
    for name, key in (("query", "query_prefix"), ("document", "document_prefix")):
        chosen(name + " prefix", key, repr(report[key]["value"]) if report[key]["value"] else "none")
    eos = report["eos"]["value"]
    chosen("eos", "eos", f"append token {eos}" if eos is not None else "not appended")
    line("padding", report["padding_side"])
    chosen("languages", "languages", ", ".join(report["languages"]["value"]) if report["languages"]["value"] else "any")
    search = report["search"]["value"]
    chosen("search", "search", f"fusion {search['fusion']}, feedback weight {search['feedback_weight']:g}")
    late = report["late_chunking"]
    line(
        "late chunking",
        (f"on, windows of {late['window_tokens']:,} tokens" if late["enabled"] else "off")
        + f" (chunking.late = {str(late['setting']).lower()}; the model reads up to {late['window_limit']:,} tokens at once)",
    )
    fast = report["fast_mode"]
    if fast["available"]:
        line(
            "fast mode",
            f"yes (int8 vs exact cosine mean {fast['mean_cosine']:.4f}, min {fast['min_cosine']:.4f} on {fast['texts']} texts; "
            f"load-time gate {fast['gate_cosine']:.4f})",
        )
    else:
        refused = {
            "fast": '; encoder.precision = "fast" is refused: set it to "exact"',
            "auto": ' (encoder.precision = "auto" takes exact mode)',
        }.get(report["configured_precision"], "")
        line("fast mode", f"no — {fast['reason']}; served exactly{refused}")
    speed = report["tokens_per_s"]
    line("tokens/s", f"exact {speed['exact']:,}" + (f", fast {speed['fast']:,}" if speed["fast"] is not None else ""))
    memory = report["memory_mb"]
    text = f"exact ~{memory['exact']:,.0f} MB (weights {memory['weights']:,.1f} MB + activations ~{memory['activations']:,.0f} MB at encoder.batch_tokens)"
    if memory["fast"] is not None:
        text += f"; fast ~{memory['fast']:,.0f} MB (+ int8 model {memory['int8_model']:,.1f} MB)"
    if memory.get("streamed") is not None:
        text = (
            f"layer-streamed within {memory['streamed']:,.0f} MB (encoder.memory_budget_mb; largest layer {memory['largest_layer']:,.1f} MB), "
            f"instead of {memory['weights']:,.0f} MB of weights in memory"
        )
    line("memory", text)
