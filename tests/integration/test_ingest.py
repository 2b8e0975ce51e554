"""Bulk ingest against real embedded Chroma: the keyword index is written beside Chroma's
add, per Chroma batch, and keeps only what Chroma took (docs/architecture.md, "The one
rule of state"). Chroma's failures here are real ones (a deleted collection) or are
injected into the real collection the store writes to, handed to it by a plain
``chromadb`` client; what the index holds is read through the public API."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import chromadb
import pytest

from hybrid_memory import HybridMemory, InvalidInputError, StoreError

from ..conftest import HashEmbedding, chroma_ids, index_ids, indexed
from ..unit.test_postings import assert_same

INDEX = "keyword-hybrid_memory.sqlite3"  # where a store on a path keeps its keyword index


class ChromaWithFaults:
    """A plain ``chromadb`` client on a store's path, passed as the store's ``client``:
    it hands the store the real collection (kept here as ``collection``, so a test can
    replace one of its methods to inject a failure) and can report a smaller batch size
    than Chroma's, so that a few memories make several Chroma batches."""

    def __init__(self, path: Path, max_batch: int | None = None) -> None:
        self.client = chromadb.PersistentClient(path=str(path))
        self.max_batch = max_batch
        self.collection: Any = None

    def get_max_batch_size(self) -> int:
        return self.max_batch or int(self.client.get_max_batch_size())

    def get_or_create_collection(self, *args: Any, **kwargs: Any) -> Any:
        self.collection = self.client.get_or_create_collection(*args, **kwargs)
        return self.collection

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


class QueryEmbedding(HashEmbedding):
    """The cheap embedding, which can be made to fail (a remote model that is down):
    a search then comes from the keyword and tag legs alone, answered by the index."""

    down = False

    def __call__(self, texts: list[str]) -> list[list[float]]:
        if self.down:
            raise ConnectionError("the embedding service is down (injected)")
        return super().__call__(texts)


def open_store(path: Path, **kw: Any) -> HybridMemory:
    kw.setdefault("embedding", HashEmbedding())
    if "client" in kw:  # the index file where a store on the path keeps it
        kw["index_path"] = str(path / INDEX)
    else:
        kw["path"] = path
    return HybridMemory(embedding_name="test-hash-64", sync_interval=3600, **kw)


def items(words: list[str]) -> list[dict[str, Any]]:
    return [
        {"text": f"memory about {word}", "tags": [word], "metadata": {"n": i}}
        for i, word in enumerate(words)
    ]


def keyword_leg(store: HybridMemory, query: str) -> list[tuple[str, float]]:
    """The keyword leg's ranking of ``query`` as the hits show it: ``[(id, BM25)]``.

    The store is small, so every memory the leg ranks is a hit: its ranks have no gap,
    or the leg ranked something the store does not hold."""
    hits = [h for h in store.search(query, k=20) if "keyword" in h.ranks]
    hits.sort(key=lambda h: h.ranks["keyword"])
    assert [h.ranks["keyword"] for h in hits] == list(range(1, len(hits) + 1)), query
    return [(h.id, h.scores["keyword"]) for h in hits]


def replace(collection: Any, operation: str, make: Callable[[Any], Any]) -> Any:
    """Put ``make(real method)`` in place of one of the collection's methods; returns the
    real one."""
    real = getattr(collection, operation)
    setattr(collection, operation, make(real))
    return real


