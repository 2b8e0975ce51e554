"""The tools tell an agent when it is about to repeat itself: store_memory and
store_memories list the stored memories that say nearly the same thing (id, similarity,
text), on_similar chooses what is done, and a search hit names the repeats folded
into it. Over the real protocol, with the real default model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _mcp_test_support import call, open_store
from hybrid_memory_mcp import create_server
from mcp import Client

from hybrid_memory import HybridMemory

FACT = "Alice is allergic to peanuts"


@pytest.fixture
def store(tmp_path: Path) -> Any:
    memory = open_store(tmp_path / "memory")
    yield memory
    memory.close()


async def test_a_repeat_is_told_with_what_it_repeats(store: HybridMemory) -> None:
    async with Client(create_server(store)) as client:
        first = await call(client, "store_memory", {"text": FACT})
        assert first["similar"] == [] and first["stored"] is True
        again = await call(client, "store_memory", {"text": f"{FACT} (confirmed again)"})
        assert again["stored"] is True and again["id"] != first["id"]
        assert [(s["id"], s["text"]) for s in again["similar"]] == [(first["id"], FACT)]
        assert 0.6 <= again["similar"][0]["similarity"] <= 1.0
        skipped = await call(
            client,
            "store_memory",
            {"text": f"2026-10-13: {FACT}", "on_similar": "skip"},
        )
        # A date in front and "(confirmed again)" each restate the fact, not each other.
        assert skipped["stored"] is False and skipped["id"] == first["id"]
        assert [s["id"] for s in skipped["similar"]] == [first["id"]]
        newer = await call(
            client,
            "store_memory",
            {"text": f"{FACT}, per the chat on 2026-11-02.", "on_similar": "supersede"},
        )
        assert store.get(newer["id"]).supersedes == newer["similar"][0]["id"]
    assert store.count() == 3


async def test_store_memories_lists_repeats_of_stored_and_earlier_items(
    store: HybridMemory,
) -> None:
    first = store.add(FACT)
    async with Client(create_server(store)) as client:
        many = await call(
            client,
            "store_memories",
            {
                "memories": [
                    {"text": "The office wifi is called Nebula"},
                    {"text": f"2026-10-13: {FACT}"},
                    {"text": "The office wifi is called Nebula (confirmed again)"},
                ],
                "on_similar": "skip",
            },
        )
    results = many["memories"]
    assert [r["stored"] for r in results] == [True, False, False]
    assert results[1]["id"] == first and results[1]["similar"][0]["text"] == FACT
    assert results[2]["id"] == results[0]["id"]
    assert many["written"] == 1 and store.count() == 2


async def test_a_search_hit_names_the_repeats_folded_into_it(store: HybridMemory) -> None:
    ids = [store.add(text) for text in (FACT, "Bob plays chess", f"{FACT} (confirmed again)")]
    async with Client(create_server(store)) as client:
        found = await call(client, "search_memory", {"query": "what is alice allergic to", "k": 3})
    hits = found["hits"]
    folded = hits[0]["similar_ids"]
    assert len(folded) == 1 and {hits[0]["id"], *folded} == {ids[0], ids[2]}
    assert [h["id"] for h in hits].count(folded[0]) == 0
    assert all(h["similar_ids"] == [] for h in hits[1:])
