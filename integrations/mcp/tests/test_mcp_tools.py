"""The MCP tools driven through the SDK's real client over an in-memory connection,
against a real on-disk store and the real default embedding model."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from _mcp_test_support import NOT_STORED, STORED, call, open_store, refused
from hybrid_memory_mcp import MCPServerSettings, create_server, migrate_prefixed_namespace
from mcp import Client
from mcp.shared.exceptions import MCPError

from hybrid_memory import HybridMemory

TOOLS = {
    "store_memory",
    "store_memories",
    "search_memory",
    "get_related",
    "get_memory",
    "list_memories",
    "update_memory",
    "delete_memory",
    "list_tags",
    "memory_stats",
}


@pytest.fixture
def store(tmp_path: Path) -> Any:
    memory = open_store(tmp_path / "memory")
    yield memory
    memory.close()


async def test_every_tool_is_listed_with_described_fields_and_an_output_schema(
    store: HybridMemory,
) -> None:
    async with Client(create_server(store)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        templates = (await client.list_resource_templates()).resource_templates
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description, tool.name
        assert tool.output_schema is not None, tool.name
        for field, schema in tool.input_schema.get("properties", {}).items():
            assert schema.get("description"), f"{tool.name}.{field} has no description"
    assert tools["search_memory"].input_schema["required"] == ["query"]
    assert set(tools["search_memory"].output_schema["properties"]) >= {
        "hits",
        "fallback_mode",
        "fallback_reason",
    }
    assert tools["search_memory"].annotations.read_only_hint is True
    assert tools["delete_memory"].annotations.destructive_hint is True
    assert {t.uri_template for t in templates} == {"memory://{id}", "memories://tag/{tag}"}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_full_round_trip(store: HybridMemory, mode: str) -> None:
    # "legacy" runs the JSON-RPC session over the SDK's in-memory streams
    # (mcp.shared.memory); "auto" the SDK's direct in-process dispatch.
    async with Client(create_server(store), mode=mode) as client:
        alice_theme = await call(
            client,
            "store_memory",
            {
                "text": "Alice prefers dark mode in every editor",
                "tags": ["alice", "UI"],
                "metadata": {"user": "alice", "session": 1},
            },
        )
        alice_food = await call(
            client,
            "store_memory",
            {
                "text": "Alice is allergic to peanuts",
                "tags": ["alice", "health"],
                "metadata": {"user": "alice", "session": 2},
            },
        )
        bob_theme = await call(
            client,
            "store_memory",
            {
                "text": "Bob prefers a light theme with large fonts",
                "tags": ["bob", "ui"],
                "metadata": {"user": "bob", "session": 1},
            },
        )
        assert not any(r["duplicate"] for r in (alice_theme, alice_food, bob_theme))

        found = await call(
            client,
            "search_memory",
            {"query": "which editor theme does she like?", "filter": {"user": "alice"}, "k": 5},
        )
        hits = found["hits"]
        assert hits[0]["id"] == alice_theme["id"]
        assert {h["metadata"]["user"] for h in hits} == {"alice"}
        assert found["fallback_mode"] is False and found["fallback_reason"] is None
        top = hits[0]
        assert top["tags"] == ["alice", "ui"]
        assert top["created_at"].endswith("+00:00")
        assert top["score"] > 0 and "vector" in top["ranks"] and "vector" in top["scores"]
        assert 0 < top["score"] <= 1 and 0 < top["fused_score"] < 0.02
        assert set(top["ranks"]) == set(top["scores"])

        by_tag = await call(
            client, "search_memory", {"query": "theme", "filter": {"tags": {"$contains": "ui"}}}
        )
        assert {h["id"] for h in by_tag["hits"]} == {alice_theme["id"], bob_theme["id"]}

        related = await call(client, "get_related", {"id": alice_theme["id"], "k": 2})
        related_ids = [h["id"] for h in related["hits"]]
        assert alice_theme["id"] not in related_ids
        assert related_ids[0] == bob_theme["id"]  # the other theme memory is nearest

        updated = await call(
            client,
            "update_memory",
            {"id": bob_theme["id"], "text": "Bob switched to a dark theme", "tags": ["bob"]},
        )
        assert updated["text"] == "Bob switched to a dark theme" and updated["tags"] == ["bob"]
        assert updated["metadata"] == {"user": "bob", "session": 1}
        got = await call(client, "get_memory", {"id": bob_theme["id"]})
        assert got == updated

        tags = await call(client, "list_tags")
        assert tags == {"tags": ["alice", "bob", "health", "ui"]}

        text = await refused(client, "delete_memory", {"filter": {"user": "alice"}})
        assert "confirm" in text and "nothing was deleted" in text
        assert store.count() == 3

        deleted = await call(
            client, "delete_memory", {"filter": {"user": "alice"}, "confirm": True}
        )
        assert (deleted["deleted"], deleted["matched"], deleted["dry_run"]) == (2, 2, False)
        by_id = await call(client, "delete_memory", {"ids": [bob_theme["id"]]})
        assert by_id["deleted"] == 1

        stats = await call(client, "memory_stats")
        assert stats["count"] == 0 and stats["tags"] == []
        assert stats["embedding_model"] == "sentence-transformers/all-MiniLM-L6-v2"
        assert stats["kind"] == "embedded"
        assert stats["in_step"] is True and stats["indexed"] == 0
        assert stats["namespace"] is None
        # Nothing of the server's machine: no directory, index file or collection.
        assert store.settings.path not in json.dumps(stats)
    assert store.count() == 0


async def test_stats_report_counts_and_tags(store: HybridMemory) -> None:
    async with Client(create_server(store)) as client:
        for i in range(3):
            await call(client, "store_memory", {"text": f"note number {i}", "tags": [f"t{i}"]})
        stats = await call(client, "memory_stats")
    assert stats["count"] == 3 == stats["indexed"]
    assert stats["tags"] == ["t0", "t1", "t2"]
    assert set(stats) == {
        "count",
        "indexed",
        "in_step",
        "tags",
        "embedding_model",
        "kind",
        "namespace",
        "sync_interval",
    }


async def test_duplicates_upserts_and_explicit_ids(store: HybridMemory) -> None:
    async with Client(create_server(store)) as client:
        first = await call(client, "store_memory", {"text": "The office wifi is called Nebula"})
        again = await call(client, "store_memory", {"text": "The office wifi is called Nebula"})
        assert again == {"id": first["id"], "duplicate": True, "replaced": False, **NOT_STORED}

        mine = await call(client, "store_memory", {"text": "Standup is at 9:30", "id": "standup"})
        assert mine == {"id": "standup", "duplicate": False, "replaced": False, **STORED}
        text = await refused(client, "store_memory", {"text": "Standup is at 10", "id": "standup"})
        assert "already exists" in text and "upsert" in text
        assert store.get("standup").text == "Standup is at 9:30"
        replaced = await call(
            client, "store_memory", {"text": "Standup is at 10", "id": "standup", "upsert": True}
        )
        assert replaced == {"id": "standup", "duplicate": False, "replaced": True, **STORED}
        assert store.get("standup").text == "Standup is at 10"
    assert store.count() == 2


BAD_CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("store_memory", {"text": 42}, "text"),
    ("store_memory", {"text": "   "}, "text: must not be empty"),
    ("store_memory", {"text": "x", "tags": 5}, "tags"),
    ("store_memory", {"text": "x", "metadata": {"nested": {"a": 1}}}, "metadata['nested']"),
    ("store_memory", {"text": "x", "metadata": {"tags": "a"}}, "reserved name"),
    ("store_memory", {"text": "x", "id": ""}, "id: expected a non-empty string"),
    ("search_memory", {"query": "theme", "k": 0}, "k: expected an integer in 1..100"),
    ("search_memory", {"query": "theme", "k": 500}, "k: expected an integer in 1..100"),
    ("search_memory", {"query": "theme", "k": "many"}, "k: expected an integer in 1..100"),
    ("search_memory", {"query": "theme", "alpha": 2}, "alpha: expected a number in [0, 1]"),
    ("search_memory", {"query": "theme", "max_tokens": 0}, "max_tokens"),
    ("search_memory", {"query": "theme", "filter": {"user": {"$regex": "a"}}}, "$regex"),
    ("search_memory", {"query": "theme", "filter": {"$nor": []}}, "$nor"),
    ("search_memory", {}, "query"),
    ("get_memory", {"id": "no-such-id"}, "no memory with id 'no-such-id'"),
    ("get_memory", {}, "id"),
    ("get_related", {"id": "no-such-id"}, "no memory with id 'no-such-id'"),
    ("update_memory", {"id": "no-such-id", "text": "new"}, "no memory with id 'no-such-id'"),
    ("update_memory", {"id": "keep"}, "give at least one of text, tags, metadata"),
    ("delete_memory", {"ids": ["keep", "no-such-id"]}, "no memory with id 'no-such-id'"),
    ("delete_memory", {}, "give exactly one of ids or filter"),
    ("delete_memory", {"ids": ["keep"], "filter": {"user": "a"}}, "give exactly one"),
    ("delete_memory", {"filter": {"user": "a"}}, "confirm=true"),
    ("delete_memory", {"filter": {"user": "a"}, "dry_run": "yes"}, "dry_run: expected true or"),
    ("delete_memory", {"filter": {}, "confirm": True}, "empty filter"),
    ("delete_memory", {"filter": {"user": {"$bad": 1}}, "confirm": True}, "$bad"),
]


@pytest.fixture(scope="module")
def one_memory_store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One store holding one memory, shared by the bad-input cases (each must leave it
    exactly as it was, which each checks)."""
    memory = open_store(tmp_path_factory.mktemp("bad-input"))
    memory.add("kept memory", id="keep", tags=["a"], metadata={"user": "a"})
    yield memory
    memory.close()


