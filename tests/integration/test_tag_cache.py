"""The store's known-tag cache: kept in step with this process's writes without
reloading, reloaded when a write may have removed a tag or a sync changed the index."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import chromadb
import pytest

from hybrid_memory import HybridMemory
from hybrid_memory._model.records import CREATED_KEY, TAGS_KEY, UPDATED_KEY

from ..conftest import HashEmbedding


def open_store(path: Path | None = None) -> HybridMemory:
    return HybridMemory(path, embedding=HashEmbedding(), embedding_name="test-hash-64")


class Loads:
    """Counts the tag cache's loads of the known tags from the index: when the cache
    reloads is what these tests are about, and no public API shows it, so this is the
    one place the module reaches inside the store (rename here when it moves)."""

    def __init__(self, store: HybridMemory) -> None:
        self.count = 0
        cache = store._parts.tags
        self.load = cache._loader
        cache._loader = self

    def __call__(self) -> list[str]:
        self.count += 1
        return self.load()


@pytest.fixture
def store() -> Iterator[HybridMemory]:
    with open_store() as memory:
        memory.add_many(
            [
                {"text": "alice likes dark mode", "id": "a", "tags": ["alice", "ui"]},
                {"text": "bob plans a trip to tokyo", "id": "b", "tags": ["bob", "travel"]},
                {"text": "bob again", "id": "b2", "tags": ["bob"]},
            ]
        )
        yield memory


def matched(store: HybridMemory, query: str) -> tuple[str, ...]:
    return store.search(query).matched_tags


def test_a_sync_that_changes_nothing_keeps_the_cache(store: HybridMemory) -> None:
    loads = Loads(store)
    assert matched(store, "alice and bob") == ("alice", "bob")
    for _ in range(3):
        store.sync()
    assert matched(store, "alice and bob") == ("alice", "bob")
    assert loads.count == 1


def test_own_adds_and_updates_merge_their_tags(store: HybridMemory) -> None:
    loads = Loads(store)
    matched(store, "warm up")
    store.add("carol runs marathons", tags=["carol", "sport"])
    store.add_many([{"text": "dave cooks", "tags": ["dave"]}, "no tags at all"])
    store.update("b", tags=["bob", "travel", "new york"])  # keeps bob and travel
    store.add("alice likes light mode now", id="a", upsert=True, tags=["alice", "ui", "x"])
    assert matched(store, "carol, dave, sport and new york; x") == (
        "carol",
        "dave",
        "sport",
        "new york",
        "x",
    )
    assert store.search("sport", tags=["sport"])[0].ranks.get("tag") == 1
    assert loads.count == 1


def test_writes_that_take_a_tag_off_reload(store: HybridMemory) -> None:
    loads = Loads(store)
    assert matched(store, "travel with bob") == ("travel", "bob")
    store.update("b", tags=["bob"])  # travel's only carrier drops it
    assert matched(store, "travel with bob") == ("bob",)
    assert loads.count == 2
    store.add("alice, plain", id="a", upsert=True, tags=["alice"])  # ui's only carrier
    assert matched(store, "alice ui") == ("alice",)
    assert loads.count == 3
    store.update("b", text="bob stays home")  # text only: tags unchanged, no reload
    matched(store, "bob")
    assert loads.count == 3
    store.delete("b2")  # a delete may remove a tag's last carrier
    assert matched(store, "bob") == ("bob",)  # b still carries it
    assert loads.count == 4
    store.delete("b")
    assert matched(store, "bob") == ()
    assert store.tags() == ["alice"]


def test_a_sync_that_finds_other_writes_reloads(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.add("alice likes dark mode", tags=["alice"])
        loads = Loads(store)
        assert matched(store, "alice and zed") == ("alice",)
        # another writer, straight into the collection
        collection = chromadb.PersistentClient(path=str(tmp_path)).get_collection("hybrid_memory")
        [vector] = HashEmbedding()(["zed was here"])
        collection.add(
            ids=["zed"],
            embeddings=[vector],
            documents=["zed was here"],
            metadatas=[{TAGS_KEY: ["zed"], CREATED_KEY: 1.0, UPDATED_KEY: 9e9}],
        )
        store.sync()
        assert matched(store, "alice and zed") == ("alice", "zed")
        assert loads.count == 2
        collection.delete(ids=["zed"])
        store.sync()
        assert matched(store, "alice and zed") == ("alice",)
        assert loads.count == 3
