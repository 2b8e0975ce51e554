"""HybridMemory against real embedded Chroma and real SQLite FTS5.

Most tests use the cheap hashed embedding from conftest so they run in
milliseconds; test_default_model.py covers the real all-MiniLM-L6-v2 model.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import chromadb
import numpy as np
import pytest

from hybrid_memory import (
    DuplicateIdError,
    EmbeddingMismatchError,
    HybridMemory,
    InvalidInputError,
    MemoryNotFoundError,
)
from hybrid_memory._model.records import CREATED_KEY, TAGS_KEY, UPDATED_KEY
from hybrid_memory._search.feedback import rocchio

from ..conftest import HashEmbedding, index_ids, indexed

UTC = timezone.utc


def open_store(path: Path | None = None, **kw: object) -> HybridMemory:
    return HybridMemory(path, embedding=HashEmbedding(), embedding_name="test-hash-64", **kw)


# --- add / get / update / delete -------------------------------------------------------


def test_add_get_roundtrip_normalises_tags(memory: HybridMemory) -> None:
    created = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)
    memory_id = memory.add(
        "Alice prefers dark mode",
        tags=["  Alice ", "UI", "alice"],
        metadata={"user": "alice", "session": 3, "score": 0.5, "pinned": True, "langs": ["en"]},
        created_at=created,
    )
    got = memory.get(memory_id)
    assert got.text == "Alice prefers dark mode"
    assert got.tags == ("alice", "ui")
    assert dict(got.metadata) == {
        "user": "alice",
        "session": 3,
        "score": 0.5,
        "pinned": True,
        "langs": ["en"],
    }
    assert got.created_at == created
    assert got.updated_at is not None and got.updated_at >= created
    assert memory.tags() == ["alice", "ui"]


def test_given_id_and_duplicate_id_error_unless_upsert(memory: HybridMemory) -> None:
    assert memory.add("first", id="m1") == "m1"
    with pytest.raises(DuplicateIdError, match="upsert=True"):
        memory.add("second", id="m1")
    assert memory.get("m1").text == "first"
    assert memory.add("second", id="m1", upsert=True) == "m1"
    assert memory.get("m1").text == "second"
    assert memory.count() == 1
    assert [h.id for h in memory.search("second")] == ["m1"]
    assert memory.search("first").__len__() == 0 or memory.search("first")[0].id == "m1"


def test_upsert_keeps_creation_time(memory: HybridMemory) -> None:
    created = datetime(2020, 1, 1, tzinfo=UTC)
    memory.add("v1", id="m", created_at=created)
    memory.add("v2", id="m", upsert=True)
    assert memory.get("m").created_at == created


def test_same_text_without_id_is_stored_once_unless_duplicates_allowed(
    memory: HybridMemory,
) -> None:
    a = memory.add("the sky is blue")
    b = memory.add("the sky is blue", tags=["sky"])
    assert a == b and memory.count() == 1
    ids = memory.add_many(["x marks the spot", "x marks the spot"])
    assert ids[0] == ids[1] and memory.count() == 2
    c = memory.add("the sky is blue", allow_duplicates=True)
    assert c != a and memory.count() == 3


def test_add_many_is_batched_and_returns_ids_in_order(hash_embedding: HashEmbedding) -> None:
    with HybridMemory(embedding=hash_embedding, embedding_batch_size=7) as store:
        items = [{"text": f"memory number {i}", "tags": [f"t{i % 3}"]} for i in range(50)]
        ids = store.add_many(items)
        assert len(ids) == 50 and len(set(ids)) == 50
        assert [store.get(i).text for i in ids[:3]] == [f"memory number {i}" for i in range(3)]
        assert hash_embedding.calls == 50
        assert store.count() == 50 and store.count({"tags": {"$contains": "t1"}}) == 17


def test_one_add_many_creates_its_memories_at_one_time(memory: HybridMemory) -> None:
    # Generated and chosen ids go to Chroma in separate requests, each stamped on its
    # own; the memories of one call still share one creation time.
    ids = memory.add_many(["a first memory", {"text": "a second", "id": "mine"}, "a third"])
    stored = memory.get_many(ids)
    assert len({m.created_at for m in stored}) == 1
    assert all(m.updated_at is not None and m.updated_at >= m.created_at for m in stored)


def test_a_lone_tag_count_follows_updates_and_deletes(hash_embedding: HashEmbedding) -> None:
    """A count filtered by one tag (read off the tag table) equals the memories holding it,
    after tags change and memories go, and agrees with the general form of the filter."""
    with HybridMemory(embedding=hash_embedding) as store:
        ids = store.add_many(
            [{"text": f"note {i}", "tags": [f"t{i % 3}", "all"]} for i in range(30)]
        )
        store.update(ids[0], tags=["t1"])  # t0 -> t1, and no longer "all"
        store.delete(ids[1:4])
        for tag in ("t0", "t1", "t2", "all", "absent"):
            holding = sum(tag in m.tags for m in store.list_memories())
            assert store.count({"tags": {"$contains": tag}}) == holding
            general = {"$and": [{"tags": {"$contains": tag}}, {"created_at": {"$gte": 0}}]}
            assert store.count(general) == holding


def test_times_read_back_as_written(memory: HybridMemory) -> None:
    """What add and update hand back is what get, search and a reopened index read: Chroma
    keeps a float only to within a unit or two of its last bit, which near a half
    microsecond used to flip the datetime read back (1 in 7 times, at random)."""
    ids = memory.add_many([f"memory number {i} about times" for i in range(300)])
    updated = [memory.update(i, metadata={"v": 1}) for i in ids]
    got = memory.get_many(ids)
    assert [(m.created_at, m.updated_at) for m in got] == [
        (m.created_at, m.updated_at) for m in updated
    ]
    hits = {h.id: h for h in memory.search("memory number 7 about times", k=50)}
    assert all(hits[i].memory.updated_at == memory.get(i).updated_at for i in hits)


def test_update_reembeds_only_when_text_changes(hash_embedding: HashEmbedding) -> None:
    with HybridMemory(embedding=hash_embedding) as store:
        store.add("original words", id="m", tags=["a"], metadata={"v": 1})
        calls = hash_embedding.calls
        updated = store.update("m", tags=["b"], metadata={"v": 2})
        assert hash_embedding.calls == calls
        assert updated.tags == ("b",) and dict(updated.metadata) == {"v": 2}
        store.update("m", text="original words")  # same text: no re-embedding
        assert hash_embedding.calls == calls
        store.update("m", text="completely different phrase")
        assert hash_embedding.calls == calls + 1
        assert store.get("m").text == "completely different phrase"
        assert [h.id for h in store.search("different phrase")] == ["m"]
        assert store.search("original").__len__() == 0 or "m" not in [
            h.id for h in store.search("original") if "keyword" in h.ranks
        ]
        assert store.tags() == ["b"]


def test_delete_by_ids_and_by_filter(memory: HybridMemory) -> None:
    memory.add_many(
        [
            {"text": "alpha one", "id": "a", "metadata": {"user": "x"}},
            {"text": "beta two", "id": "b", "metadata": {"user": "y"}},
            {"text": "gamma three", "id": "c", "metadata": {"user": "y"}},
        ]
    )
    assert memory.delete("a") == 1
    with pytest.raises(MemoryNotFoundError):
        memory.get("a")
    assert memory.delete(filter={"user": "y"}) == 2
    assert memory.count() == 0
    assert memory.search("beta") == []
    assert memory.delete(filter={"user": "nobody"}) == 0


def test_list_memories_filters_before_paging_oldest_first(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    store.add_many(
        [
            {
                "text": f"note {i}",
                "id": f"n{i}",
                "metadata": {"user": "x" if i % 2 else "y"},
                "created_at": t0 + timedelta(minutes=i),
            }
            for i in range(7)
        ]
    )
    # Equal creation times fall back to the id, so every process pages alike.
    store.add("tie b", id="tb", created_at=t0 - timedelta(days=1))
    store.add("tie a", id="ta", created_at=t0 - timedelta(days=1))
    assert [m.id for m in store.list_memories()] == ["ta", "tb", *(f"n{i}" for i in range(7))]
    assert [m.id for m in store.list_memories({"user": "x"})] == ["n1", "n3", "n5"]
    assert [m.id for m in store.list_memories({"user": "x"}, limit=2, offset=1)] == ["n3", "n5"]
    assert store.list_memories({"user": "x"}, offset=3) == []
    assert store.list_memories(limit=0) == []
    first = store.list_memories({"user": "y"}, limit=1)[0]
    assert (first.text, dict(first.metadata)) == ("note 0", {"user": "y"})
    assert first.created_at == t0
    # Upsert keeps the creation time, so the item keeps its place.
    store.add("note 0 again", id="n0", metadata={"user": "y"}, upsert=True)
    assert [m.id for m in store.list_memories({"user": "y"})] == ["n0", "n2", "n4", "n6"]
    store.delete("n2")
    store.close()
    reopened = open_store(tmp_path)
    assert [m.id for m in reopened.list_memories({"user": "y"})] == ["n0", "n4", "n6"]
    for bad in ({"limit": -1}, {"limit": True}, {"offset": -2}, {"offset": 1.5}):
        with pytest.raises(InvalidInputError, match=next(iter(bad))):
            reopened.list_memories(**bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="unknown operator"):
        reopened.list_memories({"user": {"$like": "x"}})
    reopened.close()


def test_missing_ids_are_errors_and_change_nothing(memory: HybridMemory) -> None:
    memory.add("keep me", id="keep")
    with pytest.raises(MemoryNotFoundError, match="nope"):
        memory.get("nope")
    with pytest.raises(MemoryNotFoundError):
        memory.update("nope", text="x")
    with pytest.raises(MemoryNotFoundError):
        memory.delete(["keep", "nope"])
    with pytest.raises(MemoryNotFoundError):
        memory.related("nope")
    assert memory.count() == 1 and memory.get("keep").text == "keep me"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"text": ""}, "text"),
        ({"text": "   "}, "text"),
        ({"text": 42}, "text"),
        ({"text": "ok", "tags": "not-a-list"}, "tags"),
        ({"text": "ok", "tags": ["fine", ""]}, "tags"),
        ({"text": "ok", "tags": [3]}, "tags"),
        ({"text": "ok", "metadata": {"tags": "x"}}, "metadata['tags']"),
        ({"text": "ok", "metadata": {"hm:secret": 1}}, "metadata['hm:secret']"),
        ({"text": "ok", "metadata": {"v": None}}, "metadata['v']"),
        ({"text": "ok", "metadata": {"v": {"nested": 1}}}, "metadata['v']"),
        ({"text": "ok", "metadata": {"v": [1, "mixed"]}}, "metadata['v']"),
        ({"text": "ok", "metadata": "user=alice"}, "metadata"),
        ({"text": "ok", "id": ""}, "id"),
        ({"text": "ok", "created_at": "yesterday"}, "created_at"),
    ],
)
def test_bad_input_names_the_field_and_stores_nothing(
    memory: HybridMemory, kwargs: dict, field: str
) -> None:
    memory.add("existing", id="e")
    with pytest.raises(InvalidInputError) as info:
        memory.add(**kwargs)
    assert str(info.value).startswith(field), str(info.value)
    assert memory.count() == 1 and memory.tags() == []


def test_a_bad_item_in_a_batch_stores_none_of_it(memory: HybridMemory) -> None:
    with pytest.raises(InvalidInputError, match=r"^items\[1\]\.text"):
        memory.add_many(["good one", {"text": ""}, "good two"])
    assert memory.count() == 0


def test_bad_search_arguments(memory: HybridMemory) -> None:
    memory.add("something")
    for kwargs, field in [
        ({"query": ""}, "query"),
        ({"query": "x", "k": 0}, "k"),
        ({"query": "x", "k": 101}, "k"),
        ({"query": "x", "k": "5"}, "k"),
        ({"query": "x", "alpha": 1.5}, "alpha"),
        ({"query": "x", "max_tokens": 0}, "max_tokens"),
        ({"query": "x", "filter": {"user": {"$like": "a"}}}, "filter.user"),
        ({"query": "x", "filter": {"$not": {"a": 1}}}, "filter"),
        ({"query": "x", "filter": {"n": {"$gt": "three"}}}, "filter.n.$gt"),
        ({"query": "x", "now": "not a time"}, "now"),
    ]:
        with pytest.raises(InvalidInputError) as info:
            memory.search(**kwargs)
        assert str(info.value).startswith(field), (kwargs, str(info.value))
    with pytest.raises(InvalidInputError, match=r"\$eq.*\$ne"):
        memory.search("x", filter={"user": {"$like": "a"}})


# --- search: legs, filters, fusion ---------------------------------------------------------

CORPUS = [
    {
        "id": "a1",
        "text": "Alice prefers dark mode in her editor",
        "tags": ["alice", "ui"],
        "metadata": {"user": "alice", "n": 1},
    },
    {
        "id": "a2",
        "text": "Alice is allergic to peanuts",
        "tags": ["alice", "health"],
        "metadata": {"user": "alice", "n": 2},
    },
    {
        "id": "b1",
        "text": "Bob prefers light mode and large fonts",
        "tags": ["bob", "ui"],
        "metadata": {"user": "bob", "n": 3},
    },
    {
        "id": "b2",
        "text": "Bob moved to New York last spring",
        "tags": ["bob", "new york"],
        "metadata": {"user": "bob", "n": 4},
    },
    {
        "id": "c1",
        "text": "The quarterly report is due on Friday",
        "tags": ["work"],
        "metadata": {"user": "carol", "n": 5},
    },
]


@pytest.fixture
def filled(memory: HybridMemory) -> HybridMemory:
    memory.add_many(CORPUS)
    return memory


def test_hits_explain_themselves(filled: HybridMemory) -> None:
    result = filled.search("which mode does alice prefer?", k=3)
    assert result[0].id == "a1"
    top = result[0]
    assert set(top.ranks) == {"vector", "keyword", "tag"}
    assert top.scores["tag"] == 1.0 and top.scores["keyword"] > 0
    assert -1.0 <= top.scores["vector"] <= 1.0
    assert result.matched_tags == ("alice",)
    assert [h.fused_score for h in result] == sorted((h.fused_score for h in result), reverse=True)
    assert [h.score for h in result] == sorted((h.score for h in result), reverse=True)
    assert all(0.0 <= h.score <= 1.0 for h in result)
    assert not result.fallback_mode


def test_the_vector_leg_searches_with_the_query_moved_towards_the_keyword_top(
    filled: HybridMemory, hash_embedding: HashEmbedding
) -> None:
    # Close to the query's vector, but made of stopwords: no keyword evidence at all.
    filled.add("which of these would you", id="s1")
    query = "which of these would you prefer?"  # no tag in it: feedback = the keyword top
    keyword = [h for h in filled.search(query, k=6) if "keyword" in h.ranks]
    keyword_top = [h.id for h in sorted(keyword, key=lambda h: h.ranks["keyword"])][:3]
    assert sorted(keyword_top) == ["a1", "b1"]  # "prefer" (stemmed), two memories
    # Every memory's vector, as stored: the embedding of its text.
    memories = filled.list_memories()
    embedded = hash_embedding([m.text for m in memories])
    vectors = {m.id: np.asarray(v) for m, v in zip(memories, embedded, strict=True)}
    [vector] = hash_embedding([query])
    # The feedback memories' vectors as the index keeps them: half precision.
    kept = [vectors[i].astype(np.float16).astype(np.float32) for i in keyword_top]
    refined = np.asarray(rocchio(vector, kept, 0.5))

    result = filled.with_settings(feedback_docs=3, feedback_weight=0.5).search(query, k=6)
    assert "s1" in [h.id for h in result]  # found by the vector leg alone
    for hit in result:
        expected = float(refined @ vectors[hit.id] / np.linalg.norm(vectors[hit.id]))
        assert hit.scores["vector"] == pytest.approx(expected, abs=1e-5)
    plain = filled.with_settings(feedback_docs=0).search(query, k=6)
    for hit in plain:
        expected = float(np.asarray(vector) @ vectors[hit.id] / np.linalg.norm(vectors[hit.id]))
        assert hit.scores["vector"] == pytest.approx(expected, abs=1e-5)


def test_the_feedback_is_the_keyword_top_even_when_the_query_names_a_tag(
    filled: HybridMemory, hash_embedding: HashEmbedding
) -> None:
    # "bob" is a tag and a word: the tag leg ranks Bob's memories, the keyword leg puts
    # the one memory about peanuts (the rarer word) first. The vector moves towards
    # the keyword leg's top alone, not towards the tag leg's.
    query = "peanuts for bob?"
    tuned = filled.with_settings(feedback_docs=1, feedback_weight=0.5)
    result = tuned.search(query, k=6)
    assert result.matched_tags == ("bob",)
    keyword_top = min((h for h in result if "keyword" in h.ranks), key=lambda h: h.ranks["keyword"])
    assert keyword_top.id == "a2" and "tag" not in keyword_top.ranks
    memories = filled.list_memories()
    embedded = hash_embedding([m.text for m in memories])
    vectors = {m.id: np.asarray(v) for m, v in zip(memories, embedded, strict=True)}
    [vector] = hash_embedding([query])
    kept = [vectors["a2"].astype(np.float16).astype(np.float32)]
    refined = np.asarray(rocchio(vector, kept, 0.5))
    for hit in result:
        if "vector" in hit.ranks:
            expected = float(refined @ vectors[hit.id] / np.linalg.norm(vectors[hit.id]))
            assert hit.scores["vector"] == pytest.approx(expected, abs=1e-5)


def test_feedback_vectors_come_from_the_index_or_else_from_the_collection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hybrid_memory._store.collection import ChromaCollection

    reads: list[list[str]] = []
    original = ChromaCollection.vectors_by_id

    def counted(self: ChromaCollection, ids: list[str]) -> dict[str, Any]:
        reads.append(list(ids))
        return original(self, ids)

    monkeypatch.setattr(ChromaCollection, "vectors_by_id", counted)
    query = "which mode does alice prefer?"
    with open_store(tmp_path) as store:
        store.add_many(CORPUS)
        written = store.search(query, k=6)
    assert reads == []  # every feedback vector was the index's copy
    # The index file lost: refilled from the collection, it has no vectors, so the
    # feedback reads them from Chroma, and ranks as the index's copies did.
    for name in ("keyword-hybrid_memory.sqlite3", "keyword-hybrid_memory.sqlite3-wal"):
        (tmp_path / name).unlink(missing_ok=True)
    with open_store(tmp_path) as store:
        refilled = store.search(query, k=6)
    assert reads and all(reads)
    assert [h.id for h in refilled] == [h.id for h in written]
    for before, after in zip(written, refilled, strict=True):
        assert after.scores["vector"] == pytest.approx(before.scores["vector"], abs=1e-3)


def test_each_leg_filters_before_its_cut(filled: HybridMemory) -> None:
    # candidates=1: a leg that cut first and filtered after would return nothing.
    narrow = filled.with_settings(candidates=1)
    bob_only = {"user": "bob"}
    vector_only = narrow.search("Alice prefers dark mode in her editor", alpha=1.0, filter=bob_only)
    assert vector_only and all(h.metadata["user"] == "bob" for h in vector_only)
    assert "vector" in vector_only[0].ranks
    keyword_only = narrow.search("prefers mode", alpha=0.0, filter=bob_only)
    assert [h.id for h in keyword_only][:1] == ["b1"]
    assert keyword_only[0].ranks.get("keyword") == 1
    tag_only = narrow.search("anything about alice or bob", tags=["ui"], filter=bob_only)
    tagged = [h for h in tag_only if "tag" in h.ranks]
    assert tagged and all(h.metadata["user"] == "bob" for h in tagged)


def test_filters_on_reserved_fields(filled: HybridMemory) -> None:
    ui = filled.search("mode", k=5, filter={"tags": {"$contains": "ui"}})
    assert {h.id for h in ui} == {"a1", "b1"}
    assert filled.count({"tags": {"$not_contains": "ui"}}) == 3
    future = datetime.now(UTC) + timedelta(days=1)
    assert filled.count({"created_at": {"$gte": future}}) == 0
    assert filled.count({"created_at": {"$lt": future.isoformat()}}) == 5
    assert filled.count({"$or": [{"n": {"$gte": 4}}, {"user": "alice"}]}) == 4


def test_multi_word_and_unicode_tags_match_from_the_query(filled: HybridMemory) -> None:
    filled.add("Zoë visited 東京 in April", tags=["Zoë", "東京"], id="z")
    result = filled.search("when did bob go to new york?")
    assert "new york" in result.matched_tags and "bob" in result.matched_tags
    assert result[0].id == "b2" and result[0].scores["tag"] == 2.0
    assert filled.search("what about ZOË and 東京?").matched_tags == ("zoë", "東京")


def test_tag_leg_ranks_by_matches_then_evidence_never_all_first(filled: HybridMemory) -> None:
    result = filled.search("tell me about alice", k=5, alpha=0.5)
    tag_ranks = sorted(h.ranks["tag"] for h in result if "tag" in h.ranks)
    assert tag_ranks == [1, 2]


def test_tag_weight_moves_memories_found_only_by_tags(filled: HybridMemory) -> None:
    # b2's text shares nothing with the query; only its tag "new york" is asked for.
    def position(tag_weight: float) -> int:
        result = filled.with_settings(tag_weight=tag_weight).search(
            "light mode fonts", tags=["new york"], k=5
        )
        return [h.id for h in result].index("b2") if "b2" in [h.id for h in result] else 99

    assert position(1.0) == 0
    assert position(0.0) > 0
    # Two matched tags weigh more than one: b2, found by tags alone, scores higher.
    # alpha=0: the vector leg weighs nothing, so b2's score is its tag-leg share alone.
    boosted = filled.search("light mode fonts", tags=["bob", "new york"], k=5, alpha=0.0)
    single = filled.search("light mode fonts", tags=["new york"], k=5, alpha=0.0)
    b2_boosted = next(h for h in boosted if h.id == "b2")
    b2_single = next(h for h in single if h.id == "b2")
    assert "keyword" not in b2_boosted.ranks and b2_boosted.ranks["tag"] == 1
    assert b2_boosted.fused_score > b2_single.fused_score


def test_adaptive_alpha_follows_filtered_corpus_size(filled: HybridMemory) -> None:
    store = filled.with_settings(alpha_thresholds=[3], alpha_values=[0.2, 0.9])
    assert store.search("mode").alpha == 0.9  # 5 memories
    assert store.search("mode", filter={"user": "bob"}).alpha == 0.2  # 2 after filtering
    assert store.search("mode", alpha=0.4).alpha == 0.4


def test_recency_decay_prefers_newer_memories(memory: HybridMemory) -> None:
    now = datetime(2024, 6, 1, tzinfo=UTC)
    memory.add("meeting notes about the budget", id="old", created_at=now - timedelta(days=300))
    memory.add("meeting notes about the budget!", id="new", created_at=now - timedelta(days=1))
    memory = memory.with_settings(collapse_similar=False)  # the two say the same: both shown
    flat = memory.search("meeting notes budget", now=now, k=2)
    decayed = memory.with_settings(recency_decay=0.05).search("meeting notes budget", now=now, k=2)
    assert decayed[0].id == "new"
    old_flat = next(h.fused_score for h in flat if h.id == "old")
    old_decayed = next(h.fused_score for h in decayed if h.id == "old")
    assert old_decayed == pytest.approx(old_flat * 2.718281828 ** (-0.05 * 300), rel=1e-6)


def test_max_tokens_stops_before_the_budget_is_exceeded(filled: HybridMemory) -> None:
    from hybrid_memory._search.token_budget import count_tokens

    everything = filled.search("alice bob mode report", k=5)
    first = count_tokens(everything[0].text)
    second = count_tokens(everything[1].text)
    limited = filled.search("alice bob mode report", k=5, max_tokens=first + second)
    assert [h.id for h in limited] == [h.id for h in everything[:2]]
    assert filled.search("alice bob mode report", k=5, max_tokens=first - 1) == []


def test_query_embedding_failure_falls_back_to_keyword_and_tags() -> None:
    class FlakyEmbedding(HashEmbedding):
        down = False

        def __call__(self, texts: list[str]) -> list[list[float]]:
            if self.down:
                raise ConnectionError("embedding API unreachable")
            return super().__call__(texts)

    embedding = FlakyEmbedding()
    with HybridMemory(embedding=embedding) as store:
        store.add_many(CORPUS)
        embedding.down = True
        result = store.search("where does bob live? new york", k=3)
        assert result.fallback_mode and "unreachable" in (result.fallback_reason or "")
        assert result[0].id == "b2" and "vector" not in result[0].ranks
        with pytest.raises(Exception, match="unreachable"):
            store.add("cannot embed this one")
        assert store.count() == 5


def test_related_uses_vectors_and_shared_tags(filled: HybridMemory) -> None:
    result = filled.related("a1", k=3)
    ids = [h.id for h in result]
    assert "a1" not in ids
    assert set(ids[:2]) == {"a2", "b1"}  # shares "alice" / "ui", and the words "prefers mode"
    assert all("tag" in h.ranks for h in result[:2])


def test_query_text_never_breaks_the_keyword_leg(filled: HybridMemory) -> None:
    for query in ['"unclosed', "AND OR NOT", "NEAR(a b)", "a* -b +c", "col:val", "()", "🙂", "'"]:
        filled.search(query)


def test_query_embeddings_are_cached(filled: HybridMemory, hash_embedding: HashEmbedding) -> None:
    filled.search("a repeated question")
    calls = hash_embedding.calls
    filled.search("a repeated question")
    assert hash_embedding.calls == calls
    filled.search("a new question")
    assert hash_embedding.calls == calls + 1


# --- persistence and the derived index ---------------------------------------------------------


def test_reopening_a_path_finds_every_memory(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.add_many(CORPUS)
    with open_store(tmp_path) as store:
        assert store.count() == 5
        assert store.search("peanuts allergy", alpha=0.0)[0].id == "a2"
        assert store.tags() == sorted({t for item in CORPUS for t in item["tags"]})


def test_deleted_index_file_is_rebuilt_from_the_collection(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.add_many(CORPUS)
    for index_file in tmp_path.glob("keyword-*.sqlite3*"):
        index_file.unlink()
    with open_store(tmp_path) as store:
        for item in CORPUS:
            hits = store.search(item["text"], alpha=0.0, k=1)
            assert hits[0].id == item["id"] and "keyword" in hits[0].ranks


def test_writes_made_through_chroma_alone_are_indexed_on_open(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.add_many(CORPUS[:2])
    # A crash between the two writes, or another tool writing to the collection:
    client = chromadb.PersistentClient(path=str(tmp_path))
    collection = client.get_collection("hybrid_memory")
    [vector] = HashEmbedding()(["written behind the index's back"])
    collection.add(
        ids=["raw"],
        embeddings=[vector],
        documents=["written behind the index's back"],
        metadatas=[{"user": "zed", TAGS_KEY: ["sneaky"], CREATED_KEY: 1.0, UPDATED_KEY: 9e9}],
    )
    collection.add(ids=["bare"], embeddings=[vector], documents=["no metadata whatsoever"])
    collection.delete(ids=["a1"])
    del client, collection
    with open_store(tmp_path) as store:
        assert store.count() == 3
        assert store.search("behind the back", alpha=0.0)[0].id == "raw"
        assert store.search("whatsoever", alpha=0.0)[0].id == "bare"
        assert "sneaky" in store.tags()
        assert all(h.id != "a1" for h in store.search("dark mode editor", alpha=0.0))
        assert store.count({"user": "zed"}) == 1


def test_deletes_behind_the_index_leave_search_after_the_next_check(
    store_and_collection: tuple[HybridMemory, Any],
) -> None:
    memory, collection = store_and_collection
    memory.add_many(CORPUS)
    collection.delete(ids=["a2"])  # behind the index's back (another process)
    assert "a2" in index_ids(memory)
    hits = memory.with_settings(sync_interval=0).search("alice peanuts allergic", alpha=0.0)
    assert "a2" not in [h.id for h in hits]
    assert len(indexed(memory)) == 4


def test_vector_hits_the_index_has_not_seen_are_read_from_the_collection(
    store_and_collection: tuple[HybridMemory, Any], hash_embedding: HashEmbedding
) -> None:
    memory, collection = store_and_collection
    memory.add_many(CORPUS)
    text = "a memory another process wrote a moment ago"
    [vector] = hash_embedding([text])
    collection.add(
        ids=["fresh"],
        embeddings=[vector],
        documents=[text],
        metadatas=[{"user": "zed", TAGS_KEY: ["new"], CREATED_KEY: 5.0, UPDATED_KEY: 5.0}],
    )
    # The index catches up at its next check, an hour away: the hit still comes whole.
    hits = memory.with_settings(sync_interval=3600).search(text, alpha=1.0, k=1)
    assert [h.id for h in hits] == ["fresh"]
    assert hits[0].memory.text == text
    assert hits[0].memory.tags == ("new",)
    assert hits[0].memory.metadata == {"user": "zed"}
    assert "fresh" not in index_ids(memory)


def test_opening_with_another_embedding_is_refused(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.add("hello there")
    with pytest.raises(EmbeddingMismatchError, match="test-hash-64"):
        HybridMemory(tmp_path, embedding=HashEmbedding(), embedding_name="another-model")

    def wider(texts: list[str]) -> list[list[float]]:
        return [[1.0] * 32 for _ in texts]

    with pytest.raises(EmbeddingMismatchError, match="32-dimensional"):
        store = HybridMemory(tmp_path, embedding=wider, embedding_name="test-hash-64")
        store.add("different width")
    with open_store(tmp_path) as store:
        assert store.count() == 1


def test_in_memory_stores_are_private(hash_embedding: HashEmbedding) -> None:
    with (
        HybridMemory(embedding=hash_embedding) as one,
        HybridMemory(embedding=hash_embedding) as two,
    ):
        one.add("only in the first store")
        assert two.count() == 0


def test_dedup_survives_a_rebuilt_index(tmp_path: Path) -> None:
    # The content hash lives in the derived index only; a rebuilt index derives it again.
    with open_store(tmp_path) as store:
        first = store.add("remember the milk")
    for index_file in tmp_path.glob("keyword-*.sqlite3*"):
        index_file.unlink()
    with open_store(tmp_path) as store:
        assert store.add("remember the milk") == first and store.count() == 1


# --- concurrency ---------------------------------------------------------------------------------


def test_concurrent_adds_and_searches_keep_every_memory(tmp_path: Path) -> None:
    errors: list[BaseException] = []
    with open_store(tmp_path) as store:

        def writer(worker: int) -> None:
            try:
                for i in range(40):
                    store.add(f"worker {worker} note {i} about topic {i % 7}", tags=[f"w{worker}"])
            except BaseException as exc:
                errors.append(exc)

        def reader() -> None:
            try:
                for i in range(60):
                    store.search(
                        f"note about topic {i % 7}", k=5, filter={"tags": {"$contains": "w1"}}
                    )
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
        threads += [threading.Thread(target=reader) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert store.count() == 160
        assert len(indexed(store)) == 160
        for w in range(4):
            assert store.count({"tags": {"$contains": f"w{w}"}}) == 40


def test_tag_filters_ignore_what_deleted_collections_left_in_chroma(
    hash_embedding: HashEmbedding,
) -> None:
    # Chroma 1.5 keeps array-metadata index entries of a deleted collection; a new
    # collection's $contains then matches its own records at the same positions.
    client = chromadb.EphemeralClient()
    old = client.create_collection("leaky-old", embedding_function=None)
    old.add(
        ids=[f"o{i}" for i in range(4)],
        embeddings=hash_embedding([f"old {i}" for i in range(4)]),
        metadatas=[{"x": 1}, {"x": 2}, {"x": 3}, {TAGS_KEY: ["new york"]}],
    )
    client.delete_collection("leaky-old")
    with HybridMemory(client=client, collection="leaky-new", embedding=hash_embedding) as store:
        store.add_many([f"untagged memory {i}" for i in range(4)])
        only_tagged = {"tags": {"$contains": "new york"}}
        assert store.search("untagged memory", alpha=1.0, filter=only_tagged) == []
        assert store.count(only_tagged) == 0


def test_closing_an_in_memory_store_leaves_nothing_behind(hash_embedding: HashEmbedding) -> None:
    with HybridMemory(embedding=hash_embedding) as first:
        first.add_many([{"text": f"tagged {i}", "tags": ["alpha"]} for i in range(5)])
    with HybridMemory(embedding=hash_embedding) as second:
        second.add_many([f"plain {i}" for i in range(5)])
        hits = second.search("plain", alpha=1.0, filter={"tags": {"$contains": "alpha"}})
        assert hits == []


def test_many_explicit_ids_in_one_call(hash_embedding: HashEmbedding) -> None:
    # One Chroma get with every id exceeded SQLite's bound-variable limit ("too many SQL
    # variables"); existence checks now go in pages.
    with HybridMemory(embedding=hash_embedding) as store:
        ids = [f"m{i}" for i in range(40_000)]
        store.add_many([{"id": i, "text": f"note {i}"} for i in ids])
        assert store.count() == 40_000
        with pytest.raises(DuplicateIdError):
            store.add_many([{"id": "m39999", "text": "again"}])
        assert store.delete(ids) == 40_000 and store.count() == 0


@pytest.mark.parametrize(
    ("narrow_filter", "exact_search"),
    [
        (0, 0),  # Chroma's `where`
        (10_000, 0),  # Chroma's search among the ids the index resolved
        (10_000, 10_000),  # every resolved id compared with the query
    ],
    ids=["where", "ids", "exact"],
)
def test_the_vector_leg_finds_the_same_neighbours_whichever_way_it_filters(
    memory: HybridMemory, filter_paths: Any, narrow_filter: int, exact_search: int
) -> None:
    words = [
        "wing",
        "flow",
        "shock",
        "layer",
        "heat",
        "jet",
        "nozzle",
        "panel",
        "cone",
        "plate",
        "drag",
        "lift",
    ]
    memory.add_many(
        [
            {
                "text": " ".join(words[(i * 7 + j) % len(words)] for j in range(i % 5 + 2))
                + f" item{i}",
                "tags": ["even"] if i % 2 == 0 else [],
                "metadata": {"user": f"u{i % 3}", "n": i},
            }
            for i in range(300)
        ],
    )
    reference = {}
    for where in ({"user": "u1"}, {"n": {"$lt": 7}}, {"tags": {"$contains": "even"}}):
        hits = memory.search("shock layer heat", alpha=1.0, k=10, filter=where)
        reference[str(where)] = [(h.id, h.scores["vector"]) for h in hits]
    filter_paths(narrow_filter=narrow_filter, exact_search=exact_search)
    for where in ({"user": "u1"}, {"n": {"$lt": 7}}, {"tags": {"$contains": "even"}}):
        hits = memory.search("shock layer heat", alpha=1.0, k=10, filter=where)
        assert len(hits) == 10 if "n" not in where else len(hits) == 7
        expected = reference[str(where)]
        # Chroma's distances are float32, the exact comparison float64: the same scores
        # to 1e-5, and the same memories at each score (equal texts tie).
        assert [h.scores["vector"] for h in hits] == pytest.approx(
            [v for _, v in expected], abs=1e-5
        )

        def by_score(pairs: list[tuple[str, float]]) -> dict[float, set[str]]:
            groups: dict[float, set[str]] = {}
            for memory_id, score in pairs:
                groups.setdefault(round(score, 4), set()).add(memory_id)
            return groups

        got, want = by_score([(h.id, h.scores["vector"]) for h in hits]), by_score(expected)
        lowest = min(want)  # the cut at k may split the lowest tie differently
        assert {s: g for s, g in got.items() if s != lowest} == {
            s: g for s, g in want.items() if s != lowest
        }
        assert all(memory.count({"$and": [where, {"n": h.metadata["n"]}]}) for h in hits)
