"""Bulk ingest against real embedded Chroma: the keyword index is written beside Chroma's
add, per Chroma batch, and keeps only what Chroma took (docs/architecture.md, "The one
rule of state"). Chroma's failures here are real ones: input it rejects, a deleted collection."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from hybrid_memory import HybridMemory, StoreError
from hybrid_memory.keyword import query_words

from ..conftest import HashEmbedding
from ..unit.test_postings import assert_same


def open_store(path: Path, **kw: Any) -> HybridMemory:
    return HybridMemory(
        path, embedding=HashEmbedding(), embedding_name="test-hash-64", sync_interval=3600, **kw
    )


def items(words: list[str]) -> list[dict[str, Any]]:
    return [
        {"text": f"memory about {word}", "tags": [word], "metadata": {"n": i}}
        for i, word in enumerate(words)
    ]


def index_ids(store: HybridMemory) -> set[str]:
    return store._index.ids()


def chroma_ids(store: HybridMemory) -> set[str]:
    return set(store._collection.get(include=[])["ids"])


def test_a_batch_chroma_rejects_mid_ingest_is_in_neither(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.add("memory about warmup")
    store.search("warmup")  # the in-memory postings exist: they must follow the commits
    store._max_batch = lambda: 3  # type: ignore[method-assign]  # small Chroma batches
    batch = items(["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf"])
    # Input Chroma would refuse is now refused before any write, so the refusal of the
    # second batch of three is injected: real Chroma takes the first, then raises.
    real_add = store._collection.add
    calls = []

    def add_then_refuse(**kwargs: object) -> None:
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("Expected metadata list values to be of one type (injected)")
        real_add(**kwargs)

    store._collection.add = add_then_refuse
    with pytest.raises(StoreError, match="Chroma add failed"):
        store.add_many(batch)
    store._collection.add = real_add
    assert len(chroma_ids(store)) == 4  # warmup + the first batch
    assert index_ids(store) == chroma_ids(store)
    for word in ("alpha", "bravo", "charlie"):
        assert [h.text for h in store.search(word, k=1)] == [f"memory about {word}"]
        assert store._index.search(word, 5)
    for word in ("delta", "echo", "foxtrot", "golf"):
        assert store._index.search(word, 5) == []
    assert "delta" not in store.tags() and "alpha" in store.tags()
    for query in ("memory about", "alpha delta", "warmup golf"):
        words = query_words(query)
        reference = store._index.keywords.search_fts(words, 20, None)
        assert_same(store._index.search(query, 20), reference)
    assert not store._reconcile()  # nothing to repair
    store.close()
    with open_store(tmp_path) as reopened:
        assert index_ids(reopened) == chroma_ids(reopened)
        assert len(reopened) == 4


def test_a_deleted_collection_fails_the_add_and_indexes_nothing(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.add("memory about warmup")  # the dimension is recorded: the next write is the add
    store._client.delete_collection(store._collection_name)
    with pytest.raises(StoreError, match="Chroma add failed"):
        store.add_many(items(["alpha", "bravo"]))
    assert store._index.count() == 1
    assert store._index.search("alpha", 5) == []
    store.close()


def test_nothing_is_visible_in_the_index_before_chroma_took_it(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.add("memory about warmup")
    index_file = store._index.path
    assert index_file is not None
    seen: list[int] = []
    chroma = store._chroma

    def watching(operation: str, **kwargs: Any) -> Any:
        # Read by another connection while the index write is under way beside Chroma.
        with sqlite3.connect(index_file) as other:
            seen.append(other.execute("SELECT COUNT(*) FROM memories").fetchone()[0])
        return chroma(operation, **kwargs)

    store._chroma = watching  # type: ignore[method-assign]
    store.add_many(items(["alpha", "bravo", "charlie"]))
    assert seen == [1]
    assert store._index.count() == 4
    store.close()


def test_an_index_write_failing_after_chroma_took_the_rows_is_repaired_by_sync(
    tmp_path: Path,
) -> None:
    store = open_store(tmp_path)
    # Chroma stores the memory, then its call raises (as a server whose answer is lost
    # would): the index rolls its rows back, Chroma has the memory, the index does not,
    # and the next sync repairs that.
    real_add = store._collection.add

    def add_then_fail(**kwargs: object) -> None:
        real_add(**kwargs)
        raise ConnectionError("the answer was lost after the write (injected)")

    store._collection.add = add_then_fail
    with pytest.raises(StoreError, match="Chroma add failed"):
        store.add("memory about a huge number", metadata={"n": 2**40})
    store._collection.add = real_add
    assert len(chroma_ids(store)) == 1 and store._index.count() == 0
    store.sync()
    assert index_ids(store) == chroma_ids(store)
    assert [h.text for h in store.search("huge number", k=1)] == ["memory about a huge number"]
    store.close()
