"""Regressions of issue #14's findings, one test (or more) each: no file can hang or poison indexing, offsets stay
exact, names round-trip, long work stops when asked."""

import os
import socket
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from lodex.indexer import encode_phase
from lodex.indexer.chunking import chunker as chunker_module
from lodex.indexer.chunking.chunker import Chunker
from lodex.indexer.paths import key_path, path_key, printable
from lodex.indexer.readers.decoding import OffsetMap, clean, decode_source
from lodex.indexer.readers.readers import MAX_HTML_DEPTH, extract
from lodex.indexer.scanner import ScanRules, scan
from lodex.indexer.streaming import chunk_stream, text_blocks
from lodex.store.job_log import FileRecord, JobLog
from tests.conftest import make_pipeline
from tests.fakes import FakeEncoder


def _run_with_deadline(fn, seconds: float = 60):
    """fn() on a thread; fails the test (instead of hanging it) when it does not return in time."""
    result: dict = {}

    def target() -> None:
        try:
            result["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 — re-raised below
            result["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"did not finish within {seconds} s"
    if "error" in result:
        raise result["error"]
    return result["value"]


def _words(i: int, n: int = 60) -> str:
    return " ".join(f"w{i}x{j}" for j in range(n))


# ---- 1. a one-line text as large as a streaming window -------------------------------------------------------


def test_a_huge_one_line_file_is_indexed_and_the_run_ends(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "big.txt").write_bytes(b"x" * (3 << 20) + b" zanzibar\n")
    (root / "small.txt").write_text("a small neighbour about gliders " * 10)
    store, indexer, searcher = make_pipeline(tmp_path / "data", FakeEncoder(), rules=ScanRules(stream_bytes=1 << 20))
    summary = _run_with_deadline(lambda: indexer.run(root))
    assert summary.failures == {} and summary.added == 2
    rows = store.chunks.search().select(["text", "char_start", "char_end"]).limit(None).to_arrow().to_pylist()
    longest = max(len(r["text"]) for r in rows)
    assert longest <= indexer.chunker.max_tokens * chunker_module.MAX_TOKEN_CHARS  # chunks stay bounded
    assert searcher.search("zanzibar", 1, mode="bm25").results[0].path == "big.txt"


def test_chunk_stream_moves_on_when_one_chunk_spans_a_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chunker_module, "MAX_TOKEN_CHARS", 1 << 30)  # one token per 32k-character segment
    enc = FakeEncoder()
    blocks = iter(["y" * (1 << 20)] * 3)
    chunks = _run_with_deadline(lambda: list(chunk_stream(Chunker(enc.token_spans, 60, 4), blocks)), 30)
    assert chunks[0].char_start == 0 and chunks[-1].char_end == 3 << 20
    assert all(a.char_start < b.char_start for a, b in zip(chunks, chunks[1:]))


# ---- 2. pipes, devices, sockets, link loops ------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_named_pipe_never_blocks_the_run(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    os.mkfifo(root / "notes.txt")
    (root / "good.txt").write_text("gliders soar on thermals " * 10)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "sock.md"))
    try:
        _, indexer, _ = make_pipeline(tmp_path / "data", FakeEncoder())
        summary = _run_with_deadline(lambda: indexer.run(root), 30)
    finally:
        sock.close()
    assert summary.added == 1
    assert summary.failures == {"notes.txt": "not a regular file (named pipe); skipped", "sock.md": "not a regular file (socket); skipped"}


def test_a_pipe_swapped_in_after_the_scan_is_not_waited_on(tmp_path: Path) -> None:
    from lodex.indexer.errors import ReadError
    from lodex.indexer.paths import open_regular

    pipe = tmp_path / "late.txt"
    os.mkfifo(pipe)
    with pytest.raises(ReadError, match="named pipe"):
        _run_with_deadline(lambda: open_regular(pipe), 10)


