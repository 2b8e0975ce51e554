"""``hybrid_memory.testing``, the seam the benchmarks and studies reach the library's inside
through: each name does what its study needs, on a real store. When the inside moves,
these fail before a study silently measures something else."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import chromadb
import pytest

from hybrid_memory import HybridMemory
from hybrid_memory import testing as seam

TEXTS = [
    ("a", "The river bridge opens at dawn", ["travel"], {"user": "alice"}),
    ("b", "Copper lanterns line the old harbor", ["travel", "city"], {"user": "bob"}),
    ("c", "The river floods the meadow in spring", [], {"user": "alice"}),
    ("d", "Granite walls and velvet curtains", ["home"], {"user": "bob"}),
]


@pytest.fixture
def store(memory: HybridMemory) -> HybridMemory:
    memory.add_many([{"id": i, "text": t, "tags": g, "metadata": m} for i, t, g, m in TEXTS])
    return memory


def test_the_keyword_leg_is_the_searchs(store: HybridMemory) -> None:
    leg = seam.keyword_leg(store, "river bridge", 10)
    assert [memory_id for memory_id, _ in leg] == ["a", "c"]
    hits = {h.id: h.scores.get("keyword") for h in store.search("river bridge", k=4)}
    assert dict(leg) == pytest.approx({i: hits[i] for i, _ in leg})
    assert [i for i, _ in seam.keyword_leg(store, "river", 10, {"user": "bob"})] == []
    with_stopwords = seam.keyword_leg(store, "the river", 10, drop_stopwords=False)
    assert {i for i, _ in with_stopwords} == {"a", "b", "c"}


def test_bm25_b_changes_the_scores_inside_the_block_only(store: HybridMemory) -> None:
    before = dict(seam.keyword_leg(store, "river", 10))
    with seam.keyword_bm25_b(1.0):
        inside = dict(seam.keyword_leg(store, "river", 10))
    assert dict(seam.keyword_leg(store, "river", 10)) == before
    assert inside != before and set(inside) == set(before)
    assert seam.BM25_B == 0.75 and seam.BM25_K1 == 1.2


def test_the_index_vocabulary(store: HybridMemory) -> None:
    assert seam.known_tags(store, "any travel plans?") == ("travel",)
    assert seam.text_words("The river's banks") == ["The", "river", "s", "banks"]
    assert seam.query_words("the river and the bridge") == ["river", "bridge"]
    assert "the" in seam.STOPWORDS
    assert seam.keyword_terms(store, ["Floods", "river"]) == [("flood",), ("river",)]
    lengths = seam.memory_lengths(store)
    assert sorted(lengths.tolist()) == sorted(float(len(seam.text_words(t))) for _, t, *_ in TEXTS)
    postings = {term: (ids, list(tfs)) for term, ids, tfs in seam.keyword_postings(store)}
    assert sorted(postings["river"][0]) == ["a", "c"] and postings["river"][1] == [1.0, 1.0]
    assert seam.bm25_idf(1, 4) > seam.bm25_idf(2, 4) > 0


def test_filters_and_tags_as_the_legs_read_them() -> None:
    assert seam.filter_matches({"user": "alice"}, {"user": "alice"})
    assert not seam.filter_matches({"tags": {"$contains": "Travel"}}, {}, ["city"])
    assert seam.filter_matches({"tags": {"$contains": "Travel"}}, {}, ["travel"])
    assert seam.filter_matches(None, {})
    assert seam.normalise_tag("  Travel ") == "travel"


def test_namespace_records_are_those_a_store_writes(tmp_path: Path, hash_embedding: Any) -> None:
    path = tmp_path / "store"
    with HybridMemory(path, embedding=hash_embedding, embedding_name="test-hash-64") as store:
        store.namespace("tenant-1").add("The river bridge opens at dawn", id="m1", tags=["x"])
    item = {"id": "m1", "text": "t", "tags": ["x"], "metadata": {}}
    name, ids, metadatas = seam.namespace_records("hybrid_memory", "tenant-1", [item], 0.0)
    stored = chromadb.PersistentClient(str(path)).get_collection(name).get(ids=ids)
    assert stored["ids"] == ids
    written = stored["metadatas"][0]
    assert set(written) == set(metadatas[0])
    timeless = {k: v for k, v in written.items() if isinstance(v, str)}
    assert timeless == {k: v for k, v in metadatas[0].items() if isinstance(v, str)}


def test_the_stages_of_a_search_are_timed_and_put_back(store: HybridMemory) -> None:
    searcher = type(store._parts.searcher)
    search = searcher.search
    with seam.timed_search_stages() as spent:
        store.search("river bridge")
    assert searcher.search is search
    assert set(spent) == {label for label, *_ in seam.SEARCH_STAGES + seam.SEARCH_PARTS}
    assert spent["total"] > 0 and spent["keyword leg"] > 0
    assert spent["total"] >= spent["keyword leg"]


def test_the_process_figures(store: HybridMemory) -> None:
    from hybrid_memory._process import heap

    with seam.timed_heap_trims() as trims:
        store.add_many([f"note {i}" for i in range(1_200)])
    assert trims[1] == (1 if heap.available() else 0)
    assert isinstance(seam.keyword_leg_path(), str)
    assert seam.NARROW_FILTER > 0


def test_the_sync_and_chroma_as_diagnostics_read_them(tmp_path: Path, hash_embedding: Any) -> None:
    with HybridMemory(
        tmp_path / "s", embedding=hash_embedding, embedding_name="test-hash-64"
    ) as store:
        memory_id = store.add("The river bridge opens at dawn")
        assert seam.owns_path(store)
        assert seam.sync_check(store)() is False  # in step: nothing to catch up
        assert seam.last_check_seconds(store) >= 0.0
        document, vector = seam.chroma_record(store, memory_id) or ("", [])
        assert document == "The river bridge opens at dawn"
        assert seam.chroma_nearest(store, vector, 1) == [memory_id]
        assert seam.chroma_record(store, "no-such-id") is None
    # Opened again, the store builds its postings in the background, FTS5 ranking meanwhile.
    with HybridMemory(
        tmp_path / "s", embedding=hash_embedding, embedding_name="test-hash-64"
    ) as store:
        deadline = time.monotonic() + 60
        while not seam.keyword_postings_built(store) and time.monotonic() < deadline:
            store.search("river")
            time.sleep(0.05)
        assert seam.keyword_postings_built(store)