@pytest.mark.parametrize(("tool", "arguments", "message"), BAD_CALLS)
async def test_bad_input_is_a_tool_error_with_the_library_message_and_changes_nothing(
    one_memory_store: HybridMemory, tool: str, arguments: dict[str, Any], message: str
) -> None:
    store = one_memory_store
    before = [(m.id, m.text, m.tags, dict(m.metadata)) for m in store.get_many(["keep"])]
    async with Client(create_server(store)) as client:
        text = await refused(client, tool, arguments)
        assert message in text, text
        # The server is still up and answers.
        assert (await call(client, "memory_stats"))["count"] == 1
    after = [(m.id, m.text, m.tags, dict(m.metadata)) for m in store.get_many(["keep"])]
    assert store.count() == 1 and after == before
    assert store.tags() == ["a"]


async def test_memory_resource(store: HybridMemory) -> None:
    async with Client(create_server(store)) as client:
        stored = await call(client, "store_memory", {"text": "Paris trip in May", "tags": ["trip"]})
        result = await client.read_resource(f"memory://{stored['id']}")
        body = json.loads(result.contents[0].text)  # type: ignore[union-attr]
        assert body["text"] == "Paris trip in May" and body["tags"] == ["trip"]
        assert result.contents[0].mime_type == "application/json"
        with pytest.raises(MCPError, match="no memory with id 'missing'"):
            await client.read_resource("memory://missing")


