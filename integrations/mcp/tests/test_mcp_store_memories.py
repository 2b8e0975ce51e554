"""store_memories (issue 22, "batches are batches"): many memories in one call, written
by one ``HybridMemory.add_many``, driven through the SDK's real client against a real
on-disk store and the real default embedding model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _mcp_test_support import NOT_STORED, STORED, call, open_store, refused
from hybrid_memory_mcp import MCPServerSettings, create_server
from mcp import Client

from hybrid_memory import HybridMemory

BATCH = [
    {
        "text": "Alice prefers dark mode in every editor",
        "tags": ["alice", "ui"],
        "metadata": {"user": "alice"},
    },
    {"text": "The staging database is called orion", "tags": ["ops"]},
    {"text": "Bob is allergic to peanuts", "tags": ["bob", "health"], "id": "bob-allergy"},
    {"text": "The quarterly report is due on the fifth", "metadata": {"team": "finance"}},
    {"text": "Carol plays the cello in a string quartet", "tags": ["carol", "music"]},
]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[HybridMemory]:
    memory = open_store(tmp_path / "memory")
    yield memory
    memory.close()


async def test_a_batch_is_stored_in_one_write_and_each_memory_is_found_on_every_leg(
    store: HybridMemory,
) -> None:
    async with Client(create_server(store)) as client:
        stored = await call(client, "store_memories", {"memories": BATCH})
        results = stored["memories"]
        assert len(results) == len(BATCH) and stored["written"] == len(BATCH)
        assert results[2] == {"id": "bob-allergy", "duplicate": False, "replaced": False, **STORED}
        assert not any(r["duplicate"] or r["replaced"] for r in results)
        ids = [r["id"] for r in results]
        assert len(set(ids)) == len(BATCH)
        for memory_id, item in zip(ids, BATCH, strict=True):
            got = await call(client, "get_memory", {"id": memory_id})
            assert got["text"] == item["text"]
            assert got["tags"] == sorted(item.get("tags", []))
            assert got["metadata"] == item.get("metadata", {})
            # By its own text: found by meaning and by its words.
            found = await call(client, "search_memory", {"query": item["text"], "k": 3})
            hit = next(h for h in found["hits"] if h["id"] == memory_id)
            assert {"vector", "keyword"} <= set(hit["ranks"]), hit["ranks"]
            for tag in item.get("tags", []):
                by_tag = await call(
                    client, "search_memory", {"query": "what do we know", "tags": [tag]}
                )
                tagged = [h for h in by_tag["hits"] if h["id"] == memory_id]
                assert tagged and "tag" in tagged[0]["ranks"], (tag, by_tag["hits"])
    assert store.count() == len(BATCH)
    # One add_many writes the whole batch at one moment: every memory has its time.
    assert len({m.created_at for m in store.get_many(ids)}) == 1


async def test_duplicates_within_the_batch_and_against_stored_memories(
    store: HybridMemory,
) -> None:
    wifi, lunch = "The office wifi is called Nebula", "Lunch is served at noon"
    async with Client(create_server(store)) as client:
        earlier = await call(client, "store_memory", {"text": wifi})
        stored = await call(
            client,
            "store_memories",
            {
                "memories": [
                    {"text": wifi},  # stored before this call
                    {"text": lunch},  # new
                    {"text": lunch, "tags": ["food"]},  # same text and metadata: duplicate
                    {"text": lunch, "metadata": {"site": "paris"}},  # other metadata: new
                    {"text": wifi, "id": "wifi-copy"},  # an id of its own: stored
                    {"text": wifi},  # stored before, again
                ]
            },
        )
    results = stored["memories"]
    assert results[0] == {"id": earlier["id"], "duplicate": True, "replaced": False, **NOT_STORED}
    assert results[1]["duplicate"] is False and results[1]["id"] != earlier["id"]
    assert results[2] == {
        "id": results[1]["id"],
        "duplicate": True,
        "replaced": False,
        **NOT_STORED,
    }
    assert results[3]["duplicate"] is False and results[3]["id"] != results[1]["id"]
    # Stored under its own id; the same text stored already is named.
    assert (results[4]["id"], results[4]["stored"]) == ("wifi-copy", True)
    assert [(s["id"], s["text"]) for s in results[4]["similar"]] == [(earlier["id"], wifi)]
    assert results[5] == results[0]
    assert stored["written"] == 3
    assert store.count() == 4
    # The duplicate wrote nothing: the first lunch memory keeps no tags.
    assert store.get(results[1]["id"]).tags == ()


async def test_ids_and_upsert(store: HybridMemory) -> None:
    async with Client(create_server(store)) as client:
        await call(client, "store_memory", {"text": "Standup is at 9:30", "id": "standup"})
        batch = [
            {"text": "Retro is on Fridays", "id": "retro"},
            {"text": "Standup is at 10", "id": "standup", "tags": ["meetings"]},
        ]
        text = await refused(client, "store_memories", {"memories": batch})
        assert "memories[1].id" in text and "already exists" in text and "upsert" in text, text
        assert "nothing was stored" in text
        assert store.existing(["retro", "standup"]) == {"standup"}
        assert store.get("standup").text == "Standup is at 9:30"

        replaced = await call(client, "store_memories", {"memories": batch, "upsert": True})
        assert replaced == {
            "memories": [
                {"id": "retro", "duplicate": False, "replaced": False, **STORED},
                {"id": "standup", "duplicate": False, "replaced": True, **STORED},
            ],
            "written": 2,
        }
        assert store.get("standup").text == "Standup is at 10"
        assert store.get("standup").tags == ("meetings",)

        # One id twice in a call is refused, with upsert too (the last would win silently).
        twice = [{"text": "one", "id": "x"}, {"text": "two"}, {"text": "three", "id": "x"}]
        for upsert in (False, True):
            text = await refused(client, "store_memories", {"memories": twice, "upsert": upsert})
            assert "memories[2].id" in text and "memories[0].id" in text, text
        assert store.existing(["x"]) == set()
        # A bad id is named by its position with upsert too.
        bad_id = [{"text": "fine", "id": "fine"}, {"text": "empty id", "id": ""}]
        text = await refused(client, "store_memories", {"memories": bad_id, "upsert": True})
        assert "memories[1].id: expected a non-empty string" in text, text
        assert store.existing(["fine"]) == set()
    assert store.count() == 2


BAD_ITEMS: list[tuple[Any, str]] = [
    ({"text": "   "}, "memories[3].text: must not be empty"),
    ({"text": 42}, "memories[3].text: expected a string, got 42"),
    ({"tags": ["a"]}, "memories[3].text: required, a string"),
    ({"text": "x", "tags": 5}, "memories[3].tags: expected a list of strings or null, got 5"),
    ({"text": "x", "tags": ["a", 3]}, "memories[3].tags[1]: expected a string, got 3"),
    ({"text": "x", "metadata": {"nested": {"a": 1}}}, "memories[3].metadata['nested']"),
    ({"text": "x", "metadata": {"tags": "a"}}, "reserved name"),
    ({"text": "x", "metadata": [1]}, "memories[3].metadata: expected an object or null"),
    ({"text": "x", "id": ""}, "memories[3].id: expected a non-empty string"),
    ({"text": "x", "id": 7}, "memories[3].id: expected a string or null, got 7"),
    ({"content": "x"}, "memories[3]: unknown field 'content' (for 'content' use 'text')"),
    ({"text": "x", "created_at": 1}, "memories[3]: unknown field 'created_at'"),
    ("just a text", "memories[3]: expected an object, got 'just a text'"),
]


@pytest.fixture(scope="module")
def one_memory_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HybridMemory]:
    """One store holding one memory, shared by the bad-input cases (each checks that it
    is left exactly as it was)."""
    memory = open_store(tmp_path_factory.mktemp("bad-batches"))
    memory.add("kept memory", id="keep", tags=["a"], metadata={"user": "a"})
    yield memory
    memory.close()


@pytest.mark.parametrize(("bad", "message"), BAD_ITEMS)
async def test_a_bad_memory_in_the_middle_stores_none_and_is_named_by_position(
    one_memory_store: HybridMemory, bad: Any, message: str
) -> None:
    store = one_memory_store
    good = [{"text": f"good memory number {i}", "tags": ["good"]} for i in range(4)]
    batch = [*good[:3], bad, good[3]]
    async with Client(create_server(store)) as client:
        text = await refused(client, "store_memories", {"memories": batch})
    assert message in text, text
    for pydantic_words in ("pydantic", "validation error for", "Input should", "items["):
        assert pydantic_words not in text, text
    assert store.count() == 1 and store.tags() == ["a"]
    kept = store.get("keep")
    assert (kept.text, kept.tags, dict(kept.metadata)) == ("kept memory", ("a",), {"user": "a"})


async def test_each_namespace_stores_and_deduplicates_its_own_batch(store: HybridMemory) -> None:
    wifi = "The office wifi is called Nebula"
    store.add(wifi)  # in the store itself: not a duplicate inside a namespace
    team_a = create_server(store, MCPServerSettings(namespace="team-a"))
    async with Client(team_a) as client:
        first = await call(
            client, "store_memories", {"memories": [{"text": wifi}, {"text": "a", "id": "note"}]}
        )
        assert [r["duplicate"] for r in first["memories"]] == [False, False]
        again = await call(
            client,
            "store_memories",
            {"memories": [{"text": wifi}, {"text": "b", "id": "note"}], "upsert": True},
        )
        assert again["memories"] == [
            {"id": first["memories"][0]["id"], "duplicate": True, "replaced": False, **NOT_STORED},
            {"id": "note", "duplicate": False, "replaced": True, **STORED},
        ]
        hits = (await call(client, "search_memory", {"query": wifi}))["hits"]
        assert [h["id"] for h in hits][:1] == [first["memories"][0]["id"]]
    space = store.namespace("team-a")
    assert space.count() == 2 and space.get("note").text == "b"
    assert store.count() == 1 and store.existing(["note"]) == set()
