"""Writes say what they did (added, duplicate, replaced; deleted ids; not found), decided
by the writer under its lock: two writers of one text are never both told "added"."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from hybrid_memory import (
    AddResult,
    DeleteReport,
    HybridMemory,
    MemoryNotFoundError,
    WriteReport,
)

from ..conftest import HashEmbedding


def test_add_says_added_then_duplicate(memory: HybridMemory) -> None:
    first = memory.add("Alice prefers dark mode", tags=["ui"])
    again = memory.add("Alice prefers dark mode", tags=["ui"])
    assert isinstance(first, AddResult) and first.outcome == "added"
    assert again.outcome == "duplicate" and again == first
    assert memory.count() == 1


def test_other_metadata_or_allow_duplicates_adds(memory: HybridMemory) -> None:
    first = memory.add("Alice prefers dark mode", metadata={"user": "alice"})
    other = memory.add("Alice prefers dark mode", metadata={"user": "bob"})
    copy = memory.add("Alice prefers dark mode", metadata={"user": "alice"}, allow_duplicates=True)
    # Not duplicates: stored. The same words all the same: reported similar to the first.
    assert (first.outcome, other.outcome, copy.outcome) == ("added", "similar", "similar")
    assert other.stored and copy.stored and other.similar[0] == (first, pytest.approx(1.0))
    assert len({first, other, copy}) == 3


def test_an_id_is_added_then_replaced_with_upsert(memory: HybridMemory) -> None:
    assert memory.add("first text", id="k").outcome == "added"
    replaced = memory.add("second text", id="k", upsert=True)
    assert (replaced, replaced.outcome) == ("k", "replaced")
    assert memory.get("k").text == "second text"
    # upsert of an id that does not exist adds it
    assert memory.add("third", id="new", upsert=True).outcome == "added"


def test_add_many_reports_each_item(memory: HybridMemory) -> None:
    stored = memory.add("already stored")
    memory.add("kept under an id", id="k")
    report = memory.add_many(
        [
            "a new fact",
            "already stored",
            {"text": "replacing", "id": "k"},
            "a new fact",  # a repeat of an earlier item of this call
            {"text": "mine", "id": "fresh"},
        ],
        upsert=True,
    )
    assert isinstance(report, WriteReport)
    new = report[0]
    assert report == [new, stored, "k", new, "fresh"]
    assert [r.outcome for r in report.results] == [
        "added",
        "duplicate",
        "replaced",
        "duplicate",
        "added",
    ]
    assert report.added == (new, "fresh")
    assert report.duplicates == (stored, new)
    assert report.replaced == ("k",)
    assert report.written == 3
    assert memory.count() == 4


def test_a_repeated_id_in_one_upsert_call_is_added_then_replaced(memory: HybridMemory) -> None:
    report = memory.add_many([{"text": "one", "id": "k"}, {"text": "two", "id": "k"}], upsert=True)
    assert [r.outcome for r in report.results] == ["added", "replaced"]
    assert memory.get("k").text == "two" and memory.count() == 1


def test_delete_reports_the_ids(memory: HybridMemory) -> None:
    ids = memory.add_many([{"text": f"note {i}", "metadata": {"n": i}} for i in range(4)])
    by_id = memory.delete([ids[0], ids[1], ids[0]])
    assert isinstance(by_id, DeleteReport)
    assert (by_id, by_id.ids) == (2, (ids[0], ids[1]))
    by_filter = memory.delete(filter={"n": {"$gte": 3}})
    assert (by_filter, by_filter.ids) == (1, (ids[3],))
    none = memory.delete(filter={"n": 99})
    assert (none, none.ids) == (0, ())


def test_not_found_deletes_and_updates_nothing(memory: HybridMemory) -> None:
    kept = memory.add("kept")
    with pytest.raises(MemoryNotFoundError) as caught:
        memory.delete([kept, "missing"])
    assert caught.value.memory_id == "missing"
    with pytest.raises(MemoryNotFoundError):
        memory.update("missing", text="x")
    assert memory.existing([kept]) == {kept}


@pytest.mark.parametrize("round_", range(3))
def test_two_threads_adding_one_text_one_added_one_duplicate(tmp_path: Path, round_: int) -> None:
    """The writer decides under its lock: whichever thread comes second finds the first
    one's memory, whatever the scheduling."""
    store = HybridMemory(
        path=tmp_path / "store", embedding=HashEmbedding(), embedding_name="test-hash-64"
    )
    try:
        start = threading.Barrier(2)
        results: list[AddResult] = []
        errors: list[BaseException] = []

        def add() -> None:
            try:
                start.wait()
                results.append(store.add("the same text from two threads", tags=["race"]))
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=add) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not errors
        assert sorted(r.outcome for r in results) == ["added", "duplicate"]
        assert results[0] == results[1]
        assert store.count() == 1
    finally:
        store.close()
