"""The page in a real browser (Debian's chromium), against the real server in a
subprocess: browse and paging, search and its legs, one memory, edit, delete, bulk delete
and re-tag with a confirmation, and another process's write showing up live."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from _ui_support import (
    CHROMIUM,
    NO_CHROMIUM,
    REPO,
    child_env,
    chroma_server,
    chromium_browser,
    seed,
    stored,
    ui_server,
)

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=NO_CHROMIUM)

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from chromium_browser()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(20_000)
    yield page
    context.close()


def _notes(n: int) -> list[dict[str, Any]]:
    return [
        {
            "text": f"note number {i:03d} about the {'garden' if i % 3 == 0 else 'office'}",
            "id": f"n{i:03d}",
            "tags": ["garden"] if i % 3 == 0 else ["office"],
            "metadata": {"user": "alice" if i % 2 else "bob", "i": i},
            "created_at": T0 + timedelta(hours=i),
        }
        for i in range(n)
    ]


def _row_ids(page: Any) -> list[str]:
    found = page.locator("li.memory").evaluate_all("rows => rows.map(r => r.dataset.id)")
    return [str(x) for x in found]


def test_browse_is_newest_first_and_pages_through_everything(tmp_path: Path, page: Any) -> None:
    seed(tmp_path, _notes(120))
    with ui_server(tmp_path) as server:
        page.goto(server.url + "/")
        assert page.locator("[data-total]").get_attribute("data-total") == "120"
        assert _row_ids(page) == [f"n{i:03d}" for i in range(119, 69, -1)]
        page.click("a[rel=next]")
        assert _row_ids(page) == [f"n{i:03d}" for i in range(69, 19, -1)]
        page.click("a[rel=next]")
        assert _row_ids(page) == [f"n{i:03d}" for i in range(19, -1, -1)]
        assert page.locator("a[rel=next]").count() == 0
        # Filters: tags, a metadata field, a time preset and a phrase.
        page.goto(server.url + "/?tags=garden&field=user&value=alice")
        ids = _row_ids(page)
        assert ids and all(int(i[1:]) % 3 == 0 and int(i[1:]) % 2 == 1 for i in ids)
        assert page.locator("[data-total]").get_attribute("data-total") == str(len(ids))
        page.goto(server.url + "/?when=24h")
        assert page.locator("[data-total]").get_attribute("data-total") == "0"
        page.goto(server.url + "/?when=in+March+2025")
        assert page.locator("[data-total]").get_attribute("data-total") == "120"
        page.goto(server.url + "/?when=gibberish+time")
        assert "not a time hybrid-memory reads" in page.locator(".error").inner_text()
        # Stats: the count, the charts, each tag's count.
        page.goto(server.url + "/stats")
        assert page.locator("[data-count]").get_attribute("data-count") == "120"
        assert page.locator("svg.chart").count() == 3  # per bucket, over time, tags
        titles = page.locator("svg.chart rect title").evaluate_all(
            "titles => titles.map(t => t.textContent)"
        )
        assert "garden: 40" in titles and "office: 80" in titles


def test_search_shows_why_and_one_leg_alone(tmp_path: Path, page: Any) -> None:
    seed(
        tmp_path,
        [
            {"text": "Alice prefers dark mode in her editor", "id": "dark", "tags": ["ui"]},
            {"text": "Bob likes a light theme", "id": "light", "tags": ["ui"]},
            {"text": "The garden needs water on Mondays", "id": "garden", "tags": ["home"]},
            {"text": "Dark chocolate is in the cupboard", "id": "choc", "tags": ["food"]},
        ],
    )
    with ui_server(tmp_path) as server:
        page.goto(server.url + "/")
        page.fill("input[name=q]", "dark mode ui")
        page.press("input[name=q]", "Enter")
        page.wait_for_url("**/?q=dark+mode+ui*")
        hits = page.locator("li.hit")
        assert hits.first.get_attribute("data-id") == "dark"
        first = hits.first
        assert "#1" in first.locator(".leg-keyword").inner_text()
        assert "BM25" in first.locator(".leg-keyword").inner_text()
        assert "cos" in first.locator(".leg-vector").inner_text()
        assert "ui" in first.locator(".leg-tag").inner_text()  # the matched tag
        assert first.locator("mark").first.inner_text().lower() == "dark"
        assert first.locator(".chip.matched").inner_text() == "ui"
        # The keyword leg alone: every hit has a keyword rank, in that order.
        page.click("text=keyword leg alone")
        page.wait_for_url("**leg=keyword*")
        ranks = [
            int(t.split("#")[1].split()[0])
            for t in page.locator(".hit .leg-keyword").all_inner_texts()
        ]
        assert ranks == sorted(ranks) and ranks[0] == 1
        assert page.locator(".hit").count() == len(ranks)  # no hit without a keyword rank
        page.click("text=vector leg alone")
        page.wait_for_url("**leg=vector*")
        vector = [
            int(t.split("#")[1].split()[0])
            for t in page.locator(".hit .leg-vector").all_inner_texts()
        ]
        assert vector == list(range(1, len(vector) + 1)) and len(vector) == 4
        # Bookmarkable: the address alone gives the same page.
        page.goto(server.url + "/?q=garden+water")
        assert page.locator("li.hit").first.get_attribute("data-id") == "garden"


def test_one_memory_edit_and_delete(tmp_path: Path, page: Any) -> None:
    seed(
        tmp_path,
        [
            {"text": "Carol's flight lands at 9", "id": "flight", "tags": ["travel"]},
            {"text": "Carol's hotel is near the station", "id": "hotel", "tags": ["travel"]},
        ],
    )
    with ui_server(tmp_path) as server:
        page.goto(server.url + "/")
        page.click("li.memory[data-id=flight] a.text")
        page.wait_for_url("**/memory?id=flight*")
        assert "flight" in page.locator("dl.facts").inner_text()
        assert page.locator("ol.related li.hit").first.get_attribute("data-id") == "hotel"
        page.click("details.edit summary")
        page.fill("textarea[name=text]", "Carol's flight lands at 10")
        page.fill("input[name=tags]", "travel, carol")
        page.fill("textarea[name=metadata]", '{"who": "carol", "gate": 12}')
        page.click("button:has-text('Save')")
        page.wait_for_selector("text=Saved.")
        assert page.locator(".fulltext").inner_text() == "Carol's flight lands at 10"
        # A bad edit is refused, with the field named, and changes nothing.
        page.click("details.edit summary")
        page.fill("textarea[name=metadata]", "[1, 2]")
        page.click("button:has-text('Save')")
        assert "metadata: expected a JSON object" in page.locator(".error").inner_text()
        page.click("text=Delete this memory…")
        page.wait_for_url("**/memory/delete?id=flight*")
        assert len(stored_via(server)) == 2  # asked, not done yet
        page.click("text=Yes, delete it")
        page.wait_for_selector("text=Deleted 1 memory.")
    after = stored(tmp_path)
    assert set(after) == {"hotel"}


def test_edit_reaches_the_store(tmp_path: Path, page: Any) -> None:
    seed(tmp_path, [{"text": "the old text", "id": "m1", "tags": ["a"]}])
    with ui_server(tmp_path) as server:
        page.goto(server.url + "/memory?id=m1")
        page.click("details.edit summary")
        page.fill("textarea[name=text]", "the new text")
        page.fill("input[name=tags]", "b c")
        page.fill("textarea[name=metadata]", '{"k": true}')
        page.click("button:has-text('Save')")
        page.wait_for_selector("text=Saved.")
    memory = stored(tmp_path)["m1"]
    assert (memory.text, memory.tags) == ("the new text", ("b", "c"))
    assert dict(memory.metadata) == {"k": True}


def test_bulk_delete_and_retag_after_a_preview_and_a_confirmation(
    tmp_path: Path, page: Any
) -> None:
    seed(tmp_path, _notes(30))  # 10 garden, 20 office
    with ui_server(tmp_path) as server:
        # A selection, re-tagged.
        page.goto(server.url + "/")
        page.check("li.memory[data-id=n029] input[type=checkbox]")
        page.check("li.memory[data-id=n028] input[type=checkbox]")
        page.select_option("select[name=action]", "retag")
        page.fill("input[name=add_tags]", "starred")
        page.click("button:has-text('Preview')")
        assert page.locator(".count").get_attribute("data-count") == "2"
        page.click("button.danger")
        page.wait_for_selector("text=Re-tagged 2 memories.")
        # Everything matching a filter, deleted: the preview counts, nothing goes before Yes.
        page.goto(server.url + "/?tags=garden")
        page.select_option("select[name=scope]", "matching")
        page.click("button:has-text('Preview')")
        assert page.locator(".count").get_attribute("data-count") == "10"
        assert len(stored_via(server)) == 30
        page.click("button.danger")
        page.wait_for_selector("text=Deleted 10 memories.")
        assert page.locator("[data-total]").get_attribute("data-total") == "0"
    after = stored(tmp_path)
    assert len(after) == 20 and not any("garden" in m.tags for m in after.values())
    assert {i for i, m in after.items() if "starred" in m.tags} == {"n028", "n029"}


def stored_via(server: Any) -> list[str]:
    """The ids the server lists (all pages), read over HTTP."""
    import re
    import urllib.request

    ids: list[str] = []
    number = 1
    while True:
        with urllib.request.urlopen(f"{server.url}/?size=100&page={number}") as response:
            html = response.read().decode()
        found = re.findall(r'<li class="memory" data-id="([^"]+)"', html)
        ids += found
        if 'rel="next"' not in html:
            return ids
        number += 1


def test_another_process_write_appears_without_a_reload(tmp_path: Path, page: Any) -> None:
    seed(tmp_path, _notes(3))
    with ui_server(tmp_path) as server:
        page.goto(server.url + "/")
        assert page.locator("li.memory").count() == 3
        page.evaluate("window.__not_reloaded = true")
        writer = (
            "import sys; sys.path.insert(0, sys.argv[2]); from tests.conftest import HashEmbedding;"
            "from hybrid_memory import HybridMemory;"
            "m = HybridMemory(path=sys.argv[1], embedding=HashEmbedding(), "
            "embedding_name='test-hash-64');"
            "m.add('written by another process', id='live', tags=['live']); m.close()"
        )
        subprocess.run(
            [sys.executable, "-c", writer, str(tmp_path), str(REPO)],
            check=True,
            env=child_env(),
            timeout=120,
        )
        page.wait_for_selector("li.memory[data-id=live]", timeout=30_000)
        assert page.evaluate("window.__not_reloaded") is True
        assert page.locator("[data-total]").get_attribute("data-total") == "4"


def test_the_page_beside_a_process_that_holds_the_store(tmp_path: Path) -> None:
    """The page started second, while this process keeps the store open (as an MCP server
    or an agent would): it lists, edits and sees this process's writes."""
    import httpx
    from _ui_support import open_store

    holder = open_store(tmp_path)
    try:
        holder.add_many(_notes(5))
        with (
            ui_server(tmp_path) as server,
            httpx.Client(base_url=server.url, timeout=30) as client,
        ):
            listed = client.get("/").text
            assert all(f'data-id="n{i:03d}"' in listed for i in range(5))
            edited = client.post(
                "/memory/edit",
                data={"id": "n001", "text": "edited on the page", "tags": "x", "metadata": "{}"},
                headers={"Origin": server.url},
            )
            assert edited.status_code == 303
            holder.sync()
            assert holder.get("n001").text == "edited on the page"
            # The export needs the namespaces, which a process beside the path's owner can
            # list only once the owner serves them: a download, or a page saying why
            # (never a download broken half-way).
            export = client.get("/export")
            if export.status_code == 200:
                assert export.text.count('"id"') >= 5 and '"n001"' in export.text
            else:
                assert export.status_code == 409 and "export:" in export.text
            holder.add("written by the holder", id="held")
            deadline = time.monotonic() + 20
            while 'data-id="held"' not in client.get("/").text:
                assert time.monotonic() < deadline, "the holder's write never showed"
                time.sleep(0.5)
    finally:
        holder.close()


def test_a_store_on_a_chroma_server(tmp_path: Path, page: Any) -> None:
    """``--url``: the page over a store kept by a Chroma server, written by another client."""
    from hybrid_memory import HybridMemory
    from tests.conftest import HashEmbedding

    with chroma_server(tmp_path) as url:
        writer = HybridMemory(url=url, embedding=HashEmbedding(), embedding_name="test-hash-64")
        try:
            writer.add_many(_notes(6))
            with ui_server(None, "--url", url) as server:
                page.goto(server.url + "/")
                assert page.locator("[data-total]").get_attribute("data-total") == "6"
                page.goto(server.url + "/?q=garden")
                assert page.locator("li.hit").first.get_attribute("data-id") in {"n000", "n003"}
                writer.add("written beside the page", id="beside")
                page.goto(server.url + "/")
                page.wait_for_selector("li.memory[data-id=beside]", timeout=30_000)
        finally:
            writer.close()
