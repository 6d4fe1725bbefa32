"""What the per-file read budget costs, and what a folder of hostile files costs with it: `lodex index` runs timed
before (another checkout's lodex, no budget) and after (this one), alternated, in one run.

usage: python bench/readers/read_budget.py cost --before /path/to/main/.venv/bin/lodex [--rounds 2] [--fake] [--evaldata DIR]
         Cranfield as 56 long documents (25 abstracts each) as Markdown (read in a reading process), and the same
         bundles as multi-page PDFs and as XLSX workbooks; wall time of each `lodex index` (bundled model, fresh data dir)
       python bench/readers/read_budget.py overhead [--rounds 5]
         the same folders read alone, in this process and through the budget's reading process, alternated
       python bench/readers/read_budget.py hostile
         every hostile file of issue #37 (tests/hostile_files.py) and a few normal ones: peak RSS of the whole process
         tree of `lodex index` (sampled from /proc every 20 ms), its time, and `lodex status --failed`
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.harness import EVALDATA, machine_line  # noqa: E402
from tests import hostile_files as hostile  # noqa: E402

AFTER = str(ROOT / ".venv" / "bin" / "lodex")


def bundles(evaldata: Path, size: int = 25) -> list[list[dict]]:
    """Cranfield's abstracts shuffled with a fixed seed, in groups of `size` (evaldata/README.md "Long documents")."""
    docs = [json.loads(line) for line in (evaldata / "cranfield" / "corpus.jsonl").open()]
    random.Random(13).shuffle(docs)
    return [docs[i : i + size] for i in range(0, len(docs), size)]


def _pdf_page(lines: list[str]) -> bytes:
    ops = (
        [b"BT /F1 10 Tf 12 TL 50 760 Td"]
        + [b"(" + line.encode("latin-1", "replace").replace(b"\\", b"").replace(b"(", b"").replace(b")", b"") + b") '" for line in lines]
        + [b"ET"]
    )
    return b"\n".join(ops)


def pdf_of(group: list[dict]) -> bytes:
    """A PDF of one abstract a page (title then text, wrapped at 95 characters)."""
    import textwrap

    contents = []
    for doc in group:
        contents.append(_pdf_page(textwrap.wrap(f"{doc['title']}. {doc['text']}", 95)[:60]))
    pages = len(contents)
    first = 4
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % (first + 2 * i) for i in range(pages)) + b"] /Count %d >>" % pages,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, content in enumerate(contents):
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R /Resources << /Font << /F1 3 0 R >> >> >>" % (first + 2 * i + 1)
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream")
    return hostile.pdf(objects)


def xlsx_of(group: list[dict]) -> bytes:
    """A workbook of one abstract a row (title, text)."""
    from xml.sax.saxutils import escape

    shared = [escape(v) for doc in group for v in (doc["title"] or "-", doc["text"] or "-")]
    rows = "".join(f'<row r="{i + 1}"><c t="s"><v>{2 * i}</v></c><c t="s"><v>{2 * i + 1}</v></c></row>' for i in range(len(group)))
    return hostile.xlsx(rows, shared)


def build(folder: Path, kind: str, groups: list[list[dict]]) -> Path:
    out = folder / kind
    out.mkdir(parents=True)
    for n, group in enumerate(groups):
        if kind == "md":
            text = "\n\n".join(f"## {d['title']}\n\n{d['text']}" for d in group)
            (out / f"bundle-{n:03}.md").write_text(f"# Bundle {n}\n\n{text}\n")
        elif kind == "pdf":
            (out / f"bundle-{n:03}.pdf").write_bytes(pdf_of(group))
        else:
            (out / f"bundle-{n:03}.xlsx").write_bytes(xlsx_of(group))
    return out


def tree_rss(pid: int) -> int:
    """Resident bytes of `pid` and all its descendants."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
            rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            continue
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo.extend(children.get(p, []))
    return total


def index(lodex: str, folder: Path, data: Path, env: dict[str, str]) -> tuple[float, int, dict]:
    """Seconds, peak RSS of the process tree, and the summary of one `lodex index`."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [lodex, "index", str(folder), "--json", "--data-dir", str(data)],
        env=env,
        cwd=data.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_rss(proc.pid))
        time.sleep(0.02)
    out, err = proc.communicate()
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{lodex} index failed ({proc.returncode}): {err.strip()[-500:]}")
    return seconds, peak, json.loads(out)


