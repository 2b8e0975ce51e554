"""Filters: validation, the Chroma translation, and three-way parity.

The parity tests run every filter three ways over the same memories: through a real
embedded Chroma collection (``get(where=to_chroma(node))``), through SQL over a real
:class:`KeywordIndex` (``to_sql``), and in Python (``matches``). Each search leg
applies the filter with a different one of these, so any disagreement means a
search returns different memories depending on which leg found them. Chroma tests
the part of a filter without tags (``chroma_part``): it must pass every memory that
passes the filter, and exactly those when the part is the whole filter.
"""

from __future__ import annotations

import json
import math
import uuid
from datetime import datetime, timezone
from typing import Any

import chromadb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_memory._keyword.index import KeywordIndex
from hybrid_memory._model.errors import InvalidInputError
from hybrid_memory._model.filters import (
    COMPARISON_OPS,
    Condition,
    Logical,
    chroma_part,
    matches,
    parse_filter,
    to_chroma,
    to_sql,
)
from hybrid_memory._model.records import CREATED_KEY, TAGS_KEY, UPDATED_KEY, IndexRow

TOKENIZER = "porter unicode61 remove_diacritics 2"
DAY = 86_400.0
T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z

# --- validation ------------------------------------------------------------------------


@pytest.mark.parametrize("where", [None, {}])
def test_no_filter_is_none(where: Any) -> None:
    assert parse_filter(where) is None
    assert to_chroma(None) is None
    assert to_sql(None) == ("", [])
    assert matches(None, {}) is True


def test_implicit_eq_and_several_fields_make_an_and() -> None:
    node = parse_filter({"user": "alice", "session": {"$gte": 3, "$lt": 9}})
    assert node == Logical(
        "$and",
        (
            Condition("user", "$eq", "alice"),
            Condition("session", "$gte", 3),
            Condition("session", "$lt", 9),
        ),
    )


def test_a_logical_with_one_child_collapses_to_the_child() -> None:
    # Chroma rejects {"$and": [one]}, so a one-element list must not survive parsing.
    assert parse_filter({"$or": [{"user": "alice"}]}) == Condition("user", "$eq", "alice")


def test_unknown_field_operator_names_path_and_allowed_operators() -> None:
    with pytest.raises(InvalidInputError) as info:
        parse_filter({"$and": [{"user": "a"}, {"session": {"$between": [1, 2]}}]})
    message = str(info.value)
    assert info.value.field == "filter.$and[1].session"
    assert "'$between'" in message
    for op in COMPARISON_OPS:
        assert op in message


def test_unknown_top_level_operator_lists_logical_operators() -> None:
    with pytest.raises(InvalidInputError) as info:
        parse_filter({"$not": {"user": "a"}})
    assert info.value.field == "filter"
    assert "'$not'" in str(info.value)
    assert "$and" in str(info.value) and "$or" in str(info.value)


def test_path_uses_the_given_field_name() -> None:
    with pytest.raises(InvalidInputError) as info:
        parse_filter({"x": {"$nope": 1}}, field="where")
    assert info.value.field == "where.x"
    assert str(info.value).startswith("where.x: ")


