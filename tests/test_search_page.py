"""The search page in a real headless Chromium (Debian's, driven by Playwright) against a real `lodex serve`."""

import shutil
from pathlib import Path

import pytest

from tests.test_serve import Server, get
from tests.waiting import wait_until

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.mark.slow
def test_type_a_query_and_see_the_highlighted_passage(tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is missing: `make test` installs it (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    root = tmp_path / "docs"
    root.mkdir()
    (root / "birds.md").write_text("# Birds\n\nArctic terns migrate from the Arctic to the Antarctic every year.\n\nSwallows nest under roofs.\n")
    (root / "wings.txt").write_text("Swept wings delay the drag rise at transonic Mach numbers.\n")
    shutil.copy(Path(__file__).parent / "fixtures" / "pdf" / "forty_pages.pdf", root / "report.pdf")
    server = Server(root, tmp_path / "data")
    try:
        server.wait_ready()
        wait_until(
            lambda: not get(server.url + "/ready")[1]["indexing"],
            [server.home],
            180,  # the PDF takes a few seconds
            "the folder indexed first",
            detail=server.output,
        )
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page()
            page.goto(server.url + "/")
            page.wait_for_function("document.activeElement && document.activeElement.id === 'q'", timeout=10_000)
            page.keyboard.type("where do arctic terns migrate")
            page.keyboard.press("Enter")
            first = page.locator("li.hit").first
            first.wait_for(timeout=30_000)
            assert "birds.md" in first.locator(".path").inner_text()
            marks = [m.lower() for m in first.locator("mark").all_inner_texts()]
            assert {"arctic", "terns", "migrate"} <= set(marks)
            assert "Arctic terns migrate" in first.locator("blockquote").first.inner_text()
            assert "§ Birds" in first.locator("blockquote small").first.inner_text()  # the passage's section
            first.locator("button.in-context").first.click()  # read it in context: the text around it, the passage marked
            context = first.locator(".context").first
            context.wait_for(state="visible", timeout=10_000)
            assert "Swallows nest under roofs." in context.inner_text() and "birds.md" in context.locator(".where").inner_text()
            assert "Arctic terns migrate" in context.locator("mark.passage").inner_text()
            page.wait_for_function("document.getElementById('status').textContent.includes('documents in')")
            page.fill("#q", "quokka census of Rottnest Island")  # a PDF's passage shows its page
            page.keyboard.press("Enter")
            page.wait_for_function(
                "document.querySelector('li.hit .path') && document.querySelector('li.hit .path').textContent.includes('report.pdf')", timeout=30_000
            )
            assert "p. 37" in page.locator("li.hit").first.locator("blockquote small").first.inner_text()
            page.fill("#q", "where do arctic terns migrate")
            page.keyboard.press("Enter")
            page.wait_for_function("document.querySelector('li.hit .path').textContent.includes('birds.md')", timeout=30_000)
            assert "indexing" not in page.locator("#status").inner_text()  # the folder is indexed
            ready = {"ready": True, "model": "m", "documents": 2, "indexing": True, "files_left": 7}
            page.route("**/ready", lambda route: route.fulfill(json=ready))  # as while a large folder is indexed
            page.focus("#q")
            page.keyboard.press("Enter")
            page.wait_for_function("document.getElementById('status').textContent.includes('still indexing')", timeout=10_000)
            assert "(7 files left): results may be incomplete" in page.locator("#status").inner_text()
            page.keyboard.press("Tab")
            page.keyboard.press("Tab")
            assert page.evaluate("document.activeElement.className") == "hit"  # results are reachable by keyboard
            page.screenshot(path=str(tmp_path / "search-page.png"))
            browser.close()
    finally:
        server.stop()
