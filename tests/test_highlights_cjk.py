"""Chinese and Japanese query words highlighted where they stand: the API's spans (code points, exact in the passage,
with characters outside the BMP before them), the search page's marking of those spans (its own JavaScript, run in
Node), and the terminal's."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

import lodex.api
from lodex.api.cli.render import print_search
from lodex.search.results import SearchResponse

PAGE = Path(lodex.api.__file__).parent / "http" / "static" / "index.html"
ASTRAL = "𠀀😀"  # two characters outside the BMP: two UTF-16 units each in JavaScript's strings
TEXTS = {
    "zh.txt": ASTRAL + "前言。使用 apt-get 安装后检查时钟同步状态，时钟很重要。",
    "ja.txt": ASTRAL + "はじめに。時刻同期の問題を解決する方法。",
    "en.txt": "Swept wings delay the drag rise at transonic Mach numbers.",
}
EXPECTED = {("时钟同步", "zh.txt"): ["时钟同步", "时钟"], ("時刻同期の問題", "ja.txt"): ["時刻同期", "問題"]}


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """The API's JSON answers (over ASGI, a real store) to each query of EXPECTED, and a context window of each passage."""
    from fastapi.testclient import TestClient

    from lodex.api.factory import open_app
    from lodex.api.http.app import create_app
    from lodex.api.settings import Settings
    from tests.fakes import FakeEncoder

    tmp_path = tmp_path_factory.mktemp("highlights")
    root = tmp_path / "docs"
    root.mkdir()
    for name, text in TEXTS.items():
        (root / name).write_text(text)
    settings = Settings(base_dir=tmp_path)
    settings.index.data_dir = str(tmp_path / "data")
    service = open_app(settings, "serve", root, watch=False, encoder=FakeEncoder()).start()
    service.served.writer.reconcile().result(timeout=60)
    out = {}
    try:
        with TestClient(create_app(service), base_url="http://127.0.0.1:8765") as client:
            for query, _ in EXPECTED:
                got = client.get("/search", params={"q": query, "k": 3})
                assert got.status_code == 200, got.text
                out[query] = got.json()
                for hit in out[query]["results"]:
                    for p in hit["passages"]:
                        window = client.get(f"/documents/{hit['doc_id']}/text", params={"start": p["char_start"], "end": p["char_end"]})
                        p["context"] = window.json()["text"]
    finally:
        service.close()
    return out


def _passage(answers: dict[str, dict], query: str, path: str) -> dict:
    hit = next(h for h in answers[query]["results"] if h["path"] == path)
    return hit["passages"][0]


@pytest.mark.parametrize(("query", "path"), list(EXPECTED))
def test_the_api_highlights_the_query_words_in_code_points(answers: dict[str, dict], query: str, path: str) -> None:
    passage = _passage(answers, query, path)
    text = passage["text"]
    assert TEXTS[path][passage["char_start"] : passage["char_end"]] == text == passage["context"]
    assert text.startswith(ASTRAL)
    assert [text[a:b] for a, b in passage["highlights"]] == EXPECTED[query, path]
    utf16 = text.encode("utf-16-le")  # the same offsets read as UTF-16 units would land two characters early
    assert [utf16[2 * a : 2 * b].decode("utf-16-le", "replace") for a, b in passage["highlights"]] != EXPECTED[query, path]


def _page_functions(*names: str) -> str:
    """These functions of the search page's script, as written there."""
    script = PAGE.read_text()
    found = [re.search(rf"^  function {name}\(.*?^  }}$", script, re.S | re.M) for name in names]
    assert all(found), names
    return "\n".join(m.group(0) for m in found if m)


def _run_page(call: str, cases: list) -> list[str]:
    """`call` (a JavaScript expression of `c`, one case) for each case, with the page's own functions, in Node."""
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.fail("Node.js is missing: apt-get install nodejs (the search page's script runs in it)")
    program = (
        _page_functions("escapeHtml", "marked", "highlight")
        + f"\nconst cases = {json.dumps(cases)};\nconsole.log(JSON.stringify(cases.map((c) => {call})));"
    )
    done = subprocess.run([node, "-e", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize(("query", "path"), list(EXPECTED))
def test_the_search_page_marks_the_words_the_server_found(answers: dict[str, dict], query: str, path: str) -> None:
    """The page's `highlight` marks exactly the spans the API gave, past the characters outside the BMP; its passage
    in context (`marked` over the /documents/{id}/text window) marks the whole passage."""
    passage = _passage(answers, query, path)
    html = _run_page("highlight(c[0], c[1])", [[passage["text"], passage["highlights"]]])[0]
    assert re.findall(r"<mark>(.*?)</mark>", html) == EXPECTED[query, path]
    assert re.sub(r"</?mark>", "", html) == passage["text"]  # nothing lost or doubled around the marks
    html = _run_page(
        "marked(c[0], [[c[1], c[2]]], '<mark class=\"passage\">')", [[TEXTS[path] + "\nMore.", passage["char_start"], passage["char_end"]]]
    )[0]
    assert re.findall(r'<mark class="passage">(.*?)</mark>', html, re.S) == [passage["text"]]


def test_the_page_escapes_what_it_marks() -> None:
    assert _run_page("highlight(c[0], c[1])", [["😀<b>&</b>", [[1, 4]]]]) == ["😀<mark>&lt;b&gt;</mark>&amp;&lt;/b&gt;"]


@pytest.mark.parametrize(("query", "path"), list(EXPECTED))
def test_lodex_search_in_a_terminal_marks_the_same_words(answers: dict[str, dict], query: str, path: str) -> None:
    console = Console(record=True, force_terminal=True, color_system="standard", width=400)
    print_search(console, SearchResponse.from_dict(answers[query]))
    shown = console.export_text(styles=True)
    assert re.findall(r"\x1b\[1;33m(.*?)\x1b\[0m", shown) == EXPECTED[query, path]
