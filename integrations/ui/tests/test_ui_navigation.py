"""Finding one's way on the page, in the browser: nested namespaces, paging past the end,
a memory's page without an id, the stats page's tag links and month labels, the export
page's count, time words in the search box, the way back from a memory's page and its
related list's cut-off, adding a memory; and that no page a GET draws creates a store, a
namespace or a file."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

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
    context = browser.new_context(accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(20_000)
    yield page
    context.close()


def _ids(page: Any, selector: str = "li.memory") -> list[str]:
    found = page.locator(selector).evaluate_all("rows => rows.map(r => r.dataset.id)")
    return [str(x) for x in found]


def _nested(path: Path) -> None:
    store = open_store(path)
    try:
        store.add("a note of the store", id="s1", tags=["store"])
        team = store.namespace("team")
        team.add("a note of the team", id="t1")
        team.namespace("alice").add("alice keeps her notes here", id="a1", tags=["alice"])
    finally:
        store.close()


def test_nested_namespaces_are_reached_from_the_page(tmp_path: Path, page: Any) -> None:
    _nested(tmp_path)
    with ui_server(tmp_path) as server:
        page.goto(server.url + "/stats?ns=team")
        assert "No namespaces" not in page.locator("main").inner_text()
        page.click("ul.namespace-links a:has-text('alice')")
        assert _ids(page) == ["a1"]
        assert page.locator(".chip.ns").inner_text() == "namespace: team / alice"
        # The namespace menu offers the nested one, and the page keeps to it.
        labels = page.locator("select[name=ns] option").all_inner_texts()
        assert "team / alice" in labels
        assert page.locator("select[name=ns] option:checked").inner_text() == "team / alice"
        page.click("li.memory[data-id=a1] a.text")
        assert "alice keeps her notes here" in page.locator(".fulltext").inner_text()
        page.goto(server.url + "/?ns=" + quote(json.dumps(["team", "bob"])))
        assert "no namespace 'bob' under team" in page.locator(".error").inner_text()


def test_past_the_last_page_and_a_memory_without_an_id(tmp_path: Path, page: Any) -> None:
    seed(tmp_path, [{"text": f"note {i}", "id": f"n{i:02d}"} for i in range(60)])
    with ui_server(tmp_path) as server:
        page.goto(server.url + "/?page=999")
        assert "Page 2 of 2" in page.locator(".summary").inner_text()
        assert len(_ids(page)) == 10
        answer = page.goto(server.url + "/memory")
        assert answer is not None and answer.status == 404
        text = page.locator("main").inner_text()
        assert "no memory chosen" in text and "ids[0]" not in text


def test_stats_tags_are_links_and_month_labels_do_not_touch(tmp_path: Path, page: Any) -> None:
    seed(
        tmp_path,
        [
            {
                "text": f"note {i}",
                "tags": ["garden" if i % 2 else "office"],
                "created_at": NOW - timedelta(days=30 * i),
            }
            for i in range(16)
        ],
    )
    with ui_server(tmp_path) as server:
        page.goto(server.url + "/stats")
        boxes = (
            page.locator("svg.chart")
            .first.locator("text[text-anchor=middle]")
            .evaluate_all(
                "labels => labels.map(l => { const b = l.getBBox(); return [b.x, b.x + b.width]; })"
            )
        )
        assert len(boxes) >= 4
        assert all(left[1] < right[0] for left, right in itertools.pairwise(boxes))
        page.click("ul.tag-links a:has-text('garden')")
        assert "tags=garden" in page.url
        assert page.locator("[data-total]").get_attribute("data-total") == "8"
        page.goto(server.url + "/stats")
        page.click("svg.chart a.row-link >> nth=0")  # a bar of the tag chart is a link too
        assert "tags=" in page.url


def test_the_export_page_counts_what_the_export_writes(tmp_path: Path, page: Any) -> None:
    _nested(tmp_path)
    with ui_server(tmp_path) as server:
        page.goto(server.url + "/transfer")
        said = int(page.locator(".exported").get_attribute("data-total") or "-1")
        counted = page.locator(".exported").inner_text()
        assert "1 in the store itself, 2 in its namespaces" in counted
        with page.expect_download() as waiting:
            page.click("button:has-text('Download')")
        lines = Path(waiting.value.path()).read_text().splitlines()
        assert said == len(lines) - 1 == 3  # the header, then one line per memory


def test_time_words_in_the_search_box_are_read_and_can_be_removed(
    tmp_path: Path, page: Any
) -> None:
    seed(
        tmp_path,
        [
            {
                "text": "the deploy of this week",
                "id": "recent",
                "created_at": NOW - timedelta(days=1),
            },
            {
                "text": "the deploy of long ago",
                "id": "old",
                "created_at": NOW - timedelta(days=400),
            },
        ],
    )
    with ui_server(tmp_path) as server:
        page.goto(server.url + "/?q=deploy+in+the+last+7+days")
        read = page.locator(".time-read")
        assert "Time read from the query" in read.inner_text()
        assert read.get_attribute("data-applied") == "filter"
        assert _ids(page, "li.hit") == ["recent"]
        page.click("a.remove-time")
        assert "time=off" in page.url
        assert sorted(_ids(page, "li.hit")) == ["old", "recent"]
        page.click("text=Read them")
        assert _ids(page, "li.hit") == ["recent"]


def test_a_memory_page_leads_back_and_cuts_its_related_list(tmp_path: Path, page: Any) -> None:
    seed(
        tmp_path,
        [
            {"text": "Carol's flight lands at 9", "id": "flight", "tags": ["travel"]},
            {"text": "Carol's flight lands at 9 in Lisbon", "id": "near", "tags": ["travel"]},
            *({"text": f"unrelated filler {i} zq{i}", "id": f"f{i}"} for i in range(12)),
        ],
    )
    with ui_server(tmp_path) as server:
        page.goto(server.url + "/?q=carol+flight")
        search = page.url
        page.click("li.hit[data-id=flight] a.text")
        scores = [float(s) for s in page.locator("ol.related .relevance").all_inner_texts()]
        assert "near" in _ids(page, "ol.related li.hit")
        assert all(score >= 0.3 for score in scores) and len(scores) < 12
        page.click("a[rel=back]")
        assert page.url == search
        # Back from the list too, after an edit.
        page.goto(server.url + "/?tags=travel")
        listing = page.url
        page.click("li.memory[data-id=near] a.text")
        page.click("details.edit summary")
        page.fill("input[name=tags]", "travel, lisbon")
        page.click("button:has-text('Save')")
        page.wait_for_selector("text=Saved.")
        page.click("a[rel=back]")
        assert page.url == listing


def test_a_memory_is_added_from_the_page(tmp_path: Path, page: Any) -> None:
    _nested(tmp_path)
    with ui_server(tmp_path) as server:
        page.goto(server.url + "/?ns=team")
        page.click("details.add summary")
        page.fill("details.add textarea[name=text]", "Standup moved to 9:45")
        page.fill("details.add input[name=tags]", "meetings, team")
        page.fill("details.add textarea[name=metadata]", "[not json")
        page.click("details.add button:has-text('Add')")
        assert "metadata: expected a JSON object" in page.locator(".error").inner_text()
        assert page.locator("textarea[name=text]").input_value() == "Standup moved to 9:45"
        page.fill("textarea[name=metadata]", '{"room": "4B"}')
        page.click("button:has-text('Add')")
        page.wait_for_selector("text=Added.")
        assert page.locator(".fulltext").inner_text() == "Standup moved to 9:45"
        page.click("a[rel=back]")
        assert "Standup moved to 9:45" in page.locator("ol.memories").inner_text()
    store = open_store(tmp_path)
    try:
        added = [m for m in store.namespace("team").list_memories() if m.id != "t1"]
        assert [(m.text, m.tags, dict(m.metadata)) for m in added] == [
            ("Standup moved to 9:45", ("meetings", "team"), {"room": "4B"})
        ]
        assert store.count() == 1  # the store itself got nothing
    finally:
        store.close()


def _disk(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def test_no_page_a_get_draws_creates_anything(tmp_path: Path) -> None:
    _nested(tmp_path / "s")
    pages = ["/", "/?q=note", "/stats", "/tags", "/transfer", "/export", "/memory?id=s1"]
    missing = ["nope", json.dumps(["team", "nope"]), json.dumps(["nope", "deeper"])]
    with (
        ui_server(tmp_path / "s") as server,
        httpx.Client(base_url=server.url, timeout=60) as client,
    ):
        for address in pages:
            assert client.get(address).status_code == 200, address
        before = _disk(tmp_path)
        for ns in missing:
            for address in pages:
                joiner = "&" if "?" in address else "?"
                answer = client.get(f"{address}{joiner}ns={quote(ns)}")
                assert answer.status_code in (400, 404), (address, ns)
        assert _disk(tmp_path) == before
    store = open_store(tmp_path / "s")
    try:
        assert store.namespaces() == ["team"]
        assert store.namespace("team").namespaces() == ["alice"]
    finally:
        store.close()
    assert set(stored(tmp_path / "s")) == {"s1"}


def test_the_page_starts_on_no_missing_namespace_nor_read_only_missing_store(
    tmp_path: Path,
) -> None:
    """``--namespace`` names one that exists; ``--read-only`` a store that exists: else
    the command says which is missing (exit 1) and makes nothing."""
    import subprocess

    from _ui_support import EMBEDDING, REPO, child_env, ui_command

    _nested(tmp_path / "s")
    before = _disk(tmp_path)
    for args in (
        ["--path", str(tmp_path / "typo"), "--read-only"],
        ["--path", str(tmp_path / "s"), "--namespace", "nope"],
    ):
        done = subprocess.run(
            [*ui_command(), *args, "--port", "0", *EMBEDDING],
            capture_output=True,
            text=True,
            env=child_env(),
            cwd=str(REPO),
            timeout=180,
        )
        assert done.returncode == 1, done.stderr
        assert "nothing was created" in done.stderr and "Traceback" not in done.stderr
    assert _disk(tmp_path) == before
