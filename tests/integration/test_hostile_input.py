"""Regression tests for issue 16: input that used to escape the library's own errors,
half-write a memory, or break reads of the whole store; and a damaged keyword index.

Every refusal is checked to change nothing stored (count and a get of what was there).
"""

from __future__ import annotations

import logging
import math
import os
import time
from datetime import datetime, timezone
from pathlib import Path

import chromadb
import pytest

from hybrid_memory import HybridMemory, InvalidInputError, MemoryNotFoundError

from ..conftest import HashEmbedding


def open_store(path: Path, **settings: object) -> HybridMemory:
    return HybridMemory(
        path=path, embedding=HashEmbedding(), embedding_name="test-hash-64", **settings
    )


def snapshot(store: HybridMemory) -> tuple[int, list[tuple[str, str, tuple[str, ...], dict]]]:
    ids = sorted(h.id for h in store.search("seed memory", k=50, alpha=0.0))
    return store.count(), [(m.id, m.text, m.tags, m.metadata) for m in store.get_many(ids)]


@pytest.fixture
def seeded(memory: HybridMemory) -> HybridMemory:
    memory.add("seed memory one", id="s1", tags=["seed"], metadata={"n": 1, "l": ["a", "b"]})
    memory.add("seed memory two", id="s2", tags=["seed"], metadata={"n": 2, "s": "text"})
    return memory


def refused(store: HybridMemory, field: str, call, *args, **kwargs) -> InvalidInputError:
    before = snapshot(store)
    with pytest.raises(InvalidInputError) as info:
        call(*args, **kwargs)
    assert field in str(info.value), str(info.value)
    assert snapshot(store) == before
    return info.value


# --- 1. times ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [1e20, -1e12, math.nan, math.inf, -math.inf, 10**400, 253402300800, "10000-01-01"],
    ids=repr,
)
def test_created_at_outside_years_1_to_9999_is_refused(seeded: HybridMemory, value) -> None:
    error = refused(seeded, "created_at", seeded.add, "a new memory", created_at=value)
    if not isinstance(value, str):
        assert "0001-01-01" in str(error) and "9999-12-31" in str(error)
    refused(
        seeded,
        "items[1].created_at",
        seeded.add_many,
        ["fine", {"text": "bad", "created_at": value}],
    )


def test_created_at_at_the_bounds_round_trips(memory: HybridMemory) -> None:
    low = memory.add("the oldest", created_at=-62135596800)
    high = memory.add("the newest", created_at="9999-12-31T23:59:59Z")
    assert memory.get(low).created_at == datetime(1, 1, 1, tzinfo=timezone.utc)
    assert memory.get(high).created_at == datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc)
    assert {h.id for h in memory.search("the oldest newest", k=5)} == {low, high}


def test_search_now_must_be_a_finite_time(seeded: HybridMemory) -> None:
    for bad in (math.nan, math.inf, 1e300):
        refused(seeded, "now", seeded.search, "seed", now=bad)
    assert seeded.search("seed", now=0)