def test_links_to_devices_and_link_loops_are_refused_when_following(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("alpha " * 20)
    (root / "sub" / "b.txt").write_text("beta " * 20)
    (root / "sub" / "up").symlink_to("..")
    (root / "zero.txt").symlink_to("/dev/zero")
    found = _run_with_deadline(lambda: scan(root, ScanRules(follow_symlinks=True)), 30)
    files, refused = found.files, found.refused
    assert [f.path for f in files] == ["a.txt", "sub/b.txt"]
    assert refused == {
        "sub/up": "symbolic link loop (links back to a folder above it); skipped",
        "zero.txt": "not a regular file (character device); skipped",
    }
    found = scan(root, ScanRules())  # not following: links are left alone, as configured
    files, refused = found.files, found.refused
    assert [f.path for f in files] == ["a.txt", "sub/b.txt"] and refused == {}


def test_a_file_growing_past_its_limit_while_read_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    grows = root / "grows.md"
    grows.write_text("# Log\n\nline\n")
    _, indexer, _ = make_pipeline(tmp_path / "data", FakeEncoder(), rules=ScanRules(max_parsed_bytes=1000))
    files = scan(root, indexer.rules).files
    grows.write_text("# Log\n\n" + "line\n" * 1000)  # after the listing: its listed size said it was small
    item = indexer.preparer().prepare_with_retries(files[0], None, {})
    assert "grew after it was listed" in item.error


# ---- 3. names that are not UTF-8; the job log never stays inside a failed transaction -------------------------


def test_a_non_utf8_file_name_is_indexed_and_recorded(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    name = os.fsdecode(b"bad\xffname.txt")
    (root / name).write_text("pelicans glide over the bay " * 10)
    jobs = JobLog(tmp_path / "data")
    store, indexer, searcher = make_pipeline(tmp_path / "data", FakeEncoder())
    indexer.jobs = jobs
    first = indexer.run(root)
    assert first.added == 1 and first.failures == {}
    assert searcher.search("pelicans", 1, mode="bm25").results[0].path == "bad\\xffname.txt"
    assert jobs.last_run()["added"] == 1  # the run was finished
    assert indexer.run(root).unchanged == 1
    literal = "bad\\xffname.txt"  # a real backslash, x, f, f: not the same file, not the same name
    (root / literal).write_text("cormorants dive " * 10)
    both = indexer.run(root)
    assert both.added == 1 and set(store.document_records()) == {"bad\\xffname.txt", "bad\\\\xffname.txt"}
    assert indexer.run(root).unchanged == 2  # and no run sees one as the other
    assert key_path("bad\\\\xffname.txt") == literal
    (root / literal).unlink()
    assert indexer.run(root, only=["bad\\\\xffname.txt"]).deleted == 1
    assert key_path("bad\\xffname.txt") == name  # the index's name leads back to the file
    (root / name).unlink()
    assert indexer.run(root).deleted == 1 and store.document_records() == {}


def test_a_failing_job_log_write_rolls_back(tmp_path: Path) -> None:
    jobs = JobLog(tmp_path)
    run = jobs.start_run("index")
    with pytest.raises(AttributeError):  # a path that is no string fails the write
        jobs.record(run, [FileRecord("ok.txt", "failed", error="x"), FileRecord(object(), "failed")])  # type: ignore[arg-type]
    jobs.record(run, [FileRecord("q \ud800.txt", "failed", error="lone \udcff")])  # surrogates stored escaped
    jobs.finish_run(run, {"added": 0})
    assert jobs.failed() == {"q \\ud800.txt": {"reason": "lone \\xff", "attempts": 1, "at": pytest.approx(time.time(), abs=60)}}
    assert jobs.last_run()["id"] == run


def test_names_print_without_terminal_escapes() -> None:
    assert printable("evil\x1b[2J\x07name\u202e.txt") == "evil\\x1b[2J\\x07name\\u202e.txt"
    assert printable(os.fsdecode(b"caf\xe9.txt")) == "caf\\xe9.txt"
    assert path_key(os.fsdecode(b"caf\xe9.txt")) == "caf\\xe9.txt"


# ---- offsets: the file's own text, whatever invisible characters it holds ------------------------------------

INVISIBLE = (
    "\ufeffFirst line\u200e of the report.\r\nSecond\u200b line, with marks\u200f\u202a inside.\r\n\r\n"
    "A new\u00ad para\u2060graph about zeppelins\u200d and gliders.\r\n"
)


def _check_offsets(source: str, rows: list[dict]) -> None:
    assert rows
    for row in rows:
        assert clean(source[row["char_start"] : row["char_end"]]) == row["text"]


def test_offsets_index_the_files_own_text(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "marks.txt").write_bytes((INVISIBLE * 40).encode("utf-8"))
    store, indexer, _ = make_pipeline(tmp_path / "data", FakeEncoder(), max_tokens=24, overlap=4)
    indexer.run(root)
    source, _ = decode_source((root / "marks.txt").read_bytes())
    assert source.startswith("First")  # the BOM is not part of the text
    _check_offsets(source, store.chunks.search().limit(None).to_arrow().to_pylist())


def test_offsets_of_a_streamed_file_index_its_own_text(tmp_path: Path) -> None:
    text = INVISIBLE * 4000
    path = tmp_path / "marks.txt"
    path.write_bytes(text.encode("utf-8"))
    offsets = OffsetMap()
    enc = FakeEncoder()
    chunks = list(chunk_stream(Chunker(enc.token_spans, 40, 4), text_blocks(path, None, offsets), offsets))
    source, _ = decode_source(path.read_bytes())
    _check_offsets(source, [{"char_start": c.char_start, "char_end": c.char_end, "text": c.text} for c in chunks])


# ---- messages --------------------------------------------------------------------------------------------------


def test_utf16_without_bom_and_huge_csv_cells_are_read(tmp_path: Path) -> None:
    text = "Sailplanes use thermals and ridge lift to stay aloft.\n" * 20
    got = extract("le.txt", text.encode("utf-16-le"))
    assert got.text == text and got.encoding == "utf-16-le"
    assert extract("be.txt", text.encode("utf-16-be")).text == text
    cell = "word " * 40_000  # 200 KB, over csv's default field limit
    got = extract("big.csv", f'name,notes\nalpha,"{cell}"\n'.encode())
    assert got.text.startswith("name | notes\nalpha | word word")


def test_deep_html_and_json_fail_with_a_reason_quickly() -> None:
    from lodex.indexer.errors import ReadError

    deep = "<html><body>" + "<div>x " * 150_000 + "</div>" * 150_000 + "</body></html>"
    with pytest.raises(ReadError, match="nested deeper than"):
        _run_with_deadline(lambda: extract("nested.html", deep.encode()), 20)
    fine = "<html><body>" + "<div>x " * (MAX_HTML_DEPTH - 10) + "</div>" * (MAX_HTML_DEPTH - 10) + "<li>a<li>b" * 5000 + "</body></html>"
    assert extract("fine.html", fine.encode()).text.startswith("x")
    with pytest.raises(ReadError, match="nested too deeply"):
        extract("deep.json", ("[" * 200_000 + "]" * 200_000).encode())


# ---- 7. a folder path never lands in the pushed documents' namespace ---------------------------------------


def test_a_folder_named_like_the_pushed_namespace_stays_apart(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    (root / "@api").mkdir(parents=True)
    store, indexer, searcher = make_pipeline(tmp_path / "data", FakeEncoder())
    indexer.index_text("memo.txt", "pushed memo about airships " * 5)
    (root / "@api" / "memo.txt").write_text("folder memo about submarines " * 5)
    indexer.run(root)
    assert set(store.document_records()) == {"@api/memo.txt", "./@api/memo.txt"}
    (root / "@api" / "memo.txt").unlink()
    indexer.run(root, only=["@api"])  # the pushed documents' names: no folder file there, and pushed ones are kept
    assert set(store.document_records()) == {"@api/memo.txt", "./@api/memo.txt"}
    indexer.run(root, only=[path_key("@api")])  # what the watcher sends when the folder changes
    assert set(store.document_records()) == {"@api/memo.txt"}
    assert searcher.search("airships", 1, mode="bm25").results[0].path == "@api/memo.txt"
    assert searcher.search("submarines", 1, mode="bm25").results == []


# ---- long work stops when asked; files deleted or changed while encoded are dropped ----------------------------


class HeldFake(FakeEncoder):
    """Runs a hook in its first call; once `hold_from` is set, each call holds until `gate` opens (the test decides how
    long the encoding work lasts: no timing)."""

    def __init__(self, hook=None, hold_from: threading.Event | None = None) -> None:
        super().__init__()
        self.hook, self.hold_from, self.gate, self.calls = hook, hold_from, threading.Event(), 0
        self.held = threading.Event()  # set once a call holds at the gate

    def embed(self, texts, kind="document", lengths=None) -> np.ndarray:
        self.calls += 1
        if self.calls == 1 and self.hook:
            self.hook()
        if self.hold_from is not None and self.hold_from.is_set():
            self.held.set()
            assert self.gate.wait(30), "the test never opened the gate"
        return super().embed(texts, kind, lengths)


@pytest.mark.parametrize("parallel", [1, 2])  # 2: groups run side by side, as on fast mode's sessions
@pytest.mark.parametrize("what", ["deleted", "changed"])
def test_a_file_deleted_or_changed_while_encoded_is_dropped_early(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, what: str, parallel: int) -> None:
    monkeypatch.setattr(encode_phase, "CHECK_EVERY_S", 0.0)  # the files are looked at between every two groups (0.5 s apart in use)
    root = tmp_path / "docs"
    root.mkdir()
    big = root / "big.txt"
    big.write_text("\n\n".join(_words(i) for i in range(300)))  # ~300 chunks: many encoder groups

    def touch() -> None:
        if what == "deleted":
            big.unlink()
        else:
            big.write_text("new content " * 50)

    encoder = HeldFake(touch)  # the file changes in the first call; the groups after it check and drop it
    encoder.parallel_calls = parallel
    _, indexer, _ = make_pipeline(tmp_path / "data", encoder, max_tokens=60)
    indexer.flush_tokens = 1 << 20  # the whole file in one flush: only the group checks can stop it
    summary = _run_with_deadline(lambda: indexer.run(root), 60)
    expected = "vanished while being read" if what == "deleted" else "changed while being read"
    assert summary.failures["big.txt"].startswith(expected)
    assert encoder.texts_encoded < 150  # dropped long before its ~300 chunks were encoded


def test_a_stopping_writer_stops_a_long_run_soon(tmp_path: Path) -> None:
    from lodex.indexer.writer import IndexWriter, RunHooks

    root = tmp_path / "docs"
    root.mkdir()
    for i in range(60):
        (root / f"d{i:02d}.txt").write_text(_words(i, 200))
    committed = threading.Event()
    encoder = HeldFake(hold_from=committed)  # once files are committed, the encoding in flight holds at the gate
    _, indexer, _ = make_pipeline(tmp_path / "data", encoder, max_tokens=60)
    writer = IndexWriter(indexer, root, nice=0, hooks=RunHooks(on_file=lambda record: committed.set())).start()
    run = writer.reconcile()
    queued = writer.paths(["d00.txt"])
    assert committed.wait(30), "no file was committed"  # the run is under way, its first files in the index
    assert encoder.held.wait(30), "the run ended before the stop"
    stopping = threading.Thread(target=writer.stop, kwargs={"timeout": 30})
    stopping.start()
    assert indexer.cancel.wait(30), "the stop did not reach the run"
    started = time.monotonic()
    encoder.gate.set()  # the encoding in flight ends; the run must stop at its next check
    stopping.join(30)
    assert not stopping.is_alive() and time.monotonic() - started < 5
    assert run.result(timeout=1).interrupted and queued.cancelled()
    again = indexer.run(root)  # the next run finishes the rest
    assert not again.interrupted and again.added + again.unchanged == 60 and again.unchanged > 0


# ---- found by trying to break the first round of fixes ----------------------------------------------------------


def test_rst_with_unmatched_inline_markup_reads_in_linear_time() -> None:
    from lodex.indexer.readers.readers import read_rst

    for text in ("*a " * 60_000, "`a <b " * 20_000, ":r:`x " * 30_000):
        _run_with_deadline(lambda text=text: read_rst(text), 10)
    assert read_rst("**bold** *it* ``code`` `link <http://x>`_ :ref:`label <t>`").text == "bold it code link label"


@pytest.mark.parametrize("page", ["<div/>" * 5_000, "<div></x>" * 5_000, "<b>" * 5_000, "<div><span>" * 3_000])
def test_the_html_depth_guard_counts_as_a_parser_nests(page: str) -> None:
    from lodex.indexer.errors import ReadError
    from lodex.indexer.readers.readers import html_depth

    assert html_depth(page) > MAX_HTML_DEPTH
    with pytest.raises(ReadError, match="nested deeper than"):
        extract("page.html", f"<html><body>{page}</body></html>".encode())


def test_flat_pages_pass_the_html_depth_guard() -> None:
    from lodex.indexer.readers.readers import html_depth

    page = "<div><p>a<p>b</div>" * 5_000 + "<li>x" * 5_000 + "<br/><img src=x/>" * 1_000 + "<svg>" + "<path/>" * 2_000 + "</svg>"
    assert html_depth(f"<html><body>{page}</body></html>") <= 4


def test_long_markdown_is_read_in_segments_with_the_same_text() -> None:
    from lodex.indexer.readers import text_readers as readers

    whole = "# Title\n\n" + "".join(
        f"Paragraph {i} about gliders.\n\n```\ncode {i}\n\nstill code {i}\n```\n\n- item {i}\n- more {i}\n\n" for i in range(3_000)
    )
    segments = list(readers._markdown_segments(whole))
    assert len(segments) > 3 and "".join(s + "\n" for s in segments)[:-1] == whole
    assert all(s.count("```") % 2 == 0 for s in segments)  # never cut inside fenced code
    assert max(len(s) for s in segments) <= 5 * readers._MD_SEGMENT_CHARS
    text, title = (doc := readers.read_markdown(whole)).text, doc.title
    assert title == "Title" and text.count("still code") == 3_000 and text.count("more ") == 3_000
    listing = "- x\n" * 100_000  # no blank line at all: cut at line ends
    assert max(len(s) for s in readers._markdown_segments(listing)) <= 5 * readers._MD_SEGMENT_CHARS


def test_a_json_value_python_cannot_convert_fails_with_a_reason() -> None:
    from lodex.indexer.errors import ReadError

    with pytest.raises(ReadError, match="unreadable JSON value"):
        extract("n.json", ('{"n": ' + "1" * 10_000 + "}").encode())


def test_pushed_text_is_cleaned_and_its_offsets_index_the_text_pushed(tmp_path: Path) -> None:
    store, indexer, _ = make_pipeline(tmp_path / "data", FakeEncoder(), max_tokens=24, overlap=4)
    text = INVISIBLE * 30 + "\u200b" * 5_000 + "tail words"
    indexer.index_text("marks", text)
    rows = store.chunks.search().limit(None).to_arrow().to_pylist()
    assert all("\u200b" not in r["text"] for r in rows)
    _check_offsets(text, rows)
