"""A filter as SQL over the keyword index's tables, and the rows that index a memory's
metadata for it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hybrid_memory._model.filters.grammar import (
    ARRAY_OPS,
    LIST_OPS,
    ORDER_OPS,
    TAGS_FIELD,
    TIME_FIELDS,
    Logical,
    Node,
    Scalar,
    kind_of,
)

_SQL_OPERATORS = {"$eq": "=", "$ne": "!=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def to_sql(node: Node | None, alias: str = "m") -> tuple[str, list[Any]]:
    """A boolean SQL expression over the index tables (``memories`` aliased ``alias``,
    ``memory_meta``, ``memory_tags``), with its parameters. Empty string: no filter."""
    if node is None:
        return "", []
    params: list[Any] = []
    return _sql(node, alias, params), params


def _sql(node: Node, alias: str, params: list[Any]) -> str:
    if isinstance(node, Logical):
        joiner = " AND " if node.op == "$and" else " OR "
        return "(" + joiner.join(_sql(c, alias, params) for c in node.children) + ")"
    rowid = f"{alias}.rowid"
    if node.field == TAGS_FIELD:
        params.append(node.value)
        negate = "NOT " if node.op == "$not_contains" else ""
        return f"{rowid} {negate}IN (SELECT rowid FROM memory_tags WHERE tag = ?)"
    if node.field in TIME_FIELDS:
        params.append(node.value)
        return f"{alias}.{node.field} {_SQL_OPERATORS[node.op]} ?"
    meta = "SELECT rowid FROM memory_meta WHERE key = ? AND kind = ? AND in_array = ? AND "
    negate = "NOT " if node.op in ("$ne", "$nin", "$not_contains") else ""
    if node.op in LIST_OPS:
        values = [_sql_value(v) for v in node.value]
        params.extend([node.field, kind_of(node.value[0]), 0, *values])
        marks = ", ".join("?" * len(values))
        return f"{rowid} {negate}IN ({meta}value IN ({marks}))"
    in_array = 1 if node.op in ARRAY_OPS else 0
    params.extend([node.field, kind_of(node.value), in_array, _sql_value(node.value)])
    if node.op in ORDER_OPS:
        return f"{rowid} IN ({meta}value {_SQL_OPERATORS[node.op]} ?)"
    return f"{rowid} {negate}IN ({meta}value = ?)"


def _sql_value(value: Scalar) -> Scalar:
    return int(value) if isinstance(value, bool) else value


def metadata_rows(metadata: Mapping[str, Any]) -> list[tuple[str, str, int, Scalar]]:
    """(key, kind, in_array, value) rows that index ``metadata`` for :func:`to_sql`."""
    rows: list[tuple[str, str, int, Scalar]] = []
    for key, value in metadata.items():
        if isinstance(value, list):
            rows.extend((key, kind_of(v), 1, _sql_value(v)) for v in value)
        else:
            rows.append((key, kind_of(value), 0, _sql_value(value)))
    return rows