def test_times_an_older_version_stored_out_of_range_do_not_break_reads(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.add("a normal memory about gardens", id="ok")
    # Older versions accepted any number: write such records the way they did.
    collection = chromadb.PersistentClient(path=str(tmp_path)).get_collection("hybrid_memory")
    now = time.time()
    for memory_id, created in (("future", 1e20), ("past", -1e12)):
        collection.upsert(
            ids=[memory_id],
            embeddings=HashEmbedding()([f"a {memory_id} memory about gardens"]),
            documents=[f"a {memory_id} memory about gardens"],
            metadatas=[{"hm:created_at": created, "hm:updated_at": now}],
        )
    with open_store(tmp_path, recency_decay=0.01) as store:
        hits = store.search("memory about gardens", k=5)
        assert {h.id for h in hits} == {"ok", "future", "past"}
        by_id = {m.id: m for m in store.get_many(["ok", "future", "past"])}
        assert by_id["future"].created_at is None and by_id["past"].created_at is None
        assert by_id["ok"].created_at is not None
        assert {h.id for h in store.related("ok", k=5)} == {"future", "past"}
        store.delete("future")  # and they can be fixed through the API
        store.update("past", text="a past memory about gardens, dated")
        assert store.count() == 2


# --- 3. metadata the keyword index cannot hold ------------------------------------------


@pytest.mark.parametrize("value", [2**64, 2**63, -(2**63) - 1, [1, 2**70]], ids=repr)
def test_ints_beyond_64_bits_are_refused_before_anything_is_written(
    seeded: HybridMemory, value
) -> None:
    refused(seeded, "metadata['v']", seeded.add, "big number", id="big", metadata={"v": value})
    # Nothing half-written: the same id is free, and the memory is found on every leg.
    seeded.add("big number", id="big", metadata={"v": 2**63 - 1, "w": -(2**63)})
    got = seeded.get("big")
    assert got.metadata == {"v": 2**63 - 1, "w": -(2**63)}
    assert isinstance(got.metadata["v"], int)
    assert seeded.count({"v": 2**63 - 1}) == 1
    assert [h.id for h in seeded.search("big number", alpha=0.0, k=1)] == ["big"]


@pytest.mark.parametrize(
    "value",
    [[1, 2.5], [1.5, 2], [True, 1], ["a", 1], [1.0, math.nan], []],
    ids=repr,
)
def test_metadata_lists_mixing_types_are_refused_as_chroma_would(
    seeded: HybridMemory, value
) -> None:
    refused(seeded, "metadata['v']", seeded.add, "a list", metadata={"v": value})
    refused(seeded, "metadata['v']", seeded.update, "s1", metadata={"v": value})


def test_metadata_lists_of_one_type_are_stored(memory: HybridMemory) -> None:
    memory.add("lists", id="x", metadata={"i": [1, 2], "f": [1.5, 2.0], "b": [True], "s": ["a"]})
    assert memory.get("x").metadata == {"i": [1, 2], "f": [1.5, 2.0], "b": [True], "s": ["a"]}
    assert memory.count({"f": {"$contains": 2.0}}) == 1


# --- 5. strings no store can hold, ids of the wrong type, filters ----------------------


LONE = "bad \ud800 text"


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("text", {"text": LONE}),
        ("id", {"text": "ok", "id": LONE}),
        ("tags", {"text": "ok", "tags": [LONE]}),
        ("metadata", {"text": "ok", "metadata": {LONE: 1}}),
        ("metadata['k']", {"text": "ok", "metadata": {"k": LONE}}),
        ("metadata['k']", {"text": "ok", "metadata": {"k": ["a", LONE]}}),
    ],
)
def test_lone_surrogates_are_refused_on_add(seeded: HybridMemory, field: str, kwargs) -> None:
    text = kwargs.pop("text")
    refused(seeded, field, seeded.add, text, **kwargs)


def test_lone_surrogates_are_refused_everywhere_else(seeded: HybridMemory) -> None:
    refused(seeded, "query", seeded.search, LONE)
    refused(seeded, "tags", seeded.search, "seed", tags=[LONE])
    refused(seeded, "filter", seeded.search, "seed", filter={"n": LONE})
    refused(seeded, "filter", seeded.search, "seed", filter={LONE: 1})
    refused(seeded, "filter", seeded.count, {"tags": {"$contains": LONE}})
    refused(seeded, "text", seeded.update, "s1", text=LONE)
    refused(seeded, "ids", seeded.delete, [LONE])
    refused(seeded, "ids", seeded.get_many, ["s1", LONE])


def test_other_unicode_is_stored_and_found(memory: HybridMemory) -> None:
    texts = ["nul \x00 inside", "עברית RTL text", "e\u0301 combining", "emoji 🧠 memory"]
    ids = [memory.add(t, tags=[t.split()[0]], metadata={"t": t}) for t in texts]
    for memory_id, text in zip(ids, texts, strict=True):
        got = memory.get(memory_id)
        assert got.text == text and got.metadata == {"t": text}
        assert memory.count({"t": text}) == 1


@pytest.mark.parametrize("ids", [5, b"s1", 1.5, {"s1": 1}, None, [5], [b"s1"]], ids=repr)
def test_delete_and_get_many_take_ids_only(seeded: HybridMemory, ids) -> None:
    if ids is not None:
        refused(seeded, "ids", seeded.delete, ids)
    refused(seeded, "ids", seeded.get_many, ids)


def test_get_many_of_no_ids_is_empty(seeded: HybridMemory) -> None:
    assert seeded.get_many([]) == []
    assert seeded.get_many(()) == []
    assert seeded.delete([]) == 0
    with pytest.raises(MemoryNotFoundError):
        seeded.get_many(["nope"])


def test_a_deeply_nested_filter_is_refused(seeded: HybridMemory) -> None:
    deep: dict = {"n": 1}
    for _ in range(1000):
        deep = {"$and": [deep]}
    error = refused(seeded, "filter", seeded.search, "seed", filter=deep)
    assert "32" in str(error)
    refused(seeded, "filter", seeded.count, deep)
    refused(seeded, "filter", seeded.delete, filter=deep)
    nested: dict = {"n": 1}
    for _ in range(31):
        nested = {"$or": [nested, {"n": 99}]}
    assert seeded.count(nested) == 1