@pytest.mark.parametrize(
    ("where", "path", "fragment"),
    [
        ("user=alice", "filter", "expected a dict"),
        ({"$and": []}, "filter.$and", "non-empty list"),
        ({"$or": "abc"}, "filter.$or", "non-empty list"),
        ({"$and": [{"a": 1}, {}]}, "filter.$and[1]", "non-empty dict"),
        ({"$and": [{"a": 1}, 3]}, "filter.$and[1]", "non-empty dict"),
        ({1: "a"}, "filter", "field names must be strings"),
        ({"hm:tags": "x"}, "filter.hm:tags", "internal"),
        ({"user": {}}, "filter.user", "expected an operator"),
        ({"user": None}, "filter.user", "expected a str, int, float or bool"),
        ({"user": ["a", "b"]}, "filter.user", "expected a str, int, float or bool"),
        ({"user": {"$eq": {"nested": 1}}}, "filter.user.$eq", "expected a str"),
        ({"n": {"$gt": "b"}}, "filter.n.$gt", "compares numbers only"),
        ({"n": {"$lte": True}}, "filter.n.$lte", "compares numbers only"),
        ({"n": {"$in": []}}, "filter.n.$in", "non-empty list"),
        ({"n": {"$in": "abc"}}, "filter.n.$in", "non-empty list"),
        ({"n": {"$nin": 3}}, "filter.n.$nin", "non-empty list"),
        ({"n": {"$in": [1, "1"]}}, "filter.n.$in", "one type"),
        ({"n": {"$in": [1, True]}}, "filter.n.$in", "one type"),
        ({"n": {"$in": [1, None]}}, "filter.n.$in", "expected a str"),
        ({"tags": "ui"}, "filter.tags", "$contains or $not_contains"),
        ({"tags": {"$in": ["ui"]}}, "filter.tags.$in", "$contains or $not_contains"),
        ({"tags": {"$contains": 3}}, "filter.tags.$contains", "must be a string"),
        ({"tags": {"$contains": "  "}}, "filter.tags.$contains", "empty or blank"),
        ({"created_at": {"$in": [1.0]}}, "filter.created_at.$in", "$gte"),
        ({"created_at": {"$contains": 1.0}}, "filter.created_at.$contains", "$lte"),
        ({"updated_at": True}, "filter.updated_at", "expected a datetime"),
        ({"updated_at": {"$gt": [1]}}, "filter.updated_at.$gt", "expected a datetime"),
        ({"created_at": {"$gt": "yesterday"}}, "filter.created_at.$gt", "ISO 8601"),
    ],
)
def test_invalid_filters_name_the_path(where: Any, path: str, fragment: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        parse_filter(where)
    assert info.value.field == path
    assert isinstance(info.value, ValueError)
    assert fragment in str(info.value)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 2**63, -(2**63) - 1, 10**30])
def test_numbers_neither_chroma_nor_sqlite_can_compare_are_rejected(value: float) -> None:
    # Chroma answers "Invalid where clause" for these and SQLite cannot bind an int
    # beyond 64 bits, so they must fail validation instead of failing inside one leg.
    for where in ({"n": value}, {"n": {"$gt": value}}, {"n": {"$in": [1, value]}}):
        with pytest.raises(InvalidInputError, match=r"filter\.n"):
            parse_filter(where)


def test_64_bit_bounds_are_accepted() -> None:
    assert parse_filter({"n": 2**63 - 1}) == Condition("n", "$eq", 2**63 - 1)
    assert parse_filter({"n": -(2**63)}) == Condition("n", "$eq", -(2**63))


def test_tag_values_are_normalised_like_stored_tags() -> None:
    assert parse_filter({"tags": {"$contains": "  New   YORK "}}) == Condition(
        "tags", "$contains", "new york"
    )


@pytest.mark.parametrize(
    "value",
    [
        datetime(2023, 11, 14, 22, 13, 20, tzinfo=timezone.utc),
        datetime(2023, 11, 14, 22, 13, 20),  # naive means UTC
        "2023-11-14T22:13:20Z",
        "2023-11-14T23:13:20+01:00",
        T0,
        int(T0),
    ],
)
def test_time_values_become_epoch_seconds(value: Any) -> None:
    node = parse_filter({"created_at": {"$gte": value}})
    assert node == Condition("created_at", "$gte", T0)
    assert isinstance(node.value, float)


# --- to_chroma ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ({"user": "alice"}, {"user": {"$eq": "alice"}}),
        ({"flag": {"$ne": False}}, {"flag": {"$ne": False}}),
        ({"n": {"$gt": 2}}, {"n": {"$gt": 2}}),
        ({"n": {"$lte": 2.0}}, {"n": {"$lte": 2.0}}),
        ({"user": {"$in": ["a", "b"]}}, {"user": {"$in": ["a", "b"]}}),
        ({"user": {"$nin": ["a"]}}, {"user": {"$nin": ["a"]}}),
        ({"n": {"$in": [1, 2]}}, {"n": {"$in": [1, 2]}}),
        ({"langs": {"$contains": "en"}}, {"langs": {"$contains": "en"}}),
        ({"created_at": {"$gte": T0}}, {CREATED_KEY: {"$gte": T0}}),
        ({"updated_at": {"$lt": "2023-11-14T22:13:20Z"}}, {UPDATED_KEY: {"$lt": T0}}),
        (
            {"user": "a", "$or": [{"n": 1}, {"created_at": {"$gt": T0}}]},
            {
                "$and": [
                    {"user": {"$eq": "a"}},
                    {"$or": [{"n": {"$eq": 1}}, {CREATED_KEY: {"$gt": T0}}]},
                ]
            },
        ),
    ],
)
def test_to_chroma(where: dict[str, Any], expected: dict[str, Any]) -> None:
    assert to_chroma(parse_filter(where)) == expected


