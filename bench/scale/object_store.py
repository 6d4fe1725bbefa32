"""An index on object storage against one in a local folder, in one run: `lodex index --rebuild` of a folder, warm
searches, and single-document commits (pushes) per second, on a moto S3 server on loopback (a network round trip
per request, no real network: a floor for what a real store costs).

usage: python bench/scale/object_store.py [FOLDER] [--queries 20] [--commits 30] [--backend transformers]
Needs the test extra (moto[server]). Prints the CPU flags beside the figures.
"""

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.harness import machine_line  # noqa: E402
from lodex.api.factory import open_app  # noqa: E402
from lodex.api.settings import load_settings  # noqa: E402
from lodex.encoders.encoder import Encoder  # noqa: E402

QUERIES = [
    "heat transfer in hypersonic boundary layers",
    "wind tunnel measurements of lift",
    "clinical trial outcomes",
    "information retrieval evaluation",
    "turbulent flow separation",
]


def measure(data_dir: str, folder: Path, encoder: Encoder | None, args: argparse.Namespace, cache: Path) -> dict[str, float]:
    """Index, search and commit timings against one data dir (a folder or an s3:// URI)."""
    settings = load_settings(None, {"index.data_dir": data_dir, "encoder.backend": args.backend, "storage.cache_dir": str(cache)})
    started = time.perf_counter()
    with open_app(settings, "write", folder, rebuild=True, encoder=encoder) as side:
        summary = side.indexer.run(folder)
        index_s = time.perf_counter() - started
        encoder = side.encoder
        started = time.perf_counter()
        for n in range(args.commits):
            side.indexer.index_text(f"note-{n}.txt", f"Note {n}: a short pushed text about flow number {n}.", "", "{}")
        commits_per_s = args.commits / (time.perf_counter() - started)
    with open_app(settings, "read", encoder=encoder) as reader:  # what `lodex search` opens, with the encoder loaded
        reader.search(QUERIES[0], 10)  # warm: vector index loaded, caches filled
        times = []
        for n in range(args.queries):
            started = time.perf_counter()
            reader.search(QUERIES[n % len(QUERIES)], 10)
            times.append(time.perf_counter() - started)
    return {"index_s": index_s, "chunks": summary.chunks, "search_p50_ms": 1000 * statistics.median(times), "commits_per_s": commits_per_s}


@contextmanager
def moto_s3() -> Iterator[str]:
    """A moto S3 server on loopback with a bucket "bench", the environment pointed at it (LODEX_STORAGE__*, AWS_*)."""
    import pyarrow.fs as pafs
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_REGION": "us-east-1",
            "LODEX_STORAGE__ENDPOINT": f"http://{host}:{port}",
            "LODEX_STORAGE__ALLOW_HTTP": "true",
        }
    )
    pafs.S3FileSystem(endpoint_override=f"{host}:{port}", scheme="http", region="us-east-1", allow_bucket_creation=True).create_dir("bench")
    try:
        yield "s3://bench"
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", nargs="?", type=Path, default=ROOT / "samples")
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--commits", type=int, default=30)
    parser.add_argument("--backend", default="transformers", help="encoder.backend (tests.fakes:fake_encoder: the store alone)")
    args = parser.parse_args()

    with moto_s3(), tempfile.TemporaryDirectory() as tmp:
        local = measure(str(Path(tmp) / "local"), args.folder.resolve(), None, args, Path(tmp) / "unused")
        remote = measure("s3://bench/index", args.folder.resolve(), None, args, Path(tmp) / "cache")
    print(f"{machine_line()}; encoder.backend {args.backend}; folder {args.folder} ({local['chunks']:.0f} chunks)")
    print(f"{'':24}{'local folder':>14}{'moto S3':>14}{'ratio':>8}")
    for key, label in (("index_s", "index --rebuild (s)"), ("search_p50_ms", "search p50 (ms)"), ("commits_per_s", "commits/s (pushes)")):
        print(f"{label:24}{local[key]:14.2f}{remote[key]:14.2f}{remote[key] / local[key]:8.2f}")


if __name__ == "__main__":
    main()