def test_a_batch_chroma_rejects_mid_ingest_is_in_neither(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="hybrid_memory")
    chroma = ChromaWithFaults(tmp_path, max_batch=3)  # small Chroma batches
    store = open_store(tmp_path, client=chroma)
    store.add("memory about warmup")
    store.search("warmup")  # the in-memory postings exist: they must follow the commits
    batch = items(["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf"])
    # Input Chroma would refuse is now refused before any write, so the refusal of the
    # second batch of three is injected: real Chroma takes the first, then raises.
    calls = []

    def add_then_refuse(real_add: Callable[..., None]) -> Callable[..., None]:
        def add(**kwargs: object) -> None:
            calls.append(1)
            if len(calls) == 2:
                raise ValueError("Expected metadata list values to be of one type (injected)")
            real_add(**kwargs)

        return add

    real_add = replace(chroma.collection, "add", add_then_refuse)
    with pytest.raises(StoreError, match="Chroma add failed"):
        store.add_many(batch)
    chroma.collection.add = real_add
    assert len(chroma_ids(tmp_path)) == 4  # warmup + the first batch
    # The index holds exactly the collection's ids: nothing for a sync to repair.
    assert index_ids(store) == chroma_ids(tmp_path)
    for word in ("alpha", "bravo", "charlie"):
        assert [h.text for h in store.search(word, k=1)] == [f"memory about {word}"]
        assert keyword_leg(store, word)
    for word in ("delta", "echo", "foxtrot", "golf"):
        assert keyword_leg(store, word) == []
        # A memory of that batch would match all three words and rank first, ahead of
        # the four the store holds, ranked 1 to 4.
        assert len(keyword_leg(store, f"memory about {word}")) == 4
    assert "delta" not in store.tags() and "alpha" in store.tags()
    queries = ("memory about", "alpha delta", "warmup golf")
    live = {query: keyword_leg(store, query) for query in queries}
    # The index needed no repair on the way (a rebuild logs a warning): what it and its
    # in-memory postings hold is what was committed.
    assert caplog.records == []
    store.close()
    with open_store(tmp_path) as reopened:
        assert index_ids(reopened) == chroma_ids(tmp_path)
        assert len(reopened) == 4
        # The live store's BM25 (its in-memory postings, kept in step with the commits)
        # ranks and scores as a store reading the committed index file afresh does.
        for query in queries:
            assert_same(live[query], keyword_leg(reopened, query))


def test_a_deleted_collection_fails_the_add_and_indexes_nothing(tmp_path: Path) -> None:
    embedding = QueryEmbedding()
    store = open_store(tmp_path, embedding=embedding)
    store.add("memory about warmup")  # the dimension is recorded: the next write is the add
    chromadb.PersistentClient(path=str(tmp_path)).delete_collection("hybrid_memory")
    # The add's look for near-duplicates (a Chroma query) or the add itself fails.
    with pytest.raises(StoreError, match=r"Chroma (query|add) failed"):
        store.add_many(items(["alpha", "bravo"]))
    assert [m.text for m in indexed(store)] == ["memory about warmup"]
    assert store.tags() == []
    # Without a query embedding, a search is answered from the index alone (Chroma,
    # deleted, cannot answer): the keyword leg knows the warmup and nothing else.
    embedding.down = True
    result = store.search("memory about alpha")
    assert result.fallback_mode
    assert [h.text for h in result] == ["memory about warmup"]
    assert store.search("alpha").fallback_mode and list(store.search("alpha")) == []
    store.close()


def test_nothing_is_visible_in_the_index_before_chroma_took_it(tmp_path: Path) -> None:
    chroma = ChromaWithFaults(tmp_path)
    store = open_store(tmp_path, client=chroma)
    store.add("memory about warmup")
    seen: list[int] = []

    def watching(real_add: Callable[..., None]) -> Callable[..., None]:
        def add(**kwargs: object) -> None:
            # Another connection reads the index file while the index write is under way
            # beside Chroma's (the file's table of memories: this test's one look inside).
            with sqlite3.connect(tmp_path / INDEX) as other:
                seen.append(other.execute("SELECT COUNT(*) FROM memories").fetchone()[0])
            real_add(**kwargs)

        return add

    replace(chroma.collection, "add", watching)
    store.add_many(items(["alpha", "bravo", "charlie"]))
    assert seen == [1]
    assert len(indexed(store)) == 4
    store.close()


def test_an_add_whose_answer_is_lost_after_chroma_took_the_rows_stands(
    tmp_path: Path,
) -> None:
    chroma = ChromaWithFaults(tmp_path)
    store = open_store(tmp_path, client=chroma)

    # Chroma stores the memory, then its call raises (as a server whose answer is lost
    # would). An add either stores its memories and says so, or raises and stores
    # nothing: the store finds every record in the collection, so the add stands, and
    # the index holds it too (no sync needed) with its ranks on every leg.
    def add_then_fail(real_add: Callable[..., None]) -> Callable[..., None]:
        def add(**kwargs: object) -> None:
            real_add(**kwargs)
            raise ConnectionError("the answer was lost after the write (injected)")

        return add

    real_add = replace(chroma.collection, "add", add_then_fail)
    memory_id = store.add("memory about a huge number", metadata={"n": 2**40})
    chroma.collection.add = real_add
    assert chroma_ids(tmp_path) == {memory_id} and index_ids(store) == chroma_ids(tmp_path)
    hits = store.search("huge number", k=1)
    assert [h.id for h in hits] == [memory_id] and {"vector", "keyword"} <= set(hits[0].ranks)
    store.close()


