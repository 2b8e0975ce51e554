"""Metadata filters: one validated form, three ways to apply it.

Users write filters in Chroma's ``where`` syntax over their metadata::

    {"user": "alice"}                                   # implicit $eq
    {"$and": [{"user": "alice"}, {"session": {"$gte": 3}}]}
    {"tags": {"$contains": "ui"}}                       # reserved field: the memory's tags
    {"created_at": {"$gte": datetime(2024, 1, 1, tzinfo=UTC)}}   # reserved: times

A filter is validated once into :class:`Condition` / :class:`Logical` nodes, and
then applied by each search leg *before* its top-k cut: translated to SQL over the
keyword index for the keyword and tag legs (:func:`to_sql`), to a Chroma ``where``
for the vector leg (:func:`to_chroma`), or evaluated in Python (:func:`matches`).
The three agree, including Chroma's rules that ``$ne``, ``$nin`` and
``$not_contains`` also match memories that lack the field, and that numbers never
equal booleans.

The collection keeps a memory's tags as one JSON string (an array would cost Chroma
a row in four indexes per tag on every write), so Chroma cannot test them: the
vector leg runs :func:`chroma_part` of a filter, which every passing memory passes,
and checks its hits against the keyword index when that part is not exact.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Union

from hybrid_memory._model.encodable import encodable
from hybrid_memory._model.errors import InvalidInputError
from hybrid_memory._model.records import CREATED_KEY, RESERVED_PREFIX, UPDATED_KEY
from hybrid_memory._model.times import to_timestamp

TAGS_FIELD = "tags"
TIME_FIELDS = {"created_at": CREATED_KEY, "updated_at": UPDATED_KEY}
RESERVED_FIELDS = frozenset({TAGS_FIELD, *TIME_FIELDS})

EQUALITY_OPS = ("$eq", "$ne")
ORDER_OPS = ("$gt", "$gte", "$lt", "$lte")
LIST_OPS = ("$in", "$nin")
ARRAY_OPS = ("$contains", "$not_contains")
COMPARISON_OPS = EQUALITY_OPS + ORDER_OPS + LIST_OPS + ARRAY_OPS
LOGICAL_OPS = ("$and", "$or")
# How deeply $and / $or may nest: far beyond any real filter, far below the recursion
# limit of the parsers here and in Chroma.
MAX_FILTER_DEPTH = 32

Scalar = Union[str, int, float, bool]  # noqa: UP007 - a runtime alias on 3.10


@dataclass(frozen=True, slots=True)
class Condition:
    field: str
    op: str
    value: Any  # a scalar, a tuple of scalars for $in/$nin, epoch seconds for times


@dataclass(frozen=True, slots=True)
class Logical:
    op: str  # "$and" | "$or"
    children: tuple[Node, ...]


Node = Union[Condition, Logical]  # noqa: UP007 - a runtime alias on 3.10


def kind_of(value: Scalar) -> str:
    """'b' for booleans, 'n' for numbers, 's' for strings (bool is checked before int)."""
    if isinstance(value, bool):
        return "b"
    if isinstance(value, (int, float)):
        return "n"
    return "s"


def parse_filter(
    where: Mapping[str, Any] | None,
    *,
    field: str = "filter",
    single_valued: Callable[[list[str]], list[str]] | None = None,
) -> Node | None:
    """Validate a Chroma-style filter; None or {} means no filter.

    ``single_valued(fields)``: those of the metadata ``fields`` that no memory stores a
    list in; ``$contains`` / ``$not_contains`` on one of them is refused. Chroma (and
    so every leg here) reads them as list membership, never as a substring test: on a
    string field they would match nothing (or everything) without a word."""
    if where is None:
        return None
    if not isinstance(where, Mapping):
        raise InvalidInputError(field, f"expected a dict in Chroma where syntax, got {where!r}")
    if not where:
        return None
    node = _parse(where, field, 1)
    tested = _array_tested_fields(node)
    single = single_valued(sorted(tested)) if tested and single_valued else []
    if single:
        raise InvalidInputError(
            field,
            f"$contains / $not_contains test whether a list holds a value, but "
            f"{single[0]!r} holds single values (no memory stores a list there); "
            "they do not search within strings: use $eq or $in",
        )
    return node


def _array_tested_fields(node: Node) -> set[str]:
    """The metadata fields (not tags) that ``node`` tests with $contains / $not_contains."""
    if isinstance(node, Logical):
        return set().union(*(_array_tested_fields(c) for c in node.children))
    if node.op in ARRAY_OPS and node.field not in RESERVED_FIELDS:
        return {node.field}
    return set()


def _parse(where: Mapping[str, Any], path: str, depth: int) -> Node:
    if depth > MAX_FILTER_DEPTH:
        raise InvalidInputError(
            path.split(".", 1)[0],
            f"nested more than {MAX_FILTER_DEPTH} levels deep ($and / $or); flatten it",
        )
    if not isinstance(where, Mapping) or not where:
        raise InvalidInputError(path, f"expected a non-empty dict, got {_short(where)}")
    nodes: list[Node] = []
    for key, value in where.items():
        if not isinstance(key, str):
            raise InvalidInputError(path, f"field names must be strings, got {key!r}")
        encodable(key, path)
        if key in LOGICAL_OPS:
            if not isinstance(value, Sequence) or isinstance(value, str) or not value:
                raise InvalidInputError(
                    f"{path}.{key}", f"expected a non-empty list of filters, got {_short(value)}"
                )
            children = tuple(
                _parse(v, f"{path}.{key}[{i}]", depth + 1) for i, v in enumerate(value)
            )
            nodes.append(children[0] if len(children) == 1 else Logical(key, children))
        elif key.startswith("$"):
            raise InvalidInputError(
                path,
                f"unknown operator {key!r}; allowed at this level: {', '.join(LOGICAL_OPS)} "
                "or a field name",
            )
        else:
            nodes.extend(_parse_field(key, value, f"{path}.{key}"))
    return nodes[0] if len(nodes) == 1 else Logical("$and", tuple(nodes))


def _parse_field(name: str, value: Any, path: str) -> list[Node]:
    if name.startswith(RESERVED_PREFIX):
        raise InvalidInputError(path, f"field names starting with {RESERVED_PREFIX!r} are internal")
    if not isinstance(value, Mapping):
        return [_condition(name, "$eq", value, path)]
    if not value:
        raise InvalidInputError(path, "expected an operator such as {'$eq': ...}, got {}")
    out: list[Node] = []
    for op, operand in value.items():
        if op not in COMPARISON_OPS:
            raise InvalidInputError(
                path, f"unknown operator {op!r}; allowed: {', '.join(COMPARISON_OPS)}"
            )
        out.append(_condition(name, op, operand, f"{path}.{op}"))
    return out


def _condition(name: str, op: str, value: Any, path: str) -> Condition:
    if name == TAGS_FIELD:
        if op not in ARRAY_OPS:
            raise InvalidInputError(
                path, f"the tags field takes only {' or '.join(ARRAY_OPS)}, got {op}"
            )
        from hybrid_memory._model.tags import normalise_tag

        return Condition(name, op, normalise_tag(value, field=path))
    if name in TIME_FIELDS:
        if op not in EQUALITY_OPS + ORDER_OPS:
            raise InvalidInputError(
                path, f"{name} takes {', '.join(EQUALITY_OPS + ORDER_OPS)}, got {op}"
            )
        if isinstance(value, bool) or not isinstance(value, (datetime, str, int, float)):
            raise InvalidInputError(
                path, f"expected a datetime, ISO 8601 string or epoch seconds, got {value!r}"
            )
        return Condition(name, op, to_timestamp(value, field=path))
    if op in LIST_OPS:
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not value:
            raise InvalidInputError(path, f"{op} expects a non-empty list, got {value!r}")
        items = tuple(_scalar(v, path) for v in value)
        if len({kind_of(v) for v in items}) > 1:
            raise InvalidInputError(path, f"{op} values must all be of one type, got {value!r}")
        return Condition(name, op, items)
    scalar = _scalar(value, path)
    if op in ORDER_OPS and kind_of(scalar) != "n":
        raise InvalidInputError(path, f"{op} compares numbers only, got {value!r}")
    return Condition(name, op, scalar)


_INT64 = range(-(2**63), 2**63)


def _short(value: Any) -> str:
    """A repr for an error message, cut short (a deeply nested filter's is huge)."""
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "…"


def _scalar(value: Any, path: str) -> Scalar:
    if isinstance(value, float) and not math.isfinite(value):
        # Chroma rejects inf and nan in a where clause ("Invalid where clause").
        raise InvalidInputError(path, f"expected a finite number, got {value!r}")
    if isinstance(value, int) and not isinstance(value, bool) and value not in _INT64:
        # Neither Chroma nor SQLite can compare integers beyond 64 bits.
        raise InvalidInputError(path, f"integers must fit in 64 bits, got {value!r}")
    if isinstance(value, str):
        return encodable(value, path)
    if isinstance(value, (bool, int, float)):
        return value
    raise InvalidInputError(path, f"expected a str, int, float or bool, got {value!r}")


def tests_arrays(node: Node | None) -> bool:
    """Whether the filter tests array values (tags or list metadata) anywhere."""
    if node is None:
        return False
    if isinstance(node, Logical):
        return any(tests_arrays(c) for c in node.children)
    return node.op in ARRAY_OPS


def fields_of(node: Node | None) -> set[str]:
    """The fields the filter tests."""
    if node is None:
        return set()
    if isinstance(node, Logical):
        return set().union(*(fields_of(c) for c in node.children))
    return {node.field}


# --- Chroma -------------------------------------------------------------------------


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
    return int(value) if int(value) in _INT64 else None


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


# --- SQL over the keyword index ----------------------------------------------------------


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


# --- Python ---------------------------------------------------------------------------


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
