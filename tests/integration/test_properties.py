"""Property-based tests of the public API (hypothesis): arbitrary unicode, tags,
metadata and filters drawn from the filter grammar.

The invariant: every call either gives the library's own error (a
:class:`HybridMemoryError`; for bad input an :class:`InvalidInputError`) and changes
nothing stored, or gives the correct result. Correct filtered results are checked
against a reference evaluator written here from Chroma's documented semantics (not
the library's own). Example counts stay modest so CI stays fast;
``HYBRID_MEMORY_PROPERTY_EXAMPLES`` raises them.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from hybrid_memory import HybridMemory, HybridMemoryError, InvalidInputError

from ..conftest import HashEmbedding

EXAMPLES = int(os.environ.get("HYBRID_MEMORY_PROPERTY_EXAMPLES", "40"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)

# --- data -----------------------------------------------------------------------------------

USERS = ["alice", "bob", "carol", "Zoë", "東京"]
BASE_TIME = 1_700_000_000.0


def dataset() -> list[dict[str, Any]]:
    out = []
    for i in range(30):
        meta: dict[str, Any] = {"user": USERS[i % 5], "n": i - 10}
        if i % 2:
            meta["x"] = i / 4
        if i % 3 == 0:
            meta["flag"] = i % 2 == 0
        if i % 4 == 0:
            meta["l"] = [USERS[i % 5], USERS[(i + 1) % 5]]
        if i % 5 == 0:
            meta["li"] = [i, i + 1]
        out.append(
            {
                "id": f"m{i}",
                "text": f"memory {i} of {USERS[i % 5]} about topic{i % 4} word{i}",
                "tags": [f"tag{i % 3}", USERS[i % 5]],
                "metadata": meta,
                "created_at": BASE_TIME + i * 3600,
            }
        )
    return out


DATA = dataset()
SCALAR_FIELDS = ["user", "n", "x", "flag"]
LIST_FIELDS = ["l", "li"]


@pytest.fixture(scope="module")
def store() -> Iterator[HybridMemory]:
    memory = HybridMemory(embedding=HashEmbedding(), embedding_name="test-hash-64")
    memory.add_many(DATA)
    yield memory
    memory.close()


def snapshot(store: HybridMemory) -> list[tuple[Any, ...]]:
    ids = [d["id"] for d in DATA]
    rows = [(m.id, m.text, m.tags, m.metadata, m.created_at) for m in store.get_many(ids)]
    return [store.count(), *rows]


# --- strategies -------------------------------------------------------------------------------

SPECIAL = "\x00\ud800\udfff\u202e\u200f\u0301\u0300\ufeff\U0001f9e0 \t\n"
hostile_text = st.one_of(
    st.text(max_size=30),
    st.text(alphabet=st.sampled_from(list(SPECIAL) + list("abc אבג")), max_size=12),
    st.text(alphabet=st.characters(codec=None, categories=["Cs", "Mn", "Cc", "Lo"]), max_size=8),
)
scalar = st.one_of(
    hostile_text,
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
)
metadata_value = st.one_of(
    scalar, st.lists(scalar, max_size=4), st.none(), st.dictionaries(st.text(max_size=3), scalar)
)
metadata = st.one_of(
    st.none(),
    st.dictionaries(
        st.one_of(hostile_text, st.sampled_from(["tags", "hm:x", "$a", "ok"])),
        metadata_value,
        max_size=4,
    ),
    st.sampled_from([[1, 2], "text", 5]),
)
tags = st.one_of(st.none(), st.lists(hostile_text, max_size=5), hostile_text, st.integers())
times = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.datetimes(),
    hostile_text,
)

# Filters valid by the grammar, over the fields the data holds (and one it does not).
finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-50, max_value=50)
number = st.one_of(st.integers(min_value=-25, max_value=45), finite)
value_for = {
    "user": st.sampled_from([*USERS, "nobody"]),
    "n": number,
    "x": number,
    "flag": st.booleans(),
    "absent": st.one_of(st.sampled_from(USERS), number, st.booleans()),
}


@st.composite
def condition(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["scalar", "list", "tags", "time"]))
    if kind == "tags":
        op = draw(st.sampled_from(["$contains", "$not_contains"]))
        tag = draw(st.sampled_from(["tag0", "tag1", "TAG2", "alice", "none"]))
        return {"tags": {op: tag}}
    if kind == "time":
        op = draw(st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]))
        return {"created_at": {op: BASE_TIME + draw(st.integers(-2, 32)) * 3600}}
    if kind == "list":
        name = draw(st.sampled_from([*LIST_FIELDS, "absent"]))
        op = draw(st.sampled_from(["$contains", "$not_contains"]))
        item = draw(st.sampled_from(USERS) if name == "l" else st.integers(-1, 32))
        return {name: {op: item}}
    name = draw(st.sampled_from(list(value_for)))
    strategy = value_for[name]
    op = draw(st.sampled_from(["$eq", "$ne", "$in", "$nin", "$gt", "$gte", "$lt", "$lte", "="]))
    if op == "=":
        return {name: draw(strategy)}
    if op in ("$in", "$nin"):
        first = draw(strategy)
        same = (
            st.booleans()
            if isinstance(first, bool)
            else (st.sampled_from(USERS) if isinstance(first, str) else number)
        )
        return {name: {op: [first, *draw(st.lists(same, max_size=3))]}}
    if op in ("$gt", "$gte", "$lt", "$lte"):
        return {name: {op: draw(number)}}
    return {name: {op: draw(strategy)}}


valid_filter = st.recursive(
    condition(),
    lambda inner: st.builds(
        lambda op, kids: {op: kids},
        st.sampled_from(["$and", "$or"]),
        st.lists(inner, min_size=1, max_size=3),
    ),
    max_leaves=6,
)
junk = st.recursive(
    st.one_of(scalar, st.none()),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.one_of(
                st.sampled_from(
                    [
                        "$and",
                        "$or",
                        "$eq",
                        "$in",
                        "$contains",
                        "user",
                        "n",
                        "tags",
                        "created_at",
                        "$bogus",
                        "hm:tags",
                    ]
                ),
                hostile_text,
            ),
            inner,
            max_size=3,
        ),
    ),
    max_leaves=8,
)
any_filter = st.one_of(valid_filter, junk)


# --- the reference evaluator (Chroma's semantics, written independently) -------------------


def kind(value: Any) -> str:
    if isinstance(value, bool):
        return "b"
    return "n" if isinstance(value, (int, float)) else "s"


def same(a: Any, b: Any) -> bool:
    return kind(a) == kind(b) and a == b


def passes(where: dict[str, Any], memory: dict[str, Any]) -> bool:
    return all(_passes(key, value, memory) for key, value in where.items())


def _passes(key: str, value: Any, memory: dict[str, Any]) -> bool:
    if key == "$and":
        return all(passes(w, memory) for w in value)
    if key == "$or":
        return any(passes(w, memory) for w in value)
    ops = value if isinstance(value, dict) else {"$eq": value}
    return all(_test(key, op, operand, memory) for op, operand in ops.items())


def _test(field: str, op: str, operand: Any, memory: dict[str, Any]) -> bool:
    if field == "tags":
        found = operand.lower() in memory["tags"]
        return found if op == "$contains" else not found
    if field == "created_at":
        stored = memory["created_at"]
        return {
            "$eq": stored == operand,
            "$ne": stored != operand,
            "$gt": stored > operand,
            "$gte": stored >= operand,
            "$lt": stored < operand,
            "$lte": stored <= operand,
        }[op]
    meta = memory["metadata"]
    stored = meta.get(field)
    if op in ("$contains", "$not_contains"):
        found = isinstance(stored, list) and any(same(v, operand) for v in stored)
        return found if op == "$contains" else not found
    single = field in meta and not isinstance(stored, list)
    if op in ("$in", "$nin"):
        found = single and any(same(stored, v) for v in operand)
        return found if op == "$in" else not found
    if op in ("$eq", "$ne"):
        found = single and same(stored, operand)
        return found if op == "$eq" else not found
    if not single or kind(stored) != "n":
        return False
    return {
        "$gt": stored > operand,
        "$gte": stored >= operand,
        "$lt": stored < operand,
        "$lte": stored <= operand,
    }[op]


def expected_ids(where: dict[str, Any]) -> set[str]:
    return {d["id"] for d in DATA if passes(where, d)}


# --- properties ----------------------------------------------------------------------------


@SETTINGS
@given(
    text=hostile_text,
    tags=tags,
    metadata=metadata,
    created_at=times,
    memory_id=st.one_of(st.none(), hostile_text, st.integers(), st.binary(max_size=3)),
)
def test_add_stores_exactly_what_it_acknowledges_or_nothing(
    store: HybridMemory, text: str, tags: Any, metadata: Any, created_at: Any, memory_id: Any
) -> None:
    assume(memory_id is None or not (isinstance(memory_id, str) and memory_id.startswith("m")))
    before = snapshot(store)
    try:
        new_id = store.add(
            text,
            id=memory_id,
            tags=tags,
            metadata=metadata,
            created_at=created_at,
            allow_duplicates=True,
        )
    except InvalidInputError:
        assert snapshot(store) == before
        return
    try:
        got = store.get(new_id)
        assert got.text == text
        assert got.metadata == {
            k: list(v) if isinstance(v, tuple) else v for k, v in (metadata or {}).items()
        }
        assert len(got.tags) == len(set(got.tags)) == len(set(got.tags) & set(store.tags()))
        assert store.count() == before[0] + 1
        if created_at is not None and got.created_at is not None:
            assert math.isfinite(got.created_at.timestamp())
        store.search(text, k=5)  # every leg reads it back without an error
    finally:
        store.delete(new_id)
    assert snapshot(store) == before


@SETTINGS
@given(where=valid_filter, query=st.sampled_from(["memory of alice", "topic2 word7", "bob"]))
def test_filters_from_the_grammar_give_exactly_the_passing_memories(
    store: HybridMemory, where: dict[str, Any], query: str
) -> None:
    expected = expected_ids(where)
    assert store.count(where) == len(expected)
    for alpha in (0.0, 1.0, None):
        hits = store.search(query, k=30, filter=where, alpha=alpha)
        assert {h.id for h in hits} <= expected
    # The vector leg alone reaches every passing memory when k covers them all.
    assert {h.id for h in store.search(query, k=30, filter=where, alpha=1.0)} == expected


@SETTINGS
@given(
    where=any_filter,
    query=hostile_text,
    k=st.one_of(st.integers(-2, 60), st.floats()),
    now=times,
    alpha=st.one_of(st.none(), st.floats()),
)
def test_any_filter_or_argument_gives_a_library_error_or_a_result(
    store: HybridMemory, where: Any, query: Any, k: Any, now: Any, alpha: Any
) -> None:
    before = snapshot(store)
    try:
        hits = store.search(query, filter=where, k=k, now=now, alpha=alpha)
    except InvalidInputError:
        pass
    else:
        assert len(hits) <= k
    with contextlib.suppress(InvalidInputError):
        store.count(where)
    assert snapshot(store) == before


@settings(SETTINGS, max_examples=max(5, EXAMPLES // 4))
@given(where=st.one_of(valid_filter, junk))
def test_delete_by_filter_removes_exactly_the_passing_memories(
    store: HybridMemory, where: Any
) -> None:
    before = snapshot(store)
    try:
        deleted = store.delete(filter=where)
    except InvalidInputError:
        assert snapshot(store) == before
        return
    try:
        expected = expected_ids(where)
        assert deleted == len(expected)
        assert store.count() == len(DATA) - len(expected)
        assert not {h.id for h in store.search("memory", k=50)} & expected
    finally:
        store.add_many([d for d in DATA if d["id"] in expected_ids(where)], upsert=True)
    assert snapshot(store) == before


@SETTINGS
@given(
    ids=st.one_of(
        hostile_text,
        st.lists(st.one_of(hostile_text, st.integers()), max_size=3),
        st.integers(),
        st.binary(max_size=4),
        st.none(),
        st.floats(),
    )
)
def test_get_and_delete_by_id_give_a_library_error_or_a_result(
    store: HybridMemory, ids: Any
) -> None:
    assume(not (isinstance(ids, str) and ids in {d["id"] for d in DATA}))
    assume(not (isinstance(ids, list) and {d["id"] for d in DATA} & set(map(str, ids))))
    before = snapshot(store)
    for call in (store.get_many, store.delete):
        try:
            call(ids)
        except HybridMemoryError as exc:
            assert isinstance(exc, (InvalidInputError, KeyError)), exc
    assert snapshot(store) == before
