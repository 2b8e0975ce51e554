"""store_memory and store_memories report what the library's writer decided (under its
lock), not a guess from the clock: a stored memory dated in the future is still found as
a duplicate, and two clients storing one text at once are told "new" once."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from _mcp_test_support import NOT_STORED, STORED, call, open_store
from hybrid_memory_mcp import create_server
from hybrid_memory_mcp.tools import MemoryTools
from mcp import Client

from hybrid_memory import HybridMemory


@pytest.fixture
def store(tmp_path: Path) -> Any:
    memory = open_store(tmp_path / "memory")
    yield memory
    memory.close()


async def test_a_memory_dated_after_the_call_is_still_a_duplicate(store: HybridMemory) -> None:
    # Its creation time is later than the call's start: a guess from the clock read it
    # as new; the writer knows it found the text stored.
    stored = store.add("The lease ends in 2099", created_at="2099-01-01T00:00:00Z")
    async with Client(create_server(store)) as client:
        again = await call(client, "store_memory", {"text": "The lease ends in 2099"})
        assert again == {"id": stored, "duplicate": True, "replaced": False, **NOT_STORED}
        many = await call(
            client,
            "store_memories",
            {"memories": [{"text": "The lease ends in 2099"}, {"text": "Rent is due monthly"}]},
        )
    assert [(r["id"] == stored, r["duplicate"]) for r in many["memories"]] == [
        (True, True),
        (False, False),
    ]
    assert many["written"] == 1
    assert store.count() == 2


async def test_an_upsert_of_a_memory_dated_in_the_future_is_replaced(
    store: HybridMemory,
) -> None:
    store.add("Retro on Fridays", id="retro", created_at="2099-01-01T00:00:00Z")
    async with Client(create_server(store)) as client:
        replaced = await call(
            client, "store_memory", {"text": "Retro on Thursdays", "id": "retro", "upsert": True}
        )
        added = await call(
            client, "store_memory", {"text": "Demo on Mondays", "id": "demo", "upsert": True}
        )
    assert replaced == {"id": "retro", "duplicate": False, "replaced": True, **STORED}
    assert added == {"id": "demo", "duplicate": False, "replaced": False, **STORED}


def test_two_clients_storing_one_text_at_once_are_told_new_once(store: HybridMemory) -> None:
    tools = [MemoryTools(store), MemoryTools(store)]
    start = threading.Barrier(len(tools))
    results: list[Any] = []

    def store_one(tool: MemoryTools) -> None:
        start.wait()
        results.append(tool.store_memory("Both clients heard the fire drill is at noon"))

    threads = [threading.Thread(target=store_one, args=(tool,)) for tool in tools]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert sorted(r.duplicate for r in results) == [False, True]
    assert results[0].id == results[1].id
    assert store.count() == 1
