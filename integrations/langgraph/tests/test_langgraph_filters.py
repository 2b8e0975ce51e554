"""The LangGraph filter rules, pure and table-driven: which conditions become engine
filters over ``lgv:<field>``, which stay in the residual, and how the residual is tested
in Python (JSON semantics, as LangGraph's Postgres store has them)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from langgraph.store.hybrid_memory._filters import (
    engine_scalar,
    json_equal,
    json_matches,
    operator_holds,
    passes,
    translate_filter,
)

from hybrid_memory import InvalidInputError

# filter -> (engine clauses, residual)
TRANSLATED: list[tuple[Any, list[dict[str, Any]], dict[str, Any]]] = [
    (None, [], {}),
    ({}, [], {}),
    ({"kind": "note"}, [{"lgv:kind": "note"}], {}),
    ({"done": True}, [{"lgv:done": True}], {}),
    ({"n": 3, "x": 1.5}, [{"lgv:n": 3}, {"lgv:x": 1.5}], {}),
    ({"n": {"$gte": 3, "$lt": 9}}, [{"lgv:n": {"$gte": 3}}, {"lgv:n": {"$lt": 9}}], {}),
    ({"kind": {"$ne": "draft"}}, [{"lgv:kind": {"$ne": "draft"}}], {}),
    # what the engine cannot hold stays in the residual
    ({"meta": {"a": 1}}, [], {"meta": {"a": 1}}),
    ({"tags": ["a", "b"]}, [], {"tags": ["a", "b"]}),
    ({"gone": None}, [], {"gone": None}),
    ({"big": 2**70}, [], {"big": 2**70}),
    ({"big": {"$gt": 2**70}}, [], {"big": {"$gt": 2**70}}),
    ({"v": {"$eq": [1]}, "k": "a"}, [{"lgv:k": "a"}], {"v": {"$eq": [1]}}),
]


@pytest.mark.parametrize(("given", "clauses", "residual"), TRANSLATED)
def test_translate_filter(given: Any, clauses: list[Any], residual: dict[str, Any]) -> None:
    assert translate_filter(given) == (clauses, residual)


REFUSED: list[tuple[Any, str]] = [
    ("kind=note", "filter: expected a dict of value fields"),
    ({1: "x"}, "filter: field names must be strings"),
    ({"n": {"$in": [1]}}, "unknown operator '$in'"),
    ({"n": {"$gt": "3"}}, "filter['n'].$gt: compares numbers only"),
    ({"n": {"$lte": True}}, "compares numbers only"),
    ({"n": {"$lt": math.nan}}, "compares numbers only"),
]


@pytest.mark.parametrize(("given", "message"), REFUSED)
def test_translate_filter_refuses_naming_the_field(given: Any, message: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        translate_filter(given)
    assert message in str(caught.value)


SCALARS: list[tuple[Any, bool, Any]] = [
    ("s", False, "s"),
    (True, False, True),
    (7, False, 7),
    (2**63 - 1, True, 2**63 - 1),
    (2**63, False, float(2**63)),
    (2**63, True, None),
    (1.5, False, 1.5),
    (math.inf, False, None),
    (math.nan, False, None),
    (None, False, None),
    ([1], False, None),
    ({"a": 1}, False, None),
]


@pytest.mark.parametrize(("value", "exact", "expected"), SCALARS)
def test_engine_scalar(value: Any, exact: bool, expected: Any) -> None:
    assert engine_scalar(value, exact=exact) == expected


MATCHES: list[tuple[Any, Any, bool]] = [
    ({"a": 1, "b": 2}, {"a": 1}, True),  # a dict matches the fields it names
    ({"a": 1}, {"a": 1, "b": None}, True),  # a missing field reads as null
    ({"a": 1}, {"a": 2}, False),
    ({"a": {"b": [1, 2]}}, {"a": {"b": [1, 2]}}, True),
    ([1, 2], [1, 2], True),  # a list matches element by element
    ([1, 2], [2, 1], False),
    ([1, 2], [1], False),
    ("x", ["x"], False),
    (1, True, False),  # numbers never equal booleans
    (True, True, True),
    (1, 1.0, True),
    (None, None, True),
    (5, {"$gt": 3, "$lte": 5}, True),
    (5, {"$gt": 5}, False),
    ("5", {"$gt": 3}, False),  # order operators compare numbers only
    (True, {"$gte": 0}, False),
    (None, {"$lt": 1}, False),
    ("a", {"$ne": "b"}, True),
    (None, {"$ne": "b"}, True),
    ([1], {"$eq": [1]}, True),
]


@pytest.mark.parametrize(("actual", "expected", "result"), MATCHES)
def test_json_matches(actual: Any, expected: Any, result: bool) -> None:
    assert json_matches(actual, expected) is result


EQUAL: list[tuple[Any, Any, bool]] = [
    (1, 1, True),
    (1, True, False),
    (False, 0, False),
    ({"a": [1]}, {"a": [1]}, True),
    ({"a": 1}, {"a": 1, "b": 2}, False),  # equality holds both ways, containment not
    ([], [], True),
]


@pytest.mark.parametrize(("a", "b", "result"), EQUAL)
def test_json_equal(a: Any, b: Any, result: bool) -> None:
    assert json_equal(a, b) is result
    assert json_equal(b, a) is result


@pytest.mark.parametrize(
    ("actual", "op", "operand", "result"),
    [
        (2, "$gt", 1, True),
        (1, "$gte", 1, True),
        (1, "$lt", 1, False),
        (1, "$lte", 1, True),
        (1.5, "$eq", 1.5, True),
        ("1", "$eq", 1, False),
        ("a", "$ne", "a", False),
    ],
)
def test_operator_holds(actual: Any, op: str, operand: Any, result: bool) -> None:
    assert operator_holds(actual, op, operand) is result


def test_passes_tests_the_stored_value_field_by_field() -> None:
    value = json.dumps({"meta": {"lang": "en", "n": 2}, "tags": ["a"], "gone": None})
    assert passes(value, {"meta": {"lang": "en"}, "tags": ["a"], "gone": None})
    assert passes(value, {"missing": None})  # a missing field reads as null
    assert not passes(value, {"meta": {"lang": "fr"}})
    assert passes(value, {})