def test_to_chroma_refuses_tags() -> None:
    # The collection holds tags as one JSON string, which Chroma cannot test.
    with pytest.raises(ValueError, match="tags"):
        to_chroma(parse_filter({"user": "a", "tags": {"$contains": "ui"}}))


@pytest.mark.parametrize(
    ("where", "part", "exact"),
    [
        ({"user": "a"}, {"user": "a"}, True),
        ({"tags": {"$contains": "ui"}}, None, False),
        ({"tags": {"$not_contains": "ui"}}, None, False),
        ({"user": "a", "tags": {"$contains": "ui"}}, {"user": "a"}, False),
        (
            {"user": "a", "n": 2, "tags": {"$contains": "ui"}},
            {"user": "a", "n": 2},
            False,
        ),
        ({"$or": [{"user": "a"}, {"tags": {"$contains": "ui"}}]}, None, False),
        (
            {"$or": [{"user": "a"}, {"user": "b", "tags": {"$contains": "ui"}}]},
            {"$or": [{"user": "a"}, {"user": "b"}]},
            False,
        ),
        ({"$and": [{"tags": {"$contains": "a"}}, {"tags": {"$contains": "b"}}]}, None, False),
        (
            {"$or": [{"user": "a"}, {"n": {"$gt": 1}}]},
            {"$or": [{"user": "a"}, {"n": {"$gt": 1}}]},
            True,
        ),
    ],
)
def test_chroma_part(where: dict[str, Any], part: dict[str, Any] | None, exact: bool) -> None:
    assert chroma_part(parse_filter(where)) == (parse_filter(part), exact)


def test_to_chroma_compares_numbers_by_value_despite_chroma_types() -> None:
    # Chroma's metadata arrays are typed (an int array never contains 2.0) and its
    # $in wants one type, so numbers are spelled in every form a stored value may take.
    assert to_chroma(parse_filter({"n": {"$contains": 2}})) == {
        "$or": [{"n": {"$contains": 2}}, {"n": {"$contains": 2.0}}]
    }
    assert to_chroma(parse_filter({"n": {"$not_contains": 2.0}})) == {
        "$and": [{"n": {"$not_contains": 2}}, {"n": {"$not_contains": 2.0}}]
    }
    assert to_chroma(parse_filter({"n": {"$in": [1, 2.0]}})) == {"n": {"$in": [1, 2]}}


# --- three-way parity -------------------------------------------------------------------

# Varied metadata: the same field holds ints, floats, bools, strings and lists on
# different memories, and is missing on others.
ROWS: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
    ("m00", {"user": "alice", "n": 1, "flag": True, "score": 0.5}, ("alice", "ui")),
    ("m01", {"user": "bob", "n": 1.0, "flag": False, "score": 3}, ("bob",)),
    ("m02", {"user": "Alice", "n": 2, "flag": 1, "score": 3.0}, ("alice", "new york")),
    ("m03", {"user": "carol", "n": 1.5, "flag": 0}, ()),
    ("m04", {"user": "", "n": -3, "langs": ["en", "fr"]}, ("ui",)),
    ("m05", {"n": True, "langs": ["de"]}, ("zoë", "東京")),
    ("m06", {"n": "1", "langs": "en", "score": -0.25}, ()),
    ("m07", {"n": [1, 2], "user": "bob"}, ("bob", "ui")),
    ("m08", {"n": [1.5, 2.0], "flag": [True, False]}, ("new york",)),
    ("m09", {"n": [2.0, 3.0], "user": "dave", "score": 2.5}, ("dave",)),
    ("m10", {"n": ["1", "2"], "score": 1}, ()),
    ("m11", {"other": "x"}, ("alice",)),
    ("m12", {"n": -0.5, "score": 0.25, "user": "zoë"}, ("zoë",)),
    ("m13", {"n": 2.5, "user": "eve", "flag": True}, ()),
    ("m14", {"n": 0, "user": "東京"}, ("東京", "ui", "alice")),
    ("m15", {"n": -1, "score": -1.5}, ()),
    ("m16", {"n": 3, "langs": ["en"], "flag": False}, ("ui",)),
    ("m17", {"n": 10**12, "score": 1e-3}, ()),
]


