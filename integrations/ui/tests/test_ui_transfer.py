"""Export and import from the page, in the browser: the file the Download button gives
restores every memory into another store through the Import form, found there on the
keyword and the vector leg; importing it twice changes nothing. And one run on the
default embedding model, as a user gets it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _ui_support import CHROMIUM, NO_CHROMIUM, chromium_browser, open_store, seed, stored, ui_server

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=NO_CHROMIUM)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from chromium_browser()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(30_000)
    yield page
    context.close()


def test_export_then_import_into_another_store(tmp_path: Path, page: Any) -> None:
    source, target = tmp_path / "source", tmp_path / "target"
    items = [
        {
            "text": f"memory {i} about {'kayaks' if i == 7 else 'nothing much'}",
            "id": f"m{i}",
            "tags": ["t"] if i % 2 else [],
            "metadata": {"i": i},
        }
        for i in range(25)
    ]
    seed(source, items)
    seed(target, [{"text": "already here", "id": "old"}])
    with ui_server(source) as server:
        page.goto(server.url + "/transfer")
        with page.expect_download() as waiting:
            page.click("button:has-text('Download')")
        exported = tmp_path / "export.jsonl"
        waiting.value.save_as(exported)
    lines = exported.read_text().splitlines()
    assert sum('"m' in line for line in lines) == 25
    with ui_server(target) as server:
        page.goto(server.url + "/transfer")
        page.set_input_files("input[name=file]", str(exported))
        page.click("button:has-text('Preview')")
        # The preview: 25 new, none replaced; nothing is written before the Yes.
        assert page.locator(".import-preview [data-added]").get_attribute("data-added") == "25"
        assert page.locator(".import-preview .count").get_attribute("data-count") == "0"
        assert set(stored(target)) == {"old"}
        page.click("button:has-text('Yes, import 25')")
        report = page.locator("p.done[data-added]")
        assert report.get_attribute("data-added") == "25"
        assert "unchanged 0" in report.inner_text()
        page.set_input_files("input[name=file]", str(exported))
        page.click("button:has-text('Preview')")
        page.click("button:has-text('Yes, import 25')")
        assert page.locator("p.done[data-added]").get_attribute("data-added") == "0"
        assert "unchanged 25" in page.locator("p.done[data-added]").inner_text()
        # A file that is not an export is refused, with its line, and adds nothing.
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"not": "a memory"}\n')
        page.set_input_files("input[name=file]", str(bad))
        page.click("button:has-text('Preview')")
        assert "bad.jsonl" in page.locator(".error").inner_text()
        assert "line 1" in page.locator(".error").inner_text()
    after = stored(target)
    assert set(after) == {"old", *(f"m{i}" for i in range(25))}
    assert after["m7"].tags == ("t",) and dict(after["m7"].metadata) == {"i": 7}
    store = open_store(target)
    try:
        hit = store.search("kayaks", k=1)[0]
        assert hit.id == "m7" and {"vector", "keyword"} <= set(hit.ranks)
    finally:
        store.close()


def test_the_default_model_store(tmp_path: Path, page: Any) -> None:
    """No --embedding: the page opens the store with the default model (all-MiniLM-L6-v2,
    offline) and ranks by meaning."""
    from hybrid_memory import HybridMemory

    store = HybridMemory(path=str(tmp_path))
    store.add_many(
        [
            {"text": "Alice prefers dark mode in every editor", "id": "theme"},
            {"text": "The quarterly report is due on Friday", "id": "report"},
            {"text": "Bob's cat is called Miso", "id": "cat"},
        ]
    )
    store.close()
    with ui_server(tmp_path, embedding=False) as server:
        page.goto(server.url + "/?q=which+colour+scheme+does+alice+like")
        first = page.locator("li.hit").first
        assert first.get_attribute("data-id") == "theme"
        assert "#1" in first.locator(".leg-vector").inner_text()
        page.click("text=vector leg alone")
        page.wait_for_url("**leg=vector*")
        assert page.locator("li.hit").first.get_attribute("data-id") == "theme"
