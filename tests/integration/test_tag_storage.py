"""How the collection keeps tags, and every path that filters on them.

The collection holds a memory's tags as one JSON string: a Chroma metadata array
costs a row in four indexes per tag on every write (1.17× Chroma's add at 100,000
memories). Chroma cannot test that string, so tag filters are applied by the keyword
index: the vector leg asks Chroma with the rest of the filter and keeps the hits that
pass all of it, and a delete by filter checks the records Chroma returns. Stores that
earlier versions wrote with arrays are read as they are.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import chromadb

from hybrid_memory import HybridMemory
from hybrid_memory._model.records import CREATED_KEY, TAGS_KEY, UPDATED_KEY

from ..conftest import HashEmbedding


def _texts(n: int) -> list[str]:
    words = ["wing", "flow", "shock", "layer", "heat", "jet", "nozzle", "panel", "cone"]
    return [
        " ".join(words[(i * 5 + j) % len(words)] for j in range(i % 4 + 2)) + f" n{i}"
        for i in range(n)
    ]


def test_tags_are_written_as_one_json_string(
    store_and_collection: tuple[HybridMemory, Any],
) -> None:
    memory, collection = store_and_collection
    memory.add("Zoë flew to 東京", id="m", tags=["Travel", "new york", "東京"])
    stored = collection.get(ids=["m"], include=["metadatas"])["metadatas"][0]
    assert json.loads(stored[TAGS_KEY]) == ["travel", "new york", "東京"]
    memory.update("m", tags=[])
    stored = collection.get(ids=["m"], include=["metadatas"])["metadatas"][0]
    assert TAGS_KEY not in stored
    assert memory.get("m").tags == ()


def test_update_and_upsert_replace_tags_and_metadata_in_the_collection(
    memory: HybridMemory,
) -> None:
    # Chroma's upsert keeps the metadata keys it is not given: what a memory no longer
    # has must be removed from the record, or it returns when the index is rebuilt.
    memory.add("first", id="m", tags=["a"], metadata={"user": "x", "n": 1})
    memory.update("m", metadata={"user": "y"})
    assert memory.get("m").metadata == {"user": "y"}  # read from the collection
    memory.add_many([{"text": "second", "id": "m", "metadata": {"n": 2}}], upsert=True)
    again = memory.get("m")
    assert (again.text, again.tags, again.metadata) == ("second", (), {"n": 2})
    memory.sync(full=True)  # every memory read again from the collection
    assert memory.count({"user": "y"}) == 0 and memory.count({"tags": {"$contains": "a"}}) == 0
    assert memory.count({"n": 2}) == 1


def test_broad_tag_filters_keep_the_vector_legs_depth(
    memory: HybridMemory, filter_paths: Any
) -> None:
    # Every filter resolved as broad: Chroma runs the tag-free part, and the vector leg
    # must still return the k nearest memories passing the whole filter, however far
    # from the query they lie (the rare tag sits on the memories least like it).
    texts = _texts(240)
    memory.add_many(
        [
            {
                "text": text,
                "id": f"m{i}",
                "tags": ["rare"] if i % 40 == 7 else (["even"] if i % 2 == 0 else []),
                "metadata": {"user": f"u{i % 3}", "n": i},
            }
            for i, text in enumerate(texts)
        ]
    )
    filters = [
        {"tags": {"$contains": "even"}},
        {"tags": {"$contains": "rare"}},
        {"tags": {"$not_contains": "even"}},
        {"user": "u1", "tags": {"$contains": "even"}},
        {"$or": [{"user": "u2"}, {"tags": {"$contains": "rare"}}]},
        {"$or": [{"n": {"$lt": 3}}, {"user": "u0", "tags": {"$contains": "rare"}}]},
    ]
    query = texts[8]
    reference = {}
    for where in filters:  # narrow: the vector leg compares every passing memory
        hits = memory.search(query, alpha=1.0, k=10, filter=where)
        reference[str(where)] = [h.id for h in hits]
        expected = min(10, memory.count(where))
        assert len(hits) == expected, where
    filter_paths(narrow_filter=0)
    for where in filters:
        hits = memory.search(query, alpha=1.0, k=10, filter=where)
        assert {h.id for h in hits} == set(reference[str(where)]), where
        assert all("vector" in h.ranks for h in hits)
    rare = memory.search("anything", alpha=1.0, k=10, filter={"tags": {"$contains": "rare"}})
    assert sorted(h.id for h in rare) == sorted(f"m{i}" for i in range(7, 240, 40))


def test_the_vector_leg_asks_for_more_when_the_tagged_memories_lie_far(
    memory: HybridMemory, filter_paths: Any
) -> None:
    # Half the memories carry the tag, but none is among the query's nearest: the
    # first ask (twice the depth and a margin) finds none, so the leg asks again.
    memory.add_many(
        [{"text": f"shock layer heat n{i}", "id": f"near{i}"} for i in range(120)]
        + [
            {"text": f"nozzle cone panel n{i}", "id": f"far{i}", "tags": ["far"]}
            for i in range(120)
        ]
    )
    filter_paths(narrow_filter=0)
    narrow = memory.with_settings(candidates=10)
    hits = narrow.search("shock layer heat", alpha=1.0, k=10, filter={"tags": {"$contains": "far"}})
    assert len(hits) == 10
    assert all(h.id.startswith("far") and "vector" in h.ranks for h in hits)


def test_delete_by_tag_filters(memory: HybridMemory) -> None:
    memory.add_many(
        [
            {"text": "a", "id": "a", "tags": ["x"], "metadata": {"user": "u"}},
            {"text": "b", "id": "b", "tags": ["x", "y"], "metadata": {"user": "v"}},
            {"text": "c", "id": "c", "tags": ["y"], "metadata": {"user": "u"}},
            {"text": "d", "id": "d", "metadata": {"user": "u"}},
            {"text": "e", "id": "e", "tags": ["xy"], "metadata": {"user": "v"}},
        ]
    )
    assert memory.delete(filter={"tags": {"$contains": "nothing"}}) == 0
    assert memory.delete(filter={"user": "u", "tags": {"$contains": "x"}}) == 1  # a
    assert memory.delete(filter={"$or": [{"user": "w"}, {"tags": {"$contains": "y"}}]}) == 2
    assert sorted(m.id for m in memory.get_many(["d", "e"])) == ["d", "e"]
    assert memory.count() == 2
    assert memory.delete(filter={"tags": {"$not_contains": "xy"}}) == 1  # d
    assert [h.id for h in memory.search("e", k=5)] == ["e"]
    assert memory.tags() == ["xy"]


def test_a_store_written_with_tag_arrays_reads_filters_and_rewrites(tmp_path: Path) -> None:
    # Earlier versions kept tags as a Chroma metadata array.
    embedding = HashEmbedding()
    HybridMemory(tmp_path, embedding=embedding).close()  # the collection, as created
    client = chromadb.PersistentClient(path=str(tmp_path))
    collection = client.get_collection("hybrid_memory")
    texts = ["alice likes dark mode", "bob likes tea", "carol plays chess"]
    collection.add(
        ids=["a", "b", "c"],
        embeddings=embedding(texts),
        documents=texts,
        metadatas=[
            {TAGS_KEY: ["alice", "ui"], CREATED_KEY: 1.0, UPDATED_KEY: 1.0, "user": "a"},
            {TAGS_KEY: ["bob"], CREATED_KEY: 2.0, UPDATED_KEY: 2.0, "user": "b"},
            {CREATED_KEY: 3.0, UPDATED_KEY: 3.0, "user": "c"},
        ],
    )
    del client, collection
    with HybridMemory(tmp_path, embedding=embedding) as store:
        assert store.get("a").tags == ("alice", "ui")
        assert store.tags() == ["alice", "bob", "ui"]
        ui = {"tags": {"$contains": "ui"}}
        assert [h.id for h in store.search("likes", alpha=1.0, filter=ui)] == ["a"]
        store.update("b", tags=["bob", "tea"])
        collection = chromadb.PersistentClient(path=str(tmp_path)).get_collection("hybrid_memory")
        stored = collection.get(ids=["b"], include=["metadatas"])["metadatas"][0]
        assert json.loads(stored[TAGS_KEY]) == ["bob", "tea"]
        assert store.count({"tags": {"$contains": "tea"}}) == 1
        assert store.delete(filter={"tags": {"$contains": "alice"}}) == 1
        assert sorted(m.id for m in store.get_many(["b", "c"])) == ["b", "c"]
        assert store.count() == 2


def test_a_tags_value_not_written_by_hybrid_memory_is_kept_as_one_tag(
    store_and_collection: tuple[HybridMemory, Any], hash_embedding: HashEmbedding
) -> None:
    memory, collection = store_and_collection
    collection.add(
        ids=["raw"],
        embeddings=hash_embedding(["raw"]),
        documents=["raw"],
        metadatas=[{TAGS_KEY: "not json", CREATED_KEY: 1.0, UPDATED_KEY: 1.0}],
    )
    assert memory.get("raw").tags == ("not json",)
