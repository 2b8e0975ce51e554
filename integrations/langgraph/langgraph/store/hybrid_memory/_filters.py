"""LangGraph search filters, pure: which conditions become engine filters over the
item layout (``lgv:<field>``, see :mod:`._layout`) and how the others (a nested dict, a
list, null) are tested in Python, with JSON semantics as LangGraph's Postgres store has
them. No I/O: ``tests/test_langgraph_filters.py`` drives every rule from a table."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from langgraph.store.hybrid_memory._layout import VALUE_FIELD

from hybrid_memory import InvalidInputError

FILTER_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
ORDER_OPERATORS = ("$gt", "$gte", "$lt", "$lte")
INT64 = range(-(2**63), 2**63)


def translate_filter(
    filter: Mapping[str, Any] | None, field: str = "filter"
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A LangGraph search filter as ``(engine clauses, residual)``: conditions on a
    top-level field compared with a string, number or boolean become engine filters
    on ``lgv:<field>``; the others (a nested dict, a list, null) stay in the residual,
    checked in Python on every item in scope before any paging or search cut.

    Numbers never equal booleans, and ``$gt``/``$gte``/``$lt``/``$lte`` compare
    numbers only (an item whose field is missing or not a number does not pass),
    as in LangGraph's Postgres store (JSON semantics)."""
    if filter is None:
        return [], {}
    if not isinstance(filter, Mapping):
        raise InvalidInputError(field, f"expected a dict of value fields, got {filter!r}")
    clauses: list[dict[str, Any]] = []
    residual: dict[str, Any] = {}
    for name, expected in filter.items():
        path = f"{field}[{name!r}]"
        if not isinstance(name, str):
            raise InvalidInputError(field, f"field names must be strings, got {name!r}")
        key = VALUE_FIELD + name
        if isinstance(expected, Mapping) and any(str(k).startswith("$") for k in expected):
            for op, operand in expected.items():
                if op not in FILTER_OPERATORS:
                    raise InvalidInputError(
                        path, f"unknown operator {op!r}; allowed: {', '.join(FILTER_OPERATORS)}"
                    )
                if op in ORDER_OPERATORS and (
                    isinstance(operand, bool)
                    or not isinstance(operand, (int, float))
                    or (isinstance(operand, float) and math.isnan(operand))
                ):
                    raise InvalidInputError(
                        f"{path}.{op}", f"compares numbers only (not NaN), got {operand!r}"
                    )
                scalar = engine_scalar(operand, exact=True)
                if scalar is None:
                    residual.setdefault(name, {})[op] = operand
                else:
                    clauses.append({key: {op: scalar}})
        else:
            scalar = engine_scalar(expected, exact=True)
            if scalar is None:
                residual[name] = expected
            else:
                clauses.append({key: scalar})
    return clauses, residual


def engine_scalar(value: Any, *, exact: bool = False) -> str | int | float | bool | None:
    """``value`` as engine metadata when it is a string, boolean or finite number (an
    integer beyond 64 bits as a float, unless ``exact``), else None."""
    if isinstance(value, (str, bool)):
        return value
    if isinstance(value, int):
        if value in INT64:
            return value
        return None if exact else float(value)
    if isinstance(value, float) and math.isfinite(value):
        return value
    return None


def passes(encoded: str, residual: Mapping[str, Any]) -> bool:
    """Whether the value whose JSON text is ``encoded`` passes the ``residual`` of
    :func:`translate_filter` (field by field, as :func:`json_matches`)."""
    value = json.loads(encoded)
    return all(json_matches(value.get(name), expected) for name, expected in residual.items())


def json_matches(actual: Any, expected: Any) -> bool:
    """JSON containment as LangGraph filters mean it: a dict matches the fields it
    names, a list matches element by element, operators compare."""
    if isinstance(expected, Mapping):
        if any(str(k).startswith("$") for k in expected):
            return all(operator_holds(actual, op, operand) for op, operand in expected.items())
        return isinstance(actual, Mapping) and all(
            json_matches(actual.get(k), v) for k, v in expected.items()
        )
    if isinstance(expected, (list, tuple)):
        return (
            isinstance(actual, (list, tuple))
            and len(actual) == len(expected)
            and all(json_matches(a, e) for a, e in zip(actual, expected, strict=True))
        )
    return json_equal(actual, expected)


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: booleans equal only booleans (``1 != true``), containers compare
    both ways."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (Mapping, list, tuple)) or isinstance(b, (Mapping, list, tuple)):
        return json_matches(a, b) and json_matches(b, a)
    return bool(a == b)


def operator_holds(actual: Any, op: str, operand: Any) -> bool:
    """Whether ``actual`` passes the condition ``{op: operand}``; the order operators
    hold for numbers only (a missing field, a string or a boolean never passes)."""
    if op == "$eq":
        return json_equal(actual, operand)
    if op == "$ne":
        return not json_equal(actual, operand)
    if isinstance(actual, bool) or not isinstance(actual, (int, float)):
        return False
    if op == "$gt":
        return bool(actual > operand)
    if op == "$gte":
        return bool(actual >= operand)
    if op == "$lt":
        return bool(actual < operand)
    return bool(actual <= operand)
