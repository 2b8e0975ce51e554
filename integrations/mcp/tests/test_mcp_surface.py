"""The MCP surface to the letter (issue 23, point 3): strict schemas with bounds, unknown
arguments refused, wrong types answered in the library's words, paging, time and tag
bounds, dry-run deletes, resources and prompts, and a readable 401 over HTTP. Driven by
the SDK's real client against a real store and the real default model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx2
import pytest
from _mcp_test_support import call, http_server, open_store
from hybrid_memory_mcp import create_server
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from hybrid_memory import HybridMemory

NOW = datetime.now(timezone.utc)
TOKEN = "surface-token-0123456789"


async def refused(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return result.content[0].text  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HybridMemory]:
    """A store of 25 dated, tagged memories, shared by the read-only tests (the tests
    that write use a store of their own)."""
    memory = open_store(tmp_path_factory.mktemp("surface"))
    memory.add_many(
        [
            {
                "text": f"note {i:02d} about {'coffee' if i % 2 else 'tea'} brewing",
                "id": f"n{i:02d}",
                "tags": ["drink", "coffee" if i % 2 else "tea"] + (["fav"] if i % 5 == 0 else []),
                "created_at": NOW - timedelta(days=25 - i),  # n24 the newest, 1 day old
            }
            for i in range(25)
        ]
    )
    yield memory
    memory.close()


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[HybridMemory]:
    memory = open_store(tmp_path / "memory")
    yield memory
    memory.close()


# --- schemas -------------------------------------------------------------------------


async def test_every_schema_is_closed_bounded_and_described(store: HybridMemory) -> None:
    async with Client(create_server(store)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    for tool in tools.values():
        schema = tool.input_schema
        assert schema["additionalProperties"] is False, tool.name
        # Descriptions read as prose: no docstring indentation left in them.
        assert "\n    " not in (tool.description or ""), tool.name
        assert not (tool.description or "").startswith(" "), tool.name
        for field, spec in schema.get("properties", {}).items():
            numeric = [
                o for o in spec.get("anyOf", [spec]) if o.get("type") in ("integer", "number")
            ]
            for option in numeric:
                assert "minimum" in option, f"{tool.name}.{field} has no minimum"
    k = tools["search_memory"].input_schema["properties"]["k"]["anyOf"][0]
    assert (k["minimum"], k["maximum"]) == (1, store.settings.max_k)
    alpha = tools["search_memory"].input_schema["properties"]["alpha"]["anyOf"][0]
    assert (alpha["minimum"], alpha["maximum"]) == (0, 1)
    limit = tools["list_memories"].input_schema["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"]) == (1, 100)
    assert tools["get_related"].input_schema["properties"]["k"]["anyOf"][0]["maximum"] == 100


async def test_store_memories_takes_a_bounded_list_of_closed_objects(store: HybridMemory) -> None:
    async with Client(create_server(store)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    schema = tools["store_memories"].input_schema
    assert schema["required"] == ["memories"] and set(schema["properties"]) == {
        "memories",
        "upsert",
        "on_similar",
    }
    memories = schema["properties"]["memories"]
    assert (memories["type"], memories["minItems"], memories["maxItems"]) == ("array", 1, 1000)
    assert "1,000" in memories["description"] and "several calls" in memories["description"]
    item = memories["items"]
    # Written out in place, closed, and the same fields (and descriptions) as store_memory.
    assert "$defs" not in json.dumps(schema) and "$ref" not in json.dumps(schema)
    assert item["type"] == "object" and item["additionalProperties"] is False
    assert item["required"] == ["text"]
    single = tools["store_memory"].input_schema["properties"]
    fields = ("text", "tags", "metadata", "id", "supersedes")
    assert item["properties"] == {name: single[name] for name in fields}
    assert tools["store_memories"].annotations.destructive_hint is False
    assert set(tools["store_memories"].output_schema["properties"]) == {"memories", "written"}


# --- unknown arguments and wrong types -------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "arguments", "named", "hint"),
    [
        ("search_memory", {"query": "tea", "limit": 3}, "'limit'", "for 'limit' use 'k'"),
        ("search_memory", {"query": "tea", "n_results": 3}, "'n_results'", "use 'k'"),
        ("store_memory", {"content": "x"}, "'content'", "for 'content' use 'text'"),
        ("list_tags", {"verbose": True}, "'verbose'", "list_tags takes only: no arguments"),
        ("list_memories", {"page_size": 5}, "'page_size'", "for 'page_size' use 'limit'"),
        ("get_memory", {"id": "n01", "x": 1, "y": 2}, "'x', 'y'", "takes only: id"),
        (
            "store_memories",
            {"items": [{"text": "x"}]},
            "'items'",
            "(for 'items' use 'memories'); store_memories takes only: memories, upsert",
        ),
        (
            "store_memories",
            {"memories": [{"text": "x"}], "dedupe": False},
            "'dedupe'",
            "store_memories takes only: memories, upsert",
        ),
    ],
)
async def test_an_unknown_argument_is_refused_by_name(
    store: HybridMemory, tool: str, arguments: dict[str, Any], named: str, hint: str
) -> None:
    before = store.count()
    async with Client(create_server(store)) as client:
        text = await refused(client, tool, arguments)
    assert "unknown argument" in text and named in text and hint in text, text
    assert store.count() == before


WRONG_TYPES: list[tuple[str, dict[str, Any], str]] = [
    ("search_memory", {"query": 7}, "query: expected a string, got 7"),
    ("search_memory", {"query": "x", "k": "many"}, "k: expected an integer in 1..100"),
    ("search_memory", {"query": "x", "k": 2.5}, "k: expected an integer in 1..100"),
    ("search_memory", {"query": "x", "alpha": "half"}, "alpha: expected a number in [0, 1]"),
    ("search_memory", {"query": "x", "alpha": -0.1}, "alpha: expected a number in [0, 1]"),
    (
        "search_memory",
        {"query": "x", "max_tokens": 0},
        "max_tokens: expected an integer of at least 1",
    ),
    ("search_memory", {"query": "x", "tags": "tea"}, "tags: expected a list of strings or null"),
    (
        "search_memory",
        {"query": "x", "with_tags": ["a", 3]},
        "with_tags[1]: expected a string, got 3",
    ),
    ("search_memory", {"query": "x", "tag_mode": "most"}, "tag_mode: expected one of 'any', 'all'"),
    ("search_memory", {"query": "x", "filter": "user=a"}, "filter: expected an object or null"),
    ("search_memory", {"query": "x", "after": "soonish"}, "after: expected an ISO 8601 date"),
    ("search_memory", {"query": "x", "before": [2024]}, "before: expected a string or a number"),
    ("store_memory", {"text": "x", "upsert": "yes"}, "upsert: expected true or false"),
    ("store_memory", {"text": "x", "metadata": [1]}, "metadata: expected an object or null"),
    ("store_memory", {}, "text: required, a string"),
    ("store_memories", {}, "memories: required, a list of 1..1000 objects"),
    (
        "store_memories",
        {"memories": []},
        "memories: expected a list of 1..1000 objects, got 0 items",
    ),
    (
        "store_memories",
        {"memories": [{"text": f"note {i}"} for i in range(1001)]},
        "memories: expected a list of 1..1000 objects, got 1001 items",
    ),
    ("store_memories", {"memories": {"text": "x"}}, "memories: expected a list of 1..1000"),
    (
        "store_memories",
        {"memories": [{"text": "x"}, {"text": "y", "tags": "z"}]},
        "memories[1].tags: expected a list of strings or null, got 'z'",
    ),
    (
        "store_memories",
        {"memories": [{"text": "x"}], "upsert": "yes"},
        "upsert: expected true or false",
    ),
    ("get_memory", {"id": 5}, "id: expected a string, got 5"),
    ("delete_memory", {"ids": "n01"}, "ids: expected a list of strings or null"),
    (
        "delete_memory",
        {"filter": {"tags": {"$contains": "tea"}}, "confirm": 1},
        "confirm: expected true or false",
    ),
    ("list_memories", {"limit": 500}, "limit: expected an integer in 1..100, got 500"),
    ("list_memories", {"offset": -1}, "offset: expected an integer of at least 0, got -1"),
    ("list_memories", {"newest_first": "true"}, "newest_first: expected true or false"),
    ("get_related", {"id": "n01", "k": 0}, "k: expected an integer in 1..100"),
]


@pytest.mark.parametrize(("tool", "arguments", "message"), WRONG_TYPES)
async def test_a_wrong_value_is_answered_in_the_library_words(
    store: HybridMemory, tool: str, arguments: dict[str, Any], message: str
) -> None:
    before = store.count()
    async with Client(create_server(store)) as client:
        text = await refused(client, tool, arguments)
    assert message in text, text
    for pydantic_words in ("pydantic", "validation error for", "Input should", "type="):
        assert pydantic_words not in text, text
    assert store.count() == before


# --- browsing, time and tag bounds ---------------------------------------------------


async def test_list_memories_pages_through_everything(store: HybridMemory) -> None:
    async with Client(create_server(store)) as client:
        seen: list[str] = []
        offset: int | None = 0
        while offset is not None:
            page = await call(client, "list_memories", {"limit": 10, "offset": offset})
            assert page["total"] == 25 and page["offset"] == offset
            seen += [m["id"] for m in page["memories"]]
            offset = page["next_offset"]
        assert seen == [f"n{i:02d}" for i in range(25)]  # oldest first
        newest = await call(client, "list_memories", {"limit": 3, "newest_first": True})
        assert [m["id"] for m in newest["memories"]] == ["n24", "n23", "n22"]
        assert newest["next_offset"] == 3
        tail = await call(
            client, "list_memories", {"limit": 10, "offset": 20, "newest_first": True}
        )
        assert [m["id"] for m in tail["memories"]] == ["n04", "n03", "n02", "n01", "n00"]
        assert tail["next_offset"] is None
        beyond = await call(client, "list_memories", {"offset": 99})
        assert beyond["memories"] == [] and beyond["next_offset"] is None
        filtered = await call(client, "list_memories", {"with_tags": ["fav"], "limit": 100})
        assert [m["id"] for m in filtered["memories"]] == ["n00", "n05", "n10", "n15", "n20"]


async def test_after_and_before_bound_the_search_by_time(store: HybridMemory) -> None:
    async with Client(create_server(store)) as client:
        recent = await call(
            client, "search_memory", {"query": "coffee brewing", "after": "last week", "k": 20}
        )
        # Within the last 7 days: n18 (7 days old, at the edge) is out, n19..n24 in.
        assert {h["id"] for h in recent["hits"]} == {f"n{i}" for i in range(19, 25)}
        bounded = await call(
            client,
            "search_memory",
            {
                "query": "tea",
                "after": (NOW - timedelta(days=20, hours=1)).isoformat(),
                "before": "10 days ago",
                "k": 50,
            },
        )
        # n15 was stored 10 days before NOW, a moment before "10 days ago" is read.
        assert {h["id"] for h in bounded["hits"]} == {f"n{i:02d}" for i in range(5, 16)}
        epoch = await call(
            client,
            "list_memories",
            {"after": (NOW - timedelta(days=2, hours=1)).timestamp(), "limit": 100},
        )
        assert [m["id"] for m in epoch["memories"]] == ["n23", "n24"]


async def test_with_tags_matches_any_or_all(store: HybridMemory) -> None:
    async with Client(create_server(store)) as client:
        any_of = await call(
            client, "search_memory", {"query": "brewing", "with_tags": ["fav", "coffee"], "k": 50}
        )
        expected_any = {f"n{i:02d}" for i in range(25) if i % 2 or i % 5 == 0}
        assert {h["id"] for h in any_of["hits"]} == expected_any
        all_of = await call(
            client,
            "search_memory",
            {"query": "brewing", "with_tags": ["fav", "COFFEE"], "tag_mode": "all", "k": 50},
        )
        assert {h["id"] for h in all_of["hits"]} == {"n05", "n15"}
        text = await refused(client, "search_memory", {"query": "x", "with_tags": []})
        assert "with_tags" in text


async def test_hits_carry_a_relevance_to_threshold_with_min_score(store: HybridMemory) -> None:
    async with Client(create_server(store)) as client:
        everything = await call(client, "search_memory", {"query": "note 07 about coffee brewing"})
        hits = everything["hits"]
        assert hits[0]["id"] == "n07" and hits[0]["score"] >= 0.5  # a near-exact match
        scores = [h["score"] for h in hits]
        assert scores == sorted(scores, reverse=True) and all(0 <= x <= 1 for x in scores)
        assert all(h["fused_score"] > 0 for h in hits)
        cut = hits[0]["score"]
        kept = await call(
            client, "search_memory", {"query": "note 07 about coffee brewing", "min_score": cut}
        )
        assert [h["id"] for h in kept["hits"]] == [h["id"] for h in hits if h["score"] >= cut]
        unrelated = await call(
            client, "search_memory", {"query": "quarterly tax filing deadline", "min_score": 0.6}
        )
        assert unrelated["hits"] == []
        related = await call(client, "get_related", {"id": "n07", "min_score": 1.0})
        assert all(h["score"] == 1.0 for h in related["hits"])
        text = await refused(client, "search_memory", {"query": "x", "min_score": 2})
        assert "min_score: expected a number in [0, 1]" in text


# --- dry-run deletes -----------------------------------------------------------------


async def test_a_dry_run_delete_shows_what_would_go_and_deletes_nothing(
    fresh: HybridMemory,
) -> None:
    fresh.add_many(
        [{"text": f"log line {i}", "id": f"l{i}", "metadata": {"level": i % 3}} for i in range(30)]
    )
    async with Client(create_server(fresh)) as client:
        preview = await call(client, "delete_memory", {"filter": {"level": 0}, "dry_run": True})
        assert (preview["deleted"], preview["matched"], preview["dry_run"]) == (0, 10, True)
        # Oldest first, then by id: these were stored at one moment.
        assert [m["id"] for m in preview["preview"]] == sorted(f"l{i}" for i in range(0, 30, 3))
        by_ids = await call(
            client, "delete_memory", {"ids": ["l1", "l2", "missing"], "dry_run": True}
        )
        assert (by_ids["matched"], by_ids["deleted"]) == (2, 0)
        assert {m["id"] for m in by_ids["preview"]} == {"l1", "l2"}
        assert fresh.count() == 30
        done = await call(client, "delete_memory", {"filter": {"level": 0}, "confirm": True})
        assert (done["deleted"], done["dry_run"]) == (10, False)
    assert fresh.count() == 20


# --- resources and prompts -------------------------------------------------------------


async def test_resources_list_recent_memories_and_memories_by_tag(store: HybridMemory) -> None:
    async with Client(create_server(store)) as client:
        listed = {str(r.uri) for r in (await client.list_resources()).resources}
        assert "memories://recent" in listed
        recent = json.loads((await client.read_resource("memories://recent")).contents[0].text)  # type: ignore[union-attr]
        assert [m["id"] for m in recent[:3]] == ["n24", "n23", "n22"] and len(recent) == 20
        fav = json.loads((await client.read_resource("memories://tag/fav")).contents[0].text)  # type: ignore[union-attr]
        assert [m["id"] for m in fav] == ["n20", "n15", "n10", "n05", "n00"]
        one = json.loads((await client.read_resource("memory://n03")).contents[0].text)  # type: ignore[union-attr]
        assert one["text"] == "note 03 about coffee brewing"


async def test_prompts_recall_a_topic_and_recent_memories(store: HybridMemory) -> None:
    async with Client(create_server(store)) as client:
        names = {p.name for p in (await client.list_prompts()).prompts}
        assert names == {"recall", "recent_memories"}
        recall = await client.get_prompt("recall", {"topic": "coffee brewing"})
        text = recall.messages[0].content.text  # type: ignore[union-attr]
        assert "coffee brewing" in text and "(id n" in text
        recent = await client.get_prompt("recent_memories", {"days": "3"})
        lines = recent.messages[0].content.text.splitlines()  # type: ignore[union-attr]
        assert [line.split("(id ")[1].split(",")[0] for line in lines[1:]] == ["n24", "n23"]


def mcp_error(exc: BaseException) -> MCPError | None:
    """The MCPError in ``exc`` or in the exception groups around it."""
    if isinstance(exc, MCPError):
        return exc
    for inner in getattr(exc, "exceptions", ()):
        if (found := mcp_error(inner)) is not None:
            return found
    return None


# --- HTTP without the token ------------------------------------------------------------


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}])
async def test_a_client_without_the_token_is_told_what_is_missing(
    fresh: HybridMemory, headers: dict[str, str]
) -> None:
    with http_server(fresh, token=TOKEN) as url:
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            with pytest.raises(BaseException) as raised:  # the SDK's task groups wrap it
                async with Client(streamable_http_client(url, http_client=http)):
                    pass
    error = mcp_error(raised.value)
    assert error is not None, raised.value
    message = str(error)
    assert "Authorization: Bearer <token>" in message, message
    assert ("wrong" if headers else "no bearer token was sent") in message
    assert TOKEN not in message