class FailingOnce(HashEmbedding):
    """The cheap embedding, which fails once when asked to embed ``poison`` (a model
    that runs out of memory part-way through a large call), and records how many texts
    each call was given."""

    def __init__(self, poison: str) -> None:
        super().__init__()
        self.poison = poison
        self.failed = False
        self.sizes: list[int] = []

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.sizes.append(len(texts))
        if not self.failed and self.poison in texts:
            self.failed = True
            raise MemoryError("the model ran out of memory (injected)")
        return super().__call__(texts)


def test_a_large_call_is_embedded_and_written_one_batch_at_a_time(tmp_path: Path) -> None:
    """add_many embeds and writes one Chroma batch before embedding the next, so a call of
    a million memories holds one batch's vectors, not a million. A failure part-way
    leaves the earlier batches stored, and the same call again stores the rest, once."""
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    batch = items(words)
    embedding = FailingOnce(poison="memory about echo")  # in the second batch of three
    chroma = ChromaWithFaults(tmp_path, max_batch=3)
    store = open_store(tmp_path, client=chroma, embedding=embedding)
    with pytest.raises(Exception, match="ran out of memory"):
        store.add_many(batch)
    assert max(embedding.sizes) <= 3  # never more than one Chroma batch at once
    assert sorted(store.get(i).text for i in index_ids(store)) == [
        f"memory about {w}" for w in ("alpha", "bravo", "charlie")
    ]
    assert index_ids(store) == chroma_ids(tmp_path)
    ids = store.add_many(batch)  # again: the first three are found by content
    assert len(set(ids)) == len(words) and store.count() == len(words)
    assert index_ids(store) == chroma_ids(tmp_path) == set(ids)
    for word in words:
        assert [h.text for h in store.search(word, k=1)] == [f"memory about {word}"]
    store.close()


class CountingItems(Sequence[dict[str, Any]]):
    """``add_many``'s items, counting how often the store reads each one."""

    def __init__(self, given: list[dict[str, Any]]) -> None:
        self.given = given
        self.reads = [0] * len(given)

    def __len__(self) -> int:
        return len(self.given)

    def __getitem__(self, position: int) -> dict[str, Any]:  # type: ignore[override]
        self.reads[position] += 1
        return self.given[position]


def test_the_first_memories_of_a_call_are_validated_once_the_rest_again_per_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call keeps the first ``KEPT_VALIDATED`` memories it validated and validates the
    rest again as their batches are written (a million-memory call holds ids and hashes,
    not a million validated copies); either way every memory is stored as given."""
    from hybrid_memory._model.inputs import PendingMemories

    monkeypatch.setattr(PendingMemories, "KEPT_VALIDATED", 3)
    store = open_store(tmp_path, client=ChromaWithFaults(tmp_path, max_batch=2))
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf"]
    given = CountingItems(items(words))
    ids = store.add_many(given)
    assert given.reads == [1, 1, 1, 2, 2, 2, 2]
    stored = {m.id: m for m in store.get_many(ids)}
    for memory_id, item in zip(ids, given.given, strict=True):
        memory = stored[memory_id]
        assert (memory.text, list(memory.tags), memory.metadata) == (
            item["text"],
            item["tags"],
            item["metadata"],
        )
    assert index_ids(store) == chroma_ids(tmp_path) == set(ids)
    # A bad item past the kept ones is still refused before anything is written.
    bad = CountingItems(items(["hotel", "india", "juliet", "kilo"]))
    bad.given[3]["metadata"] = {"n": [1, "two"]}
    with pytest.raises(InvalidInputError, match=r"items\[3\]\.metadata"):
        store.add_many(bad)
    assert index_ids(store) == chroma_ids(tmp_path) == set(ids)
    store.close()
