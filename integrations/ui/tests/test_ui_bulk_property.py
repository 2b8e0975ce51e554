"""A bulk change never reaches beyond what the page showed, whatever the filter and the
form: over random browse filters (readable or not, namespaces that exist or not) and
random bulk forms (a selection or everything matching, delete or re-tag, the count the
page showed kept or lowered), the preview's count is what the page listed, the change
changes exactly what the preview counted, and a filter the page could not read changes
nothing. The page's own application runs in this process, on a real store."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from html import unescape
from typing import Any

import pytest
from _ui_support import open_store
from hybrid_memory_ui import UIConfig, create_app
from hybrid_memory_ui.bulk import retagged
from hybrid_memory_ui.filters import split_tags
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from hybrid_memory import HybridMemory, Memory

NOW = datetime.now(timezone.utc).replace(microsecond=0)
BASE = "http://127.0.0.1:8777"
TAGS = ["red", "green", "blue"]


def _memories() -> list[dict[str, Any]]:
    return [
        {
            "text": f"memory {i} of the property test",
            "id": f"p{i:02d}",
            "tags": [t for n, t in enumerate(TAGS) if (i >> n) & 1],
            "metadata": {"user": "alice" if i % 3 else "bob", "n": i % 4},
            "created_at": NOW - timedelta(days=i * 5),
        }
        for i in range(24)
    ]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HybridMemory]:
    memory = open_store(tmp_path_factory.mktemp("property"))
    memory.add_many(_memories())
    memory.namespace("team").add_many(_memories()[:6])
    yield memory
    memory.close()


@pytest.fixture(scope="module")
def client(store: HybridMemory) -> Iterator[TestClient]:
    with TestClient(create_app(store, UIConfig()), base_url=BASE) as client:
        yield client


def snapshot(view: HybridMemory) -> dict[str, Memory]:
    return {m.id: m for m in view.list_memories()}


def restore(view: HybridMemory, before: dict[str, Memory]) -> None:
    now = snapshot(view)
    gone = [m for i, m in before.items() if i not in now]
    if gone:
        view.add_many(
            [
                {
                    "id": m.id,
                    "text": m.text,
                    "tags": list(m.tags),
                    "metadata": dict(m.metadata),
                    "created_at": m.created_at,
                }
                for m in gone
            ],
            upsert=True,
        )
    for i, m in before.items():
        if i in now and now[i].tags != m.tags:
            view.update(i, tags=list(m.tags))


def form_of(html: str) -> dict[str, str] | None:
    """The hidden fields of the page's bulk form (None: the page offers none)."""
    found = re.search(r'<form id="bulk-form".*?</form>', html, re.S)
    if found is None:
        return None
    fields = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', found.group(0))
    return {name: unescape(value) for name, value in fields}


filters = st.fixed_dictionaries(
    {},
    optional={
        "tags": st.sampled_from(["red", "green", "red, blue", "red green", "purple", ",,"]),
        "tag_mode": st.sampled_from(["any", "all", "some", ""]),
        "when": st.sampled_from(["24h", "30d", "365d", "in the last 40 days", "sometime", ""]),
        "field": st.sampled_from(["user", "n", "tags", ""]),
        "value": st.sampled_from(["alice", "bob", "2", '"2"', ""]),
        "ns": st.sampled_from(["", "team", "nope", '["team"]', '["team", "x"]', "[bad"]),
    },
)
forms = st.fixed_dictionaries(
    {
        "scope": st.sampled_from(["selected", "matching"]),
        "action": st.sampled_from(["delete", "retag"]),
        "add": st.sampled_from(["", "green", "new"]),
        "remove": st.sampled_from(["", "red"]),
        "pick": st.lists(st.integers(0, 60), max_size=6),
        "lower_shown": st.booleans(),
    }
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(params=filters, choice=forms)
def test_a_bulk_change_is_what_its_preview_counted_and_the_page_listed(
    client: TestClient, store: HybridMemory, params: dict[str, str], choice: dict[str, Any]
) -> None:
    origin = {"Origin": BASE}
    shown = client.get("/", params={**params, "size": "100"})
    listed = re.findall(r'<li class="memory" data-id="([^"]+)"', shown.text)
    form = form_of(shown.text)
    if shown.status_code != 200:
        # A filter the page could not read: nothing listed, nothing offered, and the same
        # filter posted anyway (a forged or stale form) changes nothing.
        assert form is None and listed == []
        forged = {**params, "scope": "matching", "action": "delete", "shown": "100"}
        before = snapshot(store)
        for step in ("preview", "apply"):
            answer = client.post("/bulk", data={**forged, "step": step}, headers=origin)
            assert answer.status_code in (400, 404), answer.text
        assert snapshot(store) == before
        return
    total = int(re.search(r'data-total="(\d+)"', shown.text).group(1))  # type: ignore[union-attr]
    assert len(listed) == total
    if form is None:  # an empty list offers nothing
        assert total == 0
        return
    namespace = form.get("ns", "")
    view = store.namespace("team") if namespace in ("team", '["team"]') else store
    before = snapshot(view)
    if choice["scope"] == "selected":
        picked = sorted({listed[i % len(listed)] for i in choice["pick"]})
    else:
        picked = listed
    add, remove = split_tags(choice["add"]), split_tags(choice["remove"])
    if choice["action"] == "retag" and not (add or remove):
        add = ("new",)
    data: dict[str, Any] = {
        **form,
        "scope": choice["scope"],
        "action": choice["action"],
        "add_tags": " ".join(add),
        "remove_tags": " ".join(remove),
        "ids": picked,
    }
    lowered = choice["lower_shown"] and choice["scope"] == "matching" and total > 0
    if lowered:  # the page showed fewer than match now: refused
        data["shown"] = str(total - 1)
    preview = client.post("/bulk", data=data, headers=origin)
    if (choice["scope"] == "selected" and not picked) or lowered:
        assert preview.status_code == 400 and 'name="digest"' not in preview.text
        assert snapshot(view) == before
        return
    assert preview.status_code == 200, preview.text
    count = int(re.search(r'class="count" data-count="(\d+)"', preview.text).group(1))  # type: ignore[union-attr]
    if choice["action"] == "delete":
        expected = set(picked)
    else:
        expected = {i for i in picked if retagged(before[i].tags, add, remove) != before[i].tags}
    assert count == len(expected)
    previewed = re.findall(r'<li class="memory" data-id="([^"]+)"', preview.text)
    assert set(previewed) <= expected and len(previewed) == min(count, 10)
    assert snapshot(view) == before  # a preview changes nothing
    digest = re.search(r'name="digest" value="([^"]+)"', preview.text).group(1)  # type: ignore[union-attr]
    applied = client.post(
        "/bulk",
        data={**data, "step": "apply", "digest": digest},
        headers=origin,
        follow_redirects=False,
    )
    assert applied.status_code == 303, applied.text
    after = snapshot(view)
    changed = {i for i in before if i not in after or after[i].tags != before[i].tags}
    assert changed == expected
    assert f"n={len(expected)}" in applied.headers["location"]
    restore(view, before)
    assert snapshot(view).keys() == before.keys()
