"""The rewriting of a namespace's Chroma calls onto the collection all namespaces share
(hybrid_memory._store.partition): pure functions, no Chroma."""

from __future__ import annotations

import re

import numpy as np

from hybrid_memory._model.namespaces import (
    namespace_collection,
    namespace_digest,
    partition_collection,
    registry_collection,
)
from hybrid_memory._store.partition import (
    PARTITION_KEY,
    chroma_id,
    memory_id,
    name_record_id,
    scoped_answer,
    scoped_call,
    scoped_where,
    with_name_record,
)

KEY = namespace_digest("hybrid_memory", "alice")


def test_ids_are_prefixed_and_given_back_unchanged() -> None:
    for original in ("k", "sub:k", "", "a:b:c", "ü 🙂"):
        assert memory_id(KEY, chroma_id(KEY, original)) == original
    # "k" in namespace "A:sub" and "sub:k" in namespace "A": two Chroma ids.
    a, a_sub = namespace_digest("s", "A"), namespace_digest("s", "A:sub")
    assert chroma_id(a, "sub:k") != chroma_id(a_sub, "k")


def test_every_where_is_narrowed_to_the_namespace() -> None:
    assert scoped_where(KEY, None) == {PARTITION_KEY: KEY}
    user = {"$or": [{"n": 1}, {"n": 2}]}
    assert scoped_where(KEY, user) == {"$and": [user, {PARTITION_KEY: KEY}]}
    for operation in ("get", "query", "delete"):
        got = scoped_call(KEY, operation, {"where": {"n": 1}, "limit": 5})
        assert got == {"where": {"$and": [{"n": 1}, {PARTITION_KEY: KEY}]}, "limit": 5}
        assert scoped_call(KEY, operation, {})["where"] == {PARTITION_KEY: KEY}


def test_a_call_by_ids_names_only_the_namespace_records() -> None:
    got = scoped_call(KEY, "get", {"ids": ["a", "b"], "include": []})
    assert got == {"ids": [f"{KEY}:a", f"{KEY}:b"], "include": []}
    got = scoped_call(KEY, "query", {"ids": ["a"], "query_embeddings": [[1.0]]})
    assert got["ids"] == [f"{KEY}:a"] and "where" not in got


def test_writes_carry_the_namespace_key_over_anything_stored() -> None:
    for operation in ("add", "upsert", "update"):
        got = scoped_call(
            KEY,
            operation,
            {
                "ids": ["a", "b"],
                "metadatas": [{"n": 1}, {PARTITION_KEY: None}],
                "documents": ["x", "y"],
            },
        )
        assert got["ids"] == [f"{KEY}:a", f"{KEY}:b"]
        assert got["metadatas"] == [{"n": 1, PARTITION_KEY: KEY}, {PARTITION_KEY: KEY}]
    got = scoped_call(KEY, "update", {"ids": ["a"], "documents": ["x"]})
    assert got["metadatas"] == [{PARTITION_KEY: KEY}]


def test_answers_read_as_from_a_collection_of_its_own() -> None:
    got = scoped_answer(
        KEY,
        "get",
        {
            "ids": [f"{KEY}:a", f"{KEY}:x:y"],
            "metadatas": [{"n": 1, PARTITION_KEY: KEY}, None],
            "documents": ["one", "two"],
        },
    )
    assert got == {"ids": ["a", "x:y"], "metadatas": [{"n": 1}, None], "documents": ["one", "two"]}
    got = scoped_answer(KEY, "query", {"ids": [[f"{KEY}:a"]], "distances": [[0.5]]})
    assert got == {"ids": [["a"]], "distances": [[0.5]], "metadatas": None}
    assert scoped_answer(KEY, "add", None) is None


def test_shared_collections_never_take_a_namespace_collection_name() -> None:
    for store in ("hybrid_memory", "x" * 300, "a.b-c"):
        shared = {partition_collection(store), registry_collection(store)}
        assert len(shared) == 2
        for name in ("namespaces", "namespace-names", "a"):
            assert namespace_collection(store, name) not in shared
        assert all(3 <= len(n) <= 512 and n[0].isalnum() and n[-1].isalnum() for n in shared)


def test_a_first_write_carries_the_namespace_name_in_the_same_call() -> None:
    for vectors in ([[1.0, 0.0], [0.0, 1.0]], np.array([[1.0, 0.0], [0.0, 1.0]])):
        scoped = scoped_call(
            KEY,
            "add",
            {"ids": ["a", "b"], "embeddings": vectors, "documents": ["x", "y"], "metadatas": None},
        )
        got = with_name_record(KEY, "alice", "hybrid_memory", scoped)
        assert got["ids"] == [f"{KEY}:a", f"{KEY}:b", name_record_id(KEY)]
        assert got["documents"] == ["x", "y", "alice"]
        assert [list(v) for v in got["embeddings"]] == [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]
        assert got["metadatas"][:2] == [{PARTITION_KEY: KEY}] * 2
        # The name record is in no namespace's share: no key, an id no share can have.
        assert got["metadatas"][2] == {"hm:namespace": "alice", "hm:parent": "hybrid_memory"}
        assert scoped["ids"] == [f"{KEY}:a", f"{KEY}:b"]  # the call's own are unchanged
    # A namespace's Chroma ids are its key (32 hex digits), ':' and the memory id.
    assert re.fullmatch(r"[0-9a-f]{32}:.*", chroma_id(KEY, "any"))
    assert not re.fullmatch(r"[0-9a-f]{32}:.*", name_record_id(KEY))