async def test_namespaces_never_leak(tmp_path: Path) -> None:
    store = open_store(tmp_path / "shared")
    try:
        spaces = {
            name: create_server(store, MCPServerSettings(namespace=name))
            for name in ("team-a", "team-b")
        }
        ids: dict[str, list[str]] = {"team-a": [], "team-b": []}
        texts = [
            "The deploy password rotates every Monday",
            "Release notes live in the wiki",
            "The staging database is called orion",
        ]
        async with Client(spaces["team-a"]) as a, Client(spaces["team-b"]) as b:
            for name, client in (("team-a", a), ("team-b", b)):
                for i, text in enumerate(texts):
                    stored = await call(
                        client,
                        "store_memory",
                        {"text": f"{text} ({name})" if i else text, "tags": [name, "ops"]},
                    )
                    assert stored["duplicate"] is False  # same text in both: stored in each
                    ids[name].append(stored["id"])
                # Dedup works within the namespace.
                again = await call(client, "store_memory", {"text": texts[0], "tags": [name]})
                assert again == {
                    "id": ids[name][0],
                    "duplicate": True,
                    "replaced": False,
                    **NOT_STORED,
                }
            # Same explicit id in both namespaces: two memories, no collision.
            await call(a, "store_memory", {"text": "a's own note", "id": "note"})
            await call(b, "store_memory", {"text": "b's own note", "id": "note"})
            assert (await call(a, "get_memory", {"id": "note"}))["text"] == "a's own note"
            assert (await call(b, "get_memory", {"id": "note"}))["text"] == "b's own note"
            ids["team-a"].append("note")
            ids["team-b"].append("note")

            rng = random.Random(7)
            words = ["deploy", "password", "wiki", "release", "database", "orion", "ops", "note"]
            for _ in range(12):
                query = " ".join(rng.sample(words, 2))
                for name, client in (("team-a", a), ("team-b", b)):
                    result = await call(client, "search_memory", {"query": query, "k": 10})
                    assert result["hits"] and {h["id"] for h in result["hits"]} <= set(ids[name])
                    other = "team-b" if name == "team-a" else "team-a"
                    assert other not in result["matched_tags"]
            for other, client in (("team-b", a), ("team-a", b)):
                foreign = next(i for i in ids[other] if i != "note")
                for tool, args in (
                    ("get_memory", {"id": foreign}),
                    ("get_related", {"id": foreign}),
                    ("update_memory", {"id": foreign, "text": "hijacked"}),
                    ("delete_memory", {"ids": [foreign]}),
                ):
                    text = await refused(client, tool, args)
                    # The id as the client gave it: no internal collection or prefix.
                    assert f"no memory with id {foreign!r}" in text and "team" not in text
            related = await call(a, "get_related", {"id": ids["team-a"][0], "k": 10})
            assert {h["id"] for h in related["hits"]} <= set(ids["team-a"])
            assert (await call(a, "list_tags"))["tags"] == ["ops", "team-a"]
            stats_b = await call(b, "memory_stats")
            assert (stats_b["count"], stats_b["namespace"]) == (4, "team-b")
            # A filter delete in one namespace removes nothing of the other.
            gone = await call(
                a, "delete_memory", {"filter": {"tags": {"$contains": "ops"}}, "confirm": True}
            )
            assert gone["deleted"] == 3
            assert (await call(a, "memory_stats"))["count"] == 1
            assert (await call(b, "memory_stats"))["count"] == 4
        # Nothing is in the store itself: each namespace holds memories of its own.
        assert store.count() == 0
        assert store.namespace("team-a").count() == 1 and store.namespace("team-b").count() == 4
    finally:
        store.close()


