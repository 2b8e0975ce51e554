"""Near-duplicates on the page, in a real browser (Debian's chromium) against the real
server: a memory's page lists the memories that say nearly the same thing, and the
group can be merged (one kept, the others superseded by it or deleted) after a preview
that names every change, nothing changed before the confirmation.

``HYBRID_MEMORY_UI_SHOTS=docs/images`` also writes the merge preview's screenshot
(``ui-merge.png``) there."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from _ui_support import CHROMIUM, NO_CHROMIUM, chromium_browser, seed, stored, ui_server

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=NO_CHROMIUM)

T0 = datetime(2026, 10, 1, 9, 0, tzinfo=timezone.utc)
PEANUTS = [
    ("p1", "Alice is allergic to peanuts"),
    ("p2", "Alice is allergic to peanuts (confirmed again)"),
    ("p3", "2026-10-13: Alice is allergic to peanuts"),
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from chromium_browser()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1100, "height": 820})
    page = context.new_page()
    page.set_default_timeout(30_000)
    yield page
    context.close()


def _seed(path: Path) -> None:
    items = [
        {
            "text": text,
            "id": memory_id,
            "tags": ["alice", "health"],
            "created_at": T0 + timedelta(days=n),
        }
        for n, (memory_id, text) in enumerate(PEANUTS)
    ]
    items.append({"text": "Bob plays chess on Tuesdays", "id": "chess", "created_at": T0})
    items.append({"text": "Alice drinks oat milk lattes", "id": "latte", "created_at": T0})
    seed(path, items)


def _ids(page: Any, selector: str) -> list[str]:
    found = page.locator(selector).evaluate_all("rows => rows.map(r => r.dataset.id)")
    return [str(x) for x in found]


def test_a_memory_lists_its_repeats_and_merges_them_superseded(tmp_path: Path, page: Any) -> None:
    _seed(tmp_path)
    with ui_server(tmp_path) as server:
        page.goto(server.url + "/memory?id=p1")
        page.wait_for_selector("ol.similar li.hit")
        assert _ids(page, "ol.similar li.hit") == ["p3", "p2", "p1"]  # newest first
        assert page.locator("ol.similar li.this").get_attribute("data-id") == "p1"
        page.click("a.merge-link")
        page.wait_for_url("**/memory/merge?id=p1*")
        assert page.locator("input[name=keep]:checked").get_attribute("value") == "p3"
        page.check("input[name=keep][value=p2]")
        page.click("button:has-text('Preview')")
        preview = page.locator(".preview")
        preview.wait_for()
        assert "Keep Alice is allergic to peanuts (confirmed again)" in preview.inner_text()
        assert _ids(page, ".preview ul.changes li") == ["p3", "p1"]  # p2 -> p3 -> p1
        shot = Path(os.environ.get("HYBRID_MEMORY_UI_SHOTS") or tmp_path) / "ui-merge.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000
        assert all(m.supersedes is None for m in stored(tmp_path).values())  # not yet
        page.click("button:has-text('Merge 3 memories')")
        page.wait_for_selector("text=Merged 2 other memories into this one.")
        assert page.url.split("?")[0].endswith("/memory") and "id=p2" in page.url
    after = stored(tmp_path)
    assert len(after) == 5  # superseded, not deleted
    assert (after["p2"].supersedes, after["p3"].supersedes, after["p1"].supersedes) == (
        "p3",
        "p1",
        None,
    )


def test_a_merge_that_deletes_deletes_only_the_chosen(tmp_path: Path, page: Any) -> None:
    _seed(tmp_path)
    with ui_server(tmp_path) as server:
        page.goto(server.url + "/memory/merge?id=p2")
        page.uncheck("input[name=member][value=p1]")  # p1 stays out of the merge
        page.check("input[name=action][value=delete]")
        page.click("button:has-text('Preview')")
        page.locator(".preview").wait_for()
        assert _ids(page, ".preview ul.changes li") == ["p2"]  # p3 is kept: the newest
        assert "cannot be undone" in page.locator(".preview").inner_text()
        assert set(stored(tmp_path)) == {"p1", "p2", "p3", "chess", "latte"}
        page.click("button:has-text('Merge 2 memories')")
        page.wait_for_selector("text=Merged 1 other memory into this one.")
        page.wait_for_selector("ol.similar li.hit")
        assert _ids(page, "ol.similar li.hit") == ["p3", "p1"]
    assert set(stored(tmp_path)) == {"p1", "p3", "chess", "latte"}


def test_a_memory_said_once_has_nothing_to_merge(tmp_path: Path, page: Any) -> None:
    _seed(tmp_path)
    with ui_server(tmp_path, "--read-only") as server:
        page.goto(server.url + "/memory?id=chess")
        page.wait_for_selector("#similar .empty")
        assert "No other memory says nearly the same thing" in page.inner_text("#similar")
        page.goto(server.url + "/memory?id=p1")
        page.wait_for_selector("ol.similar li.hit")
        assert page.locator("a.merge-link").count() == 0  # read-only: no merge offered