def _env(lodex: str, fake: bool) -> dict[str, str]:
    """The environment of one checkout's `lodex` (its tests.fakes on the path when the fake encoder is asked for)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    if fake:  # reading, chunking and committing without the model's time: the budget's share at its largest
        env.update(PYTHONPATH=str(Path(lodex).resolve().parents[2]), LODEX_ENCODER__BACKEND="tests.fakes:fake_encoder")
    return env


def cost(args: argparse.Namespace) -> None:
    groups = bundles(args.evaldata)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        folders = {kind: build(work, kind, groups) for kind in args.kinds.split(",")}
        print(machine_line())
        print(f"encoder: {'the fake one (tests/fakes.py)' if args.fake else 'the bundled model'}")
        for kind, folder in folders.items():
            times: dict[str, list[float]] = {"before": [], "after": []}
            for round_ in range(args.rounds):
                for name, lodex in (("before", args.before), ("after", AFTER)):
                    data = work / f"data-{kind}-{name}-{round_}"
                    seconds, peak, summary = index(lodex, folder, data, _env(lodex, args.fake))
                    times[name].append(seconds)
                    print(
                        f"  {kind:4} {name:6} round {round_}: {seconds:6.1f} s, peak RSS {peak / 2**20:,.0f} MiB, "
                        f"{summary['added']} files, {summary['chunks']} chunks, {summary['failed']} failed",
                        flush=True,
                    )
            b, a = min(times["before"]), min(times["after"])
            print(f"{kind}: before {b:.1f} s, after {a:.1f} s (best of {args.rounds}): {100 * (a / b - 1):+.1f}%", flush=True)


def overhead(args: argparse.Namespace) -> None:
    """Reading alone, in this process (readers.extract) and through the budget (ReadPool.extract), alternated: the
    budget's added cost per file, which end-to-end runs on a loaded machine cannot resolve."""
    from lodex.indexer.readers.document import ReadLimits
    from lodex.indexer.readers.read_budget import ReadBudget, ReadPool
    from lodex.indexer.readers.readers import extract

    groups = bundles(args.evaldata)
    limits = ReadLimits(50 << 20, 50 << 20)
    print(machine_line())
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.kinds.split(","):
            files = [(p.name, p.read_bytes()) for p in sorted(build(Path(tmp), kind, groups).iterdir())]
            pool = ReadPool(ReadBudget())
            pool.extract(*files[0], limits)  # the worker started (once per indexer, not per file)
            here, there = [], []
            for _ in range(args.rounds):
                for way, into in ((extract, here), (pool.extract, there)):
                    started = time.perf_counter()
                    for name, data in files:
                        way(name, data, limits)
                    into.append(time.perf_counter() - started)
            pool.close()
            a, b = min(here), min(there)
            print(
                f"{kind}: {len(files)} files, {sum(len(d) for _, d in files) / 1e6:.1f} MB: in process {a:.2f} s, in a "
                f"reading process {b:.2f} s (best of {args.rounds}): +{1000 * (b - a) / len(files):.1f} ms a file",
                flush=True,
            )


def hostile_run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder, data = Path(tmp) / "docs", Path(tmp) / "data"
        reasons = hostile.write_all(folder)
        (folder / "pdf-note.txt").write_bytes(b"%PDF-1.4 is not what this note is about: it is about herons.\n" * 3)
        (folder / "rtf-note.md").write_bytes(b"{\\rtf1 starts this note, which goes on about egrets at length.\n" * 8)
        (folder / "plain.txt").write_text("Albatrosses glide for hours over the southern ocean.\n" * 20)
        (folder / "notes.md").write_text("# Gannets\n\nGannets dive from thirty metres.\n" * 20)
        (folder / "page.pdf").write_bytes(hostile.pdf_text("Cormorants dry their wings in the sun."))
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "250"}
        print(machine_line())
        seconds, peak, summary = index(AFTER, folder, data, env)
        print(
            f"lodex index: {seconds:.1f} s, peak RSS of the process tree {peak / 2**20:,.0f} MiB; "
            f"added {summary['added']}, failed {summary['failed']}"
        )
        status = subprocess.run([AFTER, "status", "--failed", "--data-dir", str(data)], env=env, cwd=data.parent, capture_output=True, text=True)
        print(status.stdout.strip())
        missing = [name for name, reason in reasons.items() if f"{name}: {reason}" not in status.stdout]
        print("every hostile file failed with its reason" if not missing else f"NOT as expected: {missing}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["cost", "overhead", "hostile"])
    parser.add_argument("--before", default="", help="the lodex executable of the checkout to compare with")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--fake", action="store_true", help="the fake encoder: time reading, chunking and commits only")
    parser.add_argument("--kinds", default="md,pdf,xlsx", help="which folders to time (md, pdf, xlsx)")
    parser.add_argument("--evaldata", type=Path, default=EVALDATA)
    args = parser.parse_args()
    {"cost": cost, "overhead": overhead, "hostile": hostile_run}[args.what](args)


if __name__ == "__main__":
    main()