def _times(i: int) -> tuple[float, float]:
    created = T0 + i * DAY + 0.25 * i
    return created, created + (i % 4) * 3600.5


@pytest.fixture(scope="module")
def stores() -> Any:
    client = chromadb.EphemeralClient()
    collection = client.create_collection(
        f"filters-parity-{uuid.uuid4().hex}", embedding_function=None
    )
    index = KeywordIndex(None, TOKENIZER)
    index_rows: list[IndexRow] = []
    chroma_meta: list[dict[str, Any]] = []
    for i, (memory_id, metadata, tags) in enumerate(ROWS):
        created, updated = _times(i)
        index_rows.append(IndexRow(memory_id, f"memory {i}", tags, metadata, "", created, updated))
        stored = dict(metadata)
        if tags:  # as HybridMemory writes them: no tag key for a memory without tags
            stored[TAGS_KEY] = json.dumps(tags)
        stored[CREATED_KEY] = created
        stored[UPDATED_KEY] = updated
        chroma_meta.append(stored)
    collection.add(
        ids=[r.id for r in index_rows],
        embeddings=[[float(i), 1.0, 0.5] for i in range(len(index_rows))],
        metadatas=chroma_meta,
        documents=[r.text for r in index_rows],
    )
    index.upsert(index_rows)
    yield collection, index, index_rows
    index.close()
    client.delete_collection(collection.name)


def _three_ways(stores: Any, where: dict[str, Any]) -> tuple[set[str], set[str], set[str]]:
    collection, index, rows = stores
    node = parse_filter(where)
    part, exact = chroma_part(node)
    chroma_ids = set(collection.get(where=to_chroma(part), include=[])["ids"])
    sql_ids = set(index.page(node, None, 0))  # the filter as SQL, in the index
    assert index.count(node) == len(sql_ids)
    py_ids = {r.id for r in rows if matches(node, r.metadata, r.tags, r.created_at, r.updated_at)}
    if not exact:  # the part Chroma tests passes every memory that passes the filter
        assert py_ids <= chroma_ids, f"filter {where!r}: chroma_part lost memories"
        chroma_ids = {i for i in chroma_ids if i in py_ids}
    return chroma_ids, sql_ids, py_ids


def _assert_parity(stores: Any, where: dict[str, Any]) -> set[str]:
    chroma_ids, sql_ids, py_ids = _three_ways(stores, where)
    assert chroma_ids == sql_ids == py_ids, (
        f"filter {where!r}: chroma={sorted(chroma_ids)} sql={sorted(sql_ids)} "
        f"python={sorted(py_ids)}"
    )
    return py_ids


C3, U5 = _times(3)[0], _times(5)[1]

