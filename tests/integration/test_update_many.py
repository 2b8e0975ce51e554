"""update_many: many memories changed in one write, checked first, re-embedding only the
texts that changed; update is the same write for one memory."""

from __future__ import annotations

import pytest

from hybrid_memory import HybridMemory, InvalidInputError, MemoryNotFoundError

from ..conftest import HashEmbedding, index_ids


@pytest.fixture
def store(hash_embedding: HashEmbedding) -> HybridMemory:
    memory = HybridMemory(embedding=hash_embedding, embedding_name="test-hash-64")
    yield memory
    memory.close()


def test_many_memories_change_in_one_call(
    store: HybridMemory, hash_embedding: HashEmbedding
) -> None:
    a = store.add("alice likes tea", tags=["alice"], metadata={"n": 1})
    b = store.add("bob likes coffee", tags=["bob"], metadata={"n": 2})
    c = store.add("carol likes juice", tags=["carol"])
    before = {m.id: m for m in store.get_many([a, b, c])}
    calls = hash_embedding.calls
    changed = store.update_many(
        [
            {"id": a, "metadata": {"n": 10}},
            {"id": b, "text": "bob likes green tea", "tags": ["bob", "tea"]},
            {"id": c, "tags": []},
        ]
    )
    assert hash_embedding.calls == calls + 1  # only b's new text was embedded
    assert [m.id for m in changed] == [a, b, c]
    assert changed == store.get_many([a, b, c])
    assert (changed[0].text, changed[0].metadata, changed[0].tags) == (
        "alice likes tea",
        {"n": 10},
        ("alice",),
    )
    assert (changed[1].text, changed[1].tags, changed[1].metadata) == (
        "bob likes green tea",
        ("bob", "tea"),
        {"n": 2},
    )
    assert changed[2].tags == ()
    for memory in changed:
        assert memory.created_at == before[memory.id].created_at
        assert memory.updated_at >= before[memory.id].updated_at
    assert [h.id for h in store.search("green tea", k=1)] == [b]
    assert store.tags() == ["alice", "bob", "tea"]
    assert store.count({"n": 10}) == 1
    assert index_ids(store) == {a, b, c}


def test_a_missing_id_or_a_bad_update_changes_nothing(store: HybridMemory) -> None:
    a = store.add("kept as it is")
    with pytest.raises(MemoryNotFoundError) as missing:
        store.update_many([{"id": a, "text": "changed"}, {"id": "nope", "tags": ["x"]}])
    assert missing.value.memory_id == "nope"
    for updates, field in [
        ([{"id": a}], "updates[0]: give at least one of text, tags, metadata"),
        ([{"id": a, "text": "x"}, {"id": a, "tags": []}], "updates[1].id"),
        ([{"id": a, "colour": "red"}], "updates[0]: unknown keys ['colour']"),
        ([{"id": a, "tags": "x y"}], "updates[0].tags"),
        ([{"id": a, "metadata": {"n": {"deep": 1}}}], "updates[0].metadata"),
        ("not a list", "updates"),
    ]:
        with pytest.raises(InvalidInputError, match=field.replace("[", r"\[")):
            store.update_many(updates)  # type: ignore[arg-type]
    assert store.get(a).text == "kept as it is"
    assert store.update_many([]) == []


def test_update_is_the_same_write_for_one(store: HybridMemory) -> None:
    a = store.add("one memory", tags=["x"])
    with pytest.raises(InvalidInputError, match="update: give at least one of"):
        store.update(a)
    assert store.update(a, tags=["y"]).tags == ("y",)
    assert store.tags() == ["y"]
