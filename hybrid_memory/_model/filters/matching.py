"""A filter evaluated in Python on one memory's fields, with Chroma's semantics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hybrid_memory._model.filters.grammar import (
    ARRAY_OPS,
    EQUALITY_OPS,
    LIST_OPS,
    TAGS_FIELD,
    TIME_FIELDS,
    Logical,
    Node,
    kind_of,
)


def matches(
    node: Node | None,
    metadata: Mapping[str, Any],
    tags: Sequence[str] = (),
    created_at: float | None = None,
    updated_at: float | None = None,
) -> bool:
    """Whether a memory with these fields passes the filter (Chroma's semantics)."""
    if node is None:
        return True
    if isinstance(node, Logical):
        results = (matches(c, metadata, tags, created_at, updated_at) for c in node.children)
        return all(results) if node.op == "$and" else any(results)
    if node.field == TAGS_FIELD:
        return (node.value in tags) == (node.op == "$contains")
    if node.field in TIME_FIELDS:
        stamp = created_at if node.field == "created_at" else updated_at
        return stamp is not None and _compare(node.op, stamp, node.value)
    present = node.field in metadata
    value: Any = metadata.get(node.field)
    if node.op in ARRAY_OPS:
        found = isinstance(value, list) and any(_same(v, node.value) for v in value)
        return found == (node.op == "$contains")
    scalar_present = present and not isinstance(value, list)
    if node.op in LIST_OPS:
        found = scalar_present and any(_same(value, v) for v in node.value)
        return found == (node.op == "$in")
    if node.op in EQUALITY_OPS:
        found = scalar_present and _same(value, node.value)
        return found == (node.op == "$eq")
    return scalar_present and kind_of(value) == "n" and _compare(node.op, value, node.value)


def _same(a: Any, b: Any) -> bool:
    return kind_of(a) == kind_of(b) and a == b


def _compare(op: str, left: float, right: float) -> bool:
    if op == "$eq":
        return left == right
    if op == "$ne":
        return left != right
    if op == "$gt":
        return left > right
    if op == "$gte":
        return left >= right
    if op == "$lt":
        return left < right
    return left <= right