async def test_namespaces_that_collided_under_the_prefix_scheme_stay_apart(
    store: HybridMemory,
) -> None:
    """Issue 21, item 3: namespace "A" with id "sub:k" and namespace "A:sub" with id "k"
    were one memory ("A:sub:k"); upsert in one replaced the other's memory."""
    a = create_server(store, MCPServerSettings(namespace="A"))
    a_sub = create_server(store, MCPServerSettings(namespace="A:sub"))
    async with Client(a) as in_a, Client(a_sub) as in_a_sub:
        await call(in_a, "store_memory", {"text": "A's memory", "id": "sub:k", "tags": ["mine"]})
        stored = await call(in_a_sub, "store_memory", {"text": "A:sub's memory", "id": "k"})
        assert stored == {"id": "k", "duplicate": False, "replaced": False, **STORED}
        upsert = {"text": "replaced", "id": "k", "upsert": True}
        assert (await call(in_a_sub, "store_memory", upsert))["replaced"] is True
        assert (await call(in_a, "get_memory", {"id": "sub:k"}))["text"] == "A's memory"
        assert (await call(in_a_sub, "list_tags"))["tags"] == []
        assert (await call(in_a_sub, "memory_stats"))["count"] == 1
        hits = (await call(in_a_sub, "search_memory", {"query": "mine memory"}))["hits"]
        assert [h["text"] for h in hits] == ["replaced"]


async def test_memories_of_the_old_prefix_scheme_move_into_their_namespace(
    store: HybridMemory,
) -> None:
    """Data written by the earlier server (ids "<namespace>:<id>", metadata namespace)
    is moved into the namespace on start, once, with its id, tags, metadata and time."""
    store.add(
        "old memory of team-a",
        id="team-a:old",
        tags=["legacy"],
        metadata={"namespace": "team-a", "user": "ann"},
        created_at="2025-01-02T03:04:05+00:00",
    )
    store.add("old memory of team-b", id="team-b:x", metadata={"namespace": "team-b"})
    # Carries the field but not the id prefix: the user's own metadata, not moved.
    store.add("user metadata only", id="plain", metadata={"namespace": "team-a"})
    async with Client(create_server(store, MCPServerSettings(namespace="team-a"))) as client:
        moved = await call(client, "get_memory", {"id": "old"})
        assert moved["text"] == "old memory of team-a" and moved["tags"] == ["legacy"]
        assert moved["metadata"] == {"user": "ann"}
        assert moved["created_at"] == "2025-01-02T03:04:05+00:00"
        assert (await call(client, "memory_stats"))["count"] == 1
    assert store.existing(["team-a:old", "team-b:x", "plain"]) == {"team-b:x", "plain"}
    # A second start finds nothing left to move.
    create_server(store, MCPServerSettings(namespace="team-a"))
    assert store.namespace("team-a").count() == 1 and store.count() == 2