# (filter, the ids it must select), worked out by hand from ROWS.
HAND_CASES: list[tuple[dict[str, Any], set[str]]] = [
    ({"user": "alice"}, {"m00"}),  # case-sensitive: not "Alice"
    ({"user": ""}, {"m04"}),
    ({"user": "zoë"}, {"m12"}),
    ({"user": "東京"}, {"m14"}),
    ({"n": 1}, {"m00", "m01"}),  # int 1 and float 1.0; not True, "1" or [1, 2]
    ({"n": 1.0}, {"m00", "m01"}),
    ({"n": True}, {"m05"}),  # numbers never equal booleans
    ({"n": "1"}, {"m06"}),
    ({"n": 0}, {"m14"}),
    ({"flag": False}, {"m01", "m16"}),  # not int 0
    ({"flag": 1}, {"m02"}),  # not True
    ({"n": 1.5}, {"m03"}),
    ({"n": 2.5}, {"m13"}),
    ({"n": -0.5}, {"m12"}),
    # $ne, $nin, $not_contains also match memories without the field (and list values)
    (
        {"n": {"$ne": 1}},
        {f"m{i:02d}" for i in range(18)} - {"m00", "m01"},
    ),
    ({"n": {"$ne": 1.5}}, {f"m{i:02d}" for i in range(18)} - {"m03"}),
    ({"user": {"$ne": "bob"}}, {f"m{i:02d}" for i in range(18)} - {"m01", "m07"}),
    ({"n": {"$nin": [1, 2.5]}}, {f"m{i:02d}" for i in range(18)} - {"m00", "m01", "m13"}),
    ({"flag": {"$nin": [True]}}, {f"m{i:02d}" for i in range(18)} - {"m00", "m13"}),
    ({"n": {"$gt": 1}}, {"m02", "m03", "m13", "m16", "m17"}),
    ({"n": {"$gte": 1}}, {"m00", "m01", "m02", "m03", "m13", "m16", "m17"}),
    ({"n": {"$gt": 1.5}}, {"m02", "m13", "m16", "m17"}),
    ({"n": {"$gte": 1.5}}, {"m02", "m03", "m13", "m16", "m17"}),
    ({"n": {"$lt": 1.5}}, {"m00", "m01", "m04", "m12", "m14", "m15"}),
    ({"n": {"$lte": 1.5}}, {"m00", "m01", "m03", "m04", "m12", "m14", "m15"}),
    ({"n": {"$gt": -1.5}}, {"m00", "m01", "m02", "m03", "m12", "m13", "m14", "m15", "m16", "m17"}),
    ({"n": {"$lte": -0.5}}, {"m04", "m12", "m15"}),
    ({"n": {"$lt": -0.5}}, {"m04", "m15"}),
    ({"n": {"$gt": 0, "$lt": 2}}, {"m00", "m01", "m03"}),
    ({"score": {"$gte": 3}}, {"m01", "m02"}),
    ({"n": {"$in": [1, 2]}}, {"m00", "m01", "m02"}),
    ({"n": {"$in": [1.5, 3]}}, {"m03", "m16"}),
    ({"n": {"$in": [True]}}, {"m05"}),
    ({"n": {"$in": ["1", "2"]}}, {"m06"}),
    ({"user": {"$in": ["bob", "eve"]}}, {"m01", "m07", "m13"}),
    ({"n": {"$contains": 2}}, {"m07", "m08", "m09"}),  # int and float arrays alike
    ({"n": {"$contains": 2.0}}, {"m07", "m08", "m09"}),
    ({"n": {"$contains": 1.5}}, {"m08"}),
    ({"n": {"$contains": 1}}, {"m07"}),  # never a scalar 1
    ({"n": {"$contains": "1"}}, {"m10"}),
    ({"flag": {"$contains": True}}, {"m08"}),
    ({"langs": {"$contains": "en"}}, {"m04", "m16"}),  # not the scalar "en"
    ({"langs": {"$not_contains": "en"}}, {f"m{i:02d}" for i in range(18)} - {"m04", "m16"}),
    ({"n": {"$not_contains": 2}}, {f"m{i:02d}" for i in range(18)} - {"m07", "m08", "m09"}),
    ({"tags": {"$contains": "alice"}}, {"m00", "m02", "m11", "m14"}),
    ({"tags": {"$contains": "New York"}}, {"m02", "m08"}),
    ({"tags": {"$contains": "ZOË"}}, {"m05", "m12"}),
    ({"tags": {"$contains": "東京"}}, {"m05", "m14"}),
    (
        {"tags": {"$not_contains": "ui"}},
        {f"m{i:02d}" for i in range(18)} - {"m00", "m04", "m07", "m14", "m16"},
    ),
    ({"created_at": {"$gte": C3}}, {f"m{i:02d}" for i in range(3, 18)}),
    ({"created_at": {"$gt": C3}}, {f"m{i:02d}" for i in range(4, 18)}),
    ({"created_at": C3}, {"m03"}),
    ({"created_at": {"$ne": C3}}, {f"m{i:02d}" for i in range(18)} - {"m03"}),
    ({"updated_at": {"$lte": U5}}, {f"m{i:02d}" for i in range(6)}),
    ({"updated_at": {"$lt": datetime.fromtimestamp(T0 + DAY, tz=timezone.utc)}}, {"m00"}),
    (
        {"$and": [{"tags": {"$contains": "ui"}}, {"n": {"$lt": 1}}]},
        {"m04", "m14"},
    ),
    (
        {"$or": [{"user": "bob"}, {"tags": {"$contains": "dave"}}, {"n": True}]},
        {"m01", "m07", "m09", "m05"},
    ),
    (
        {
            "$or": [
                {"$and": [{"flag": True}, {"n": {"$gte": 1}}]},
                {"$and": [{"langs": {"$contains": "de"}}, {"tags": {"$not_contains": "ui"}}]},
            ]
        },
        {"m00", "m13", "m05"},
    ),
    ({"missing": {"$ne": 1}}, {f"m{i:02d}" for i in range(18)}),
    ({"missing": 1}, set()),
    ({"n": {"$gt": 10**11}}, {"m17"}),
]