def test_contains_on_a_single_valued_field_is_an_error_not_silence(seeded: HybridMemory) -> None:
    error = refused(seeded, "filter", seeded.search, "seed", filter={"s": {"$contains": "tex"}})
    assert "'s' holds single values" in str(error) and "$eq" in str(error)
    refused(seeded, "filter", seeded.count, {"s": {"$not_contains": "x"}})
    refused(seeded, "filter", seeded.delete, filter={"n": {"$contains": 1}})
    refused(seeded, "filter", seeded.list_memories, {"s": {"$contains": "tex"}})
    # On a list field, and on a field nobody stores, it is list membership as in Chroma.
    assert seeded.count({"l": {"$contains": "a"}}) == 1
    assert seeded.count({"missing": {"$contains": "a"}}) == 0
    assert [h.id for h in seeded.search("seed", filter={"l": {"$contains": "b"}})] == ["s1"]


# --- 2. a damaged keyword index -----------------------------------------------------------


def _damage(index: Path, how: str) -> None:
    data = index.read_bytes()
    rng = __import__("random").Random(len(data))
    if how == "truncated":
        index.write_bytes(data[: len(data) // 2])
    elif how == "random":
        index.write_bytes(bytes(rng.randrange(256) for _ in range(len(data))))
    elif how == "header":
        index.write_bytes(b"garbage header!!" * 8 + data[128:])
    elif how == "middle":
        middle = len(data) // 2
        index.write_bytes(data[:middle] + os.urandom(8192) + data[middle + 8192 :])
    elif how == "emptied":
        index.write_bytes(b"")
    elif how == "deleted":
        index.unlink()
    else:  # pragma: no cover
        raise AssertionError(how)


DAMAGE = ["truncated", "random", "header", "middle", "emptied", "deleted"]


def _fill(store: HybridMemory, n: int = 120) -> None:
    store.add_many(
        [
            {
                "text": f"memory {i} about topic{i % 7} and item{i}",
                "tags": [f"t{i % 5}"],
                "metadata": {"i": i},
            }
            for i in range(n)
        ]
    )


@pytest.mark.parametrize("how", DAMAGE)
def test_a_damaged_index_is_rebuilt_on_open(
    tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    with open_store(tmp_path) as store:
        _fill(store)
    _damage(tmp_path / "keyword-hybrid_memory.sqlite3", how)
    with caplog.at_level(logging.WARNING, logger="hybrid_memory"), open_store(tmp_path) as store:
        assert store.count() == 120 and store.count({"i": {"$gte": 60}}) == 60
        assert [h.id for h in store.search("item77", alpha=0.0, k=1)] == [
            store.search("item77", k=1)[0].id
        ]
        assert store.get(store.search("item77", alpha=0.0, k=1)[0].id).metadata == {"i": 77}
        assert sorted(store.tags()) == ["t0", "t1", "t2", "t3", "t4"]
    if how not in ("deleted", "emptied"):
        assert "damaged" in caplog.text and "rebuilding" in caplog.text


@pytest.mark.parametrize("how", DAMAGE)
def test_an_index_damaged_under_an_open_store_is_rebuilt(tmp_path: Path, how: str) -> None:
    with open_store(tmp_path, sync_interval=0) as store:
        _fill(store)
        _damage(tmp_path / "keyword-hybrid_memory.sqlite3", how)
        # The open store answers, writes, and a new one opening the path meanwhile too.
        assert store.search("item42", alpha=0.0, k=1)[0].text.endswith("item42")
        new = store.add("added after the damage, zebra", tags=["late"])
        with open_store(tmp_path, sync_interval=0) as other:
            assert other.count() == 121
            assert other.search("zebra", alpha=0.0, k=1)[0].id == new
        assert store.search("zebra", alpha=0.0, k=1)[0].id == new
        assert store.count({"i": {"$lt": 10}}) == 10


def test_a_repeated_id_is_read_and_deleted_once(seeded: HybridMemory) -> None:
    # Found by the property tests: Chroma refuses a repeated id in one get.
    assert [m.id for m in seeded.get_many(["s1", "s2", "s1"])] == ["s1", "s2", "s1"]
    assert seeded.delete(["s1", "s1"]) == 1 and seeded.count() == 1
