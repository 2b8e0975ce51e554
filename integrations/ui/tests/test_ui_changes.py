"""No slip of a hand destroys memory, in the browser: a filter the page cannot read
offers no change (and a forged form naming it changes nothing), every change is
previewed with the memories it touches, a change confirmed after the store moved on is
refused, "all on this page" and the search results' own bulk form, and the tags page
(each tag's count; rename, merge, remove, each previewed)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest
from _ui_support import CHROMIUM, NO_CHROMIUM, chromium_browser, open_store, seed, stored, ui_server

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=NO_CHROMIUM)

NOW = datetime.now(timezone.utc).replace(microsecond=0)


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
            "text": f"note {i:02d} about the {'garden' if i % 3 == 0 else 'office'}",
            "id": f"n{i:02d}",
            "tags": ["garden"] if i % 3 == 0 else ["office"],
            "metadata": {"user": "bob" if i % 2 else "alice"},
            "created_at": NOW - timedelta(hours=i),
        }
        for i in range(n)
    ]


def _ids(page: Any, selector: str) -> list[str]:
    found = page.locator(selector).evaluate_all("rows => rows.map(r => r.dataset.id)")
    return [str(x) for x in found]


def test_an_unreadable_filter_offers_no_change_and_a_forged_one_changes_nothing(
    tmp_path: Path, page: Any
) -> None:
    seed(tmp_path, _notes(12))
    with ui_server(tmp_path) as server:
        page.goto(server.url + "/?tags=bob&when=last+fortnight")
        assert "not a time hybrid-memory reads" in page.locator(".error").inner_text()
        assert page.locator("#bulk-form").count() == 0  # nothing offered
        assert page.locator("li.memory").count() == 0
        # What the person typed is still there, to correct.
        assert page.locator("input[name=when]").input_value() == "last fortnight"
        assert page.locator("input[name=tags]").input_value() == "bob"
        with httpx.Client(base_url=server.url, timeout=30) as client:
            origin = {"Origin": server.url}
            forged = [
                # The unreadable filter itself, as a form would carry it.
                {"tags": "bob", "when": "last fortnight", "shown": "12"},
                # No filter at all, and a count the page never showed.
                {"shown": "0"},
                # No count: a change of everything matching needs the one the page showed.
                {},
                {"ns": "no-such-namespace", "shown": "12"},
            ]
            for fields in forged:
                for step in ("preview", "apply"):
                    data = {"action": "delete", "scope": "matching", "step": step, **fields}
                    answer = client.post("/bulk", data=data, headers=origin)
                    assert answer.status_code == 400, (fields, step)
                    assert 'name="digest"' not in answer.text
    assert len(stored(tmp_path)) == 12


def test_every_bulk_preview_lists_what_it_touches(tmp_path: Path, page: Any) -> None:
    seed(tmp_path, _notes(30))  # 10 garden, 20 office
    with ui_server(tmp_path) as server:
        page.goto(server.url + "/")
        for memory_id in ("n01", "n02", "n04"):
            page.check(f"li.memory[data-id={memory_id}] input[type=checkbox]")
        page.click("button:has-text('Preview')")
        assert page.locator(".count").get_attribute("data-count") == "3"
        assert sorted(_ids(page, "ol.preview li.memory")) == ["n01", "n02", "n04"]
        assert "note 02 about the office" in page.locator("ol.preview").inner_text()
        page.click("text=Cancel")
        page.goto(server.url + "/?tags=office")
        page.select_option("select[name=scope]", "matching")
        page.click("button:has-text('Preview')")
        assert page.locator(".count").get_attribute("data-count") == "20"
        assert len(_ids(page, "ol.preview li.memory")) == 10  # the first ten of them
        assert "and 10 more" in page.locator(".more").inner_text()
        assert len(stored(tmp_path)) == 30  # previewed, not done
        page.click("button.danger")
        page.wait_for_selector("text=Deleted 20 memories.")
    assert len(stored(tmp_path)) == 10


def test_a_change_confirmed_after_the_store_moved_on_is_refused(tmp_path: Path, page: Any) -> None:
    seed(tmp_path, _notes(6))
    with ui_server(tmp_path) as server:
        page.goto(server.url + "/?tags=office")
        page.select_option("select[name=scope]", "matching")
        page.select_option("select[name=action]", "retag")
        page.fill("input[name=add_tags]", "checked")
        page.click("button:has-text('Preview')")
        assert page.locator(".count").get_attribute("data-count") == "4"
        # Meanwhile another process takes one memory out of the filter.
        writer = open_store(tmp_path)
        try:
            writer.update("n01", tags=["garden"])
        finally:
            writer.close()
        page.click("button.danger")
        assert "no longer those the preview showed" in page.locator(".error").inner_text()
        assert page.locator(".count").get_attribute("data-count") == "3"  # the new preview
        assert not any("checked" in m.tags for m in stored(tmp_path).values())
        page.click("button.danger")
        page.wait_for_selector("text=Re-tagged 3 memories.")
    assert {i for i, m in stored(tmp_path).items() if "checked" in m.tags} == {"n02", "n04", "n05"}


def test_all_on_a_page_and_the_search_results_bulk_form(tmp_path: Path, page: Any) -> None:
    seed(tmp_path, _notes(25))
    with ui_server(tmp_path) as server:
        page.goto(server.url + "/?size=20")
        page.check("input[data-select-all]")
        assert page.locator("li.memory input[name=ids]:checked").count() == 20
        page.select_option("select[name=action]", "retag")
        page.fill("input[name=add_tags]", "reviewed")
        page.click("button:has-text('Preview')")
        assert page.locator(".count").get_attribute("data-count") == "20"
        page.click("button.danger")
        page.wait_for_selector("text=Re-tagged 20 memories.")
        assert "size=20" in page.url  # back where the change was asked for
        # A search's hits: select, preview, delete.
        page.goto(server.url + "/?q=garden&k=10")
        hits = _ids(page, "li.hit")
        assert hits and page.locator("#bulk-form").count() == 1
        page.check("input[data-select-all]")
        page.click("button:has-text('Preview')")
        assert page.locator(".count").get_attribute("data-count") == str(len(hits))
        assert sorted(_ids(page, "ol.preview li.memory")) == sorted(hits)[:10]
        page.click("button.danger")
        page.wait_for_selector(f"text=Deleted {len(hits)} memories.")
        assert "q=garden" in page.url
    after = stored(tmp_path)
    assert not set(hits) & set(after)
    reviewed = {i for i, m in after.items() if "reviewed" in m.tags}
    assert reviewed == {f"n{i:02d}" for i in range(20)} - set(hits)


def test_the_tags_page_counts_renames_merges_and_removes(tmp_path: Path, page: Any) -> None:
    seed(
        tmp_path,
        [
            {"text": "one", "id": "m1", "tags": ["todo", "work"]},
            {"text": "two", "id": "m2", "tags": ["to-do"]},
            {"text": "three", "id": "m3", "tags": ["todo"]},
            {"text": "four", "id": "m4", "tags": ["misc", "work"]},
        ],
    )
    with ui_server(tmp_path) as server:
        page.goto(server.url + "/tags")
        counts = page.locator("tr[data-tag]").evaluate_all(
            "rows => rows.map(r => [r.dataset.tag, r.querySelector('[data-count]').dataset.count])"
        )
        assert dict(counts) == {"todo": "2", "work": "2", "to-do": "1", "misc": "1"}
        # Merge to-do into todo: a preview naming the one memory it changes.
        page.check("tr[data-tag=to-do] input")
        page.check("tr[data-tag=todo] input")
        page.select_option("select[name=action]", "merge")
        page.fill("input[name=into]", "todo")
        page.click("button:has-text('Preview')")
        assert page.locator(".count").get_attribute("data-count") == "1"
        assert _ids(page, "ol.preview li.memory") == ["m2"]
        page.click("button.danger")
        page.wait_for_selector("text=Re-tagged 1 memory.")
        assert "/tags" in page.url
        # Rename work to job.
        page.check("tr[data-tag=work] input")
        page.select_option("select[name=action]", "rename")
        page.fill("input[name=into]", "job")
        page.click("button:has-text('Preview')")
        assert sorted(_ids(page, "ol.preview li.memory")) == ["m1", "m4"]
        page.click("button.danger")
        page.wait_for_selector("text=Re-tagged 2 memories.")
        # Remove misc: the memory stays, without it.
        page.check("tr[data-tag=misc] input")
        page.select_option("select[name=action]", "remove")
        page.click("button:has-text('Preview')")
        assert page.locator(".count").get_attribute("data-count") == "1"
        page.click("button.danger")
        page.wait_for_selector("text=Re-tagged 1 memory.")
        tags = page.locator("tr[data-tag]").evaluate_all("rows => rows.map(r => r.dataset.tag)")
        assert sorted(tags) == ["job", "todo"]
        # A rename of two tags at once is refused, with nothing offered.
        page.check("tr[data-tag=job] input")
        page.check("tr[data-tag=todo] input")
        page.select_option("select[name=action]", "rename")
        page.fill("input[name=into]", "x")
        page.click("button:has-text('Preview')")
        assert "rename one tag at a time" in page.locator(".error").inner_text()
        assert page.locator("button.danger").count() == 0
    after = {i: m.tags for i, m in stored(tmp_path).items()}
    assert after == {"m1": ("todo", "job"), "m2": ("todo",), "m3": ("todo",), "m4": ("job",)}


def test_an_import_that_replaces_names_what_it_replaces(tmp_path: Path, page: Any) -> None:
    seed(tmp_path, [{"text": "the stored text", "id": "same"}, {"text": "kept", "id": "k"}])
    upload = tmp_path.parent / f"{tmp_path.name}-import.jsonl"
    upload.write_text(
        '{"id": "same", "text": "the file text", "tags": [], "metadata": {}}\n'
        '{"id": "new", "text": "a new one", "tags": [], "metadata": {}}\n'
    )
    with ui_server(tmp_path) as server:
        page.goto(server.url + "/transfer")
        page.set_input_files("input[name=file]", str(upload))
        page.click("button:has-text('Preview')")
        preview = page.locator(".import-preview")
        assert preview.locator(".count").get_attribute("data-count") == "1"
        assert preview.locator("[data-added]").get_attribute("data-added") == "1"
        assert _ids(page, ".import-preview li.memory") == ["same"]
        assert "the stored text" in preview.inner_text() and "the file text" in preview.inner_text()
        assert stored(tmp_path)["same"].text == "the stored text"  # nothing written yet
        page.click("button:has-text('Yes, import 2')")
        assert page.locator("p.done[data-added]").get_attribute("data-added") == "1"
    after = stored(tmp_path)
    assert after["same"].text == "the file text" and after["new"].text == "a new one"