def _case_id(value: Any) -> str:
    """A test id that does not depend on the hash seed (a set's order does)."""
    return repr(sorted(value) if isinstance(value, set) else value)[:60]


@pytest.mark.parametrize(("where", "expected"), HAND_CASES, ids=_case_id)
def test_parity_on_hand_cases(stores: Any, where: dict[str, Any], expected: set[str]) -> None:
    assert _assert_parity(stores, where) == expected


# Values drawn from those stored (and their near misses) so that generated filters
# actually select something.
_NUMBERS = st.sampled_from([0, 1, 2, 3, -1, -3, 1.0, 2.0, 1.5, 2.5, -0.5, 0.25, 1.9, -1.5, 10**12])
_STRINGS = st.sampled_from(["alice", "Alice", "bob", "", "en", "de", "1", "2", "zoë", "東京"])
_SCALARS = st.one_of(_NUMBERS, _STRINGS, st.booleans())
_FIELDS = st.sampled_from(["user", "n", "flag", "score", "langs", "other", "missing"])
_TAGS = st.sampled_from(["alice", "ui", "bob", "new york", "zoë", "東京", "dave", "absent"])
_TIMES = st.sampled_from([_times(i)[j] + d for i in (0, 3, 9, 17) for j in (0, 1) for d in (0, 1)])


def _leaf() -> st.SearchStrategy[dict[str, Any]]:
    user_field = st.one_of(
        st.tuples(_FIELDS, _SCALARS).map(lambda fv: {fv[0]: fv[1]}),
        st.tuples(_FIELDS, st.sampled_from(["$eq", "$ne"]), _SCALARS).map(
            lambda t: {t[0]: {t[1]: t[2]}}
        ),
        st.tuples(_FIELDS, st.sampled_from(["$gt", "$gte", "$lt", "$lte"]), _NUMBERS).map(
            lambda t: {t[0]: {t[1]: t[2]}}
        ),
        st.tuples(
            _FIELDS,
            st.sampled_from(["$in", "$nin"]),
            st.one_of(
                st.lists(_NUMBERS, min_size=1, max_size=3),
                st.lists(_STRINGS, min_size=1, max_size=3),
                st.lists(st.booleans(), min_size=1, max_size=2),
            ),
        ).map(lambda t: {t[0]: {t[1]: t[2]}}),
        st.tuples(_FIELDS, st.sampled_from(["$contains", "$not_contains"]), _SCALARS).map(
            lambda t: {t[0]: {t[1]: t[2]}}
        ),
    )
    tags = st.tuples(st.sampled_from(["$contains", "$not_contains"]), _TAGS).map(
        lambda t: {"tags": {t[0]: t[1]}}
    )
    times = st.tuples(
        st.sampled_from(["created_at", "updated_at"]),
        st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]),
        _TIMES,
    ).map(lambda t: {t[0]: {t[1]: t[2]}})
    return st.one_of(user_field, tags, times)


_FILTERS = st.recursive(
    _leaf(),
    lambda children: st.tuples(
        st.sampled_from(["$and", "$or"]), st.lists(children, min_size=2, max_size=3)
    ).map(lambda t: {t[0]: t[1]}),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(where=_FILTERS)
def test_parity_on_generated_filters(stores: Any, where: dict[str, Any]) -> None:
    _assert_parity(stores, where)