def test_an_interrupted_move_finishes_on_the_next_start(store: HybridMemory) -> None:
    """A start stopped after writing a memory into the namespace but before deleting the
    old copy: the next start replaces the copy in the namespace and deletes the old one."""
    store.add("half moved", id="ns:k", metadata={"namespace": "ns"}, tags=["t"])
    store.namespace("ns").add("half moved", id="k", tags=["t"])
    assert migrate_prefixed_namespace(store, "ns") == 1
    assert store.count() == 0
    (memory,) = store.namespace("ns").list_memories()
    assert (memory.id, memory.text, memory.tags) == ("k", "half moved", ("t",))
    assert migrate_prefixed_namespace(store, "ns") == 0


def _nested_filter(depth: int) -> dict[str, Any]:
    where: dict[str, Any] = {"user": "nobody"}
    for _ in range(depth):
        where = {"$and": [where]}
    return where


async def test_hostile_input_leaves_the_server_running_and_the_store_unchanged(
    one_memory_store: HybridMemory,
) -> None:
    # Inputs the library may not catch itself (issue 16): whatever happens inside, the
    # client gets a result or an isError result, never a dead server, and (for these)
    # nothing stored changes.
    store = one_memory_store
    async with Client(create_server(store), mode="legacy") as client:
        surrogate = await client.call_tool("store_memory", {"text": "lone surrogate \ud800"})
        assert surrogate.is_error
        for depth in (50, 100):  # as deep as the SDK's client serialises
            await client.call_tool("search_memory", {"query": "x", "filter": _nested_filter(depth)})
            await client.call_tool(
                "delete_memory", {"filter": _nested_filter(depth), "confirm": True}
            )
        assert (await call(client, "memory_stats"))["count"] == 1
    assert [m.text for m in store.get_many(["keep"])] == ["kept memory"]
    assert store.count() == 1


async def test_supersedes_through_store_update_and_search(store: HybridMemory) -> None:
    async with Client(create_server(store)) as client:
        old = await call(client, "store_memory", {"text": "Alice lives in Paris", "id": "paris"})
        new = await call(
            client,
            "store_memory",
            {"text": "Alice moved to Berlin", "id": "berlin", "supersedes": old["id"]},
        )
        assert new == {"id": "berlin", "duplicate": False, "replaced": False, **STORED}
        found = await call(client, "search_memory", {"query": "where does Alice live", "k": 5})
        marks = {hit["id"]: hit["superseded_by"] for hit in found["hits"]}
        assert marks == {"paris": "berlin", "berlin": None}
        assert [hit["id"] for hit in found["hits"]] == ["berlin", "paris"]
        assert (await call(client, "get_memory", {"id": "berlin"}))["metadata"] == {
            "supersedes": "paris"
        }

        text = await refused(
            client, "store_memory", {"text": "Alice lives in Rome", "supersedes": "no-such-id"}
        )
        assert "supersedes" in text and "no-such-id" in text
        text = await refused(
            client,
            "store_memories",
            {"memories": [{"text": "a"}, {"text": "b", "supersedes": "no-such-id"}]},
        )
        assert "memories[1].supersedes" in text
        assert store.count() == 2

        batch = await call(
            client,
            "store_memories",
            {
                "memories": [
                    {"text": "Alice moved to Lisbon", "id": "lisbon", "supersedes": "berlin"}
                ]
            },
        )
        assert batch["memories"][0]["id"] == "lisbon"
        await call(client, "store_memory", {"text": "Alice's office is in Porto", "id": "porto"})
        updated = await call(client, "update_memory", {"id": "porto", "supersedes": "lisbon"})
        assert updated["metadata"] == {"supersedes": "lisbon"}
        found = await call(client, "search_memory", {"query": "Alice lives moved", "k": 5})
        marks = {hit["id"]: hit["superseded_by"] for hit in found["hits"]}
        assert marks["paris"] == "berlin" and marks["berlin"] == "lisbon"
        assert marks["lisbon"] == "porto"
