"""Chunking rules decided by one matrix: collections x (plain, bundles of 25) x variants, dense/hybrid nDCG@10 and tokens.

usage: python bench/quality/chunk_rules.py [--collections cranfield,cisi,med] [--variants plain,late,...] [--bundles 1,25]
           [--precision fast|exact] [--evaldata DIR] [--json FILE]
       python bench/quality/chunk_rules.py --why N [--collections cranfield]   (why late chunking loses on short documents)
Each cell is one `lodex eval DATASET --bundle B --json` run in a fresh process with the
variant's LODEX_* overrides (a fresh temporary index each time), so a cell measures exactly what a user's new
index with those settings gets. Results are quality and token counts, not timing: contention does not matter.
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


# Each variant: the settings it overrides (LODEX_SECTION__KEY=value); "default" takes the defaults as they are.
def _rule(late: str, late_for: str = "all", slack: int = 0, breaks: bool = True, whole: int = 0, vector: str = "mean") -> dict[str, str]:
    return {
        "LODEX_CHUNKING__LATE": late,
        "LODEX_CHUNKING__LATE_FOR": late_for,
        "LODEX_CHUNKING__WHOLE_SLACK": str(slack),
        "LODEX_CHUNKING__OVERLAP_AT_BREAKS": str(breaks).lower(),
        "LODEX_CHUNKING__WHOLE_TOKENS": str(whole),
        "LODEX_CHUNKING__DOCUMENT_VECTOR": vector,
    }


VARIANTS: dict[str, dict[str, str]] = {
    "plain": _rule("false"),  # chunks encoded alone, cut as before issue 42 (always 32 tokens of overlap)
    "late": _rule("true"),  # late chunking for every document: the default before issue 39
    "late-long": _rule("true", "long"),  # late chunking only for documents longer than one window
    "one": _rule("false", slack=32),  # a text (or its rest) of up to max_tokens + 32 tokens is one chunk
    "one-breaks": _rule("false", slack=32, breaks=False),  # ... and no overlap after a sentence or paragraph end
    "one-late-long": _rule("true", "long", slack=32),
    "one-breaks-late-long": _rule("true", "long", slack=32, breaks=False),
    "whole": _rule("false", whole=256),  # a text of up to one window (256 tokens) is one chunk, encoded whole
    "whole-late-long": _rule("true", "long", whole=256),  # ... and late chunking for longer ones
    "whole-vector": _rule("false", vector="whole"),  # plain chunks; a short document's own vector from its whole text
    "default": {},
}


def cell(dataset: Path, bundle: int, env: dict[str, str], precision: str) -> dict:
    """One `lodex eval` run's JSON answer."""
    run_env = os.environ | {"HF_HUB_OFFLINE": "1", "LODEX_ENCODER__PRECISION": precision} | env
    out = subprocess.run(
        [str(ROOT / ".venv/bin/lodex"), "eval", str(dataset), "--bundle", str(bundle), "--json"],
        env=run_env,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if out.returncode:
        raise SystemExit(f"lodex eval {dataset} --bundle {bundle} failed: {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout)


def why(dataset: Path, documents: int) -> None:
    """On the first `documents` abstracts that plain chunking cuts in two (both chunks in one 256-token window): how
    alike a document's two chunk vectors are, and how close each is to the whole abstract's own vector, plain vs late."""
    import numpy as np

    from lodex.encoders.transformers_encoder import TransformersEncoder
    from lodex.indexer.chunking.chunker import Chunker
    from lodex.indexer.chunking.late_chunking import plan_windows

    encoder = TransformersEncoder()
    chunker = Chunker(encoder.token_spans, 128 - encoder.special_tokens, 32)
    texts = []
    with (dataset / "corpus.jsonl").open() as fh:
        for line in fh:
            doc = json.loads(line)
            text = f"{doc.get('title', '')}\n\n{doc['text']}".strip()
            if len(chunker.chunk(text)) == 2 and len(encoder.token_spans([text])[0]) <= 254:
                texts.append(text)
            if len(texts) == documents:
                break
    pairs, whole = {"plain": [], "late": []}, encoder.embed(texts)
    for text, doc_vector in zip(texts, whole):
        chunks = chunker.chunk(text)
        windows = plan_windows(text, chunks, encoder.token_spans, 256 - encoder.special_tokens, 32)
        late = np.concatenate(encoder.embed_windows(windows))
        for name, v in (("plain", encoder.embed([c.text for c in chunks])), ("late", late)):
            pairs[name].append((float(v[0] @ v[1]), float(v[0] @ doc_vector), float(v[1] @ doc_vector)))
    print(f"{len(texts)} two-chunk abstracts of {dataset.name}: mean cosine chunk1-chunk2, chunk1-document, chunk2-document")
    for name, rows in pairs.items():
        a = np.asarray(rows)
        print(f"{name:6s} {a[:, 0].mean():.3f} {a[:, 1].mean():.3f} {a[:, 2].mean():.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collections", default="cranfield,cisi,med")
    parser.add_argument("--variants", default="plain,late,default")
    parser.add_argument("--bundles", default="1,25")
    parser.add_argument("--precision", default="fast", choices=("fast", "exact"))
    parser.add_argument("--evaldata", default=os.environ.get("LODEX_EVALDATA", "/work/shared/evaldata"))
    parser.add_argument("--json", type=Path, help="append each cell's result as one JSON line to this file")
    parser.add_argument("--why", type=int, default=0, help="instead of the matrix: chunk vector similarities on N documents")
    args = parser.parse_args()
    if args.why:
        return why(Path(args.evaldata) / args.collections.split(",")[0], args.why)
    unknown = [v for v in args.variants.split(",") if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variant(s) {', '.join(unknown)}: choose among {', '.join(VARIANTS)}")
    print(f"{'collection':12s} {'bundle':>6s} {'variant':14s} {'dense':>7s} {'hybrid':>7s} {'chunks':>7s} {'tokens':>9s}", flush=True)
    for name in args.collections.split(","):
        for bundle in (int(b) for b in args.bundles.split(",")):
            for variant in args.variants.split(","):
                r = cell(Path(args.evaldata) / name, bundle, VARIANTS[variant], args.precision)
                dense, hybrid = r["modes"]["dense"]["ndcg@10"], r["modes"]["hybrid"]["ndcg@10"]
                print(f"{name:12s} {bundle:6d} {variant:14s} {dense:7.4f} {hybrid:7.4f} {r['chunks']:7d} {r['tokens']:9d}", flush=True)
                if args.json:
                    with args.json.open("a") as f:
                        f.write(
                            json.dumps(
                                {
                                    "collection": name,
                                    "bundle": bundle,
                                    "variant": variant,
                                    "precision": args.precision,
                                    "dense": dense,
                                    "hybrid": hybrid,
                                    "chunks": r["chunks"],
                                    "tokens": r["tokens"],
                                }
                            )
                            + "\n"
                        )


if __name__ == "__main__":
    sys.exit(main())
