"""A filter as a Chroma ``where``, and the part of a filter Chroma can test.

The collection keeps a memory's tags as one JSON string (an array would cost Chroma a
row in four indexes per tag on every write), so Chroma cannot test them: the vector leg
runs :func:`chroma_part` of a filter, which every passing memory passes, and checks its
hits against the keyword index when that part is not exact.
"""

from __future__ import annotations

import math
from typing import Any

from hybrid_memory._model.filters.grammar import (
    ARRAY_OPS,
    INT64,
    LIST_OPS,
    TAGS_FIELD,
    TIME_FIELDS,
    Condition,
    Logical,
    Node,
    kind_of,
)


def chroma_part(node: Node | None) -> tuple[Node | None, bool]:
    """The part of a filter that Chroma can test, and whether it is the whole filter.

    Tag conditions are dropped (Chroma holds tags as one string): from an ``$and`` the
    tag children go, an ``$or`` with a child left with no condition has none. Filters
    have no negation, so every memory passing ``node`` passes the part; None means
    no condition."""
    if node is None:
        return None, True
    if isinstance(node, Condition):
        return (None, False) if node.field == TAGS_FIELD else (node, True)
    parts = [chroma_part(c) for c in node.children]
    exact = all(e for _, e in parts)
    kept = [p for p, _ in parts if p is not None]
    if node.op == "$or" and len(kept) < len(parts):
        return None, False
    if not kept:
        return None, exact
    return (kept[0] if len(kept) == 1 else Logical(node.op, tuple(kept))), exact


def to_chroma(node: Node | None) -> dict[str, Any] | None:
    """The filter as a Chroma ``where`` over the stored keys; it must not test tags
    (see :func:`chroma_part`)."""
    if node is None:
        return None
    if isinstance(node, Logical):
        return {node.op: [to_chroma(c) for c in node.children]}
    if node.field == TAGS_FIELD:
        raise ValueError("tags are stored as one string in Chroma: filter them in the index")
    if node.field in TIME_FIELDS:
        return {TIME_FIELDS[node.field]: {node.op: node.value}}
    if node.op in LIST_OPS:
        if kind_of(node.value[0]) == "n":
            return _chroma_numbers_in(node)
        return {node.field: {node.op: list(node.value)}}
    if kind_of(node.value) != "n":
        return {node.field: {node.op: node.value}}
    if node.op in ARRAY_OPS:
        return _chroma_array_number(node.field, node.op, node.value)
    return _chroma_number(node.field, node.op, node.value)


# Chroma (1.5) compares numbers by value in scalar filters, with two exceptions this
# translation works around so that all three evaluations agree:
# - metadata arrays are typed: an int array never $contains 2.0, a float array never 2;
# - a non-integral float bound is truncated against int-stored values, so 2.5 behaves
#   as 2 there ($eq 2.5 matches an int 2; chroma-core/chroma#7491). The rewrites below
#   add int bounds that fix the int side and are no-ops for floats, so they stay
#   correct once Chroma compares exactly.


def _as_int(value: float) -> int | None:
    """The number as a 64-bit int when it is one (2 and 2.0 alike), else None."""
    if isinstance(value, float) and not value.is_integer():
        return None
    return int(value) if int(value) in INT64 else None


def _chroma_array_number(key: str, op: str, value: float) -> dict[str, Any]:
    whole = _as_int(value)
    if whole is None:
        return {key: {op: value}}  # only a float array can hold it
    forms = [{key: {op: whole}}, {key: {op: float(value)}}]
    return {"$or" if op == "$contains" else "$and": forms}


def _chroma_number(key: str, op: str, value: float) -> dict[str, Any]:
    exact = {key: {op: value}}
    if not isinstance(value, float) or value.is_integer():
        return exact
    low, high = math.floor(value), math.ceil(value)  # the ints around value
    if op == "$eq":  # no int is strictly between low and high
        return {"$and": [exact, {key: {"$gt": low}}, {key: {"$lt": high}}]}
    if op == "$ne":
        return {"$or": [exact, {key: {"$lte": low}}, {key: {"$gte": high}}]}
    if op == "$gt":
        return {"$or": [exact, {key: {"$gte": high}}]}
    if op == "$gte":
        return {"$and": [exact, {key: {"$gt": low}}]}
    if op == "$lt":
        return {"$or": [exact, {key: {"$lte": low}}]}
    return {"$and": [exact, {key: {"$lt": high}}]}  # $lte


def _chroma_numbers_in(node: Condition) -> dict[str, Any]:
    # Chroma wants one type in $in/$nin: integral values go as ints (an int bound is
    # compared exactly with ints and floats), the rest as one $eq / $ne each.
    whole = dict.fromkeys(i for i in map(_as_int, node.value) if i is not None)
    rest = dict.fromkeys(v for v in node.value if _as_int(v) is None)
    single = "$eq" if node.op == "$in" else "$ne"
    parts = [{node.field: {node.op: list(whole)}}] if whole else []
    parts += [_chroma_number(node.field, single, v) for v in rest]
    if len(parts) == 1:
        return parts[0]
    return {"$or" if node.op == "$in" else "$and": parts}
