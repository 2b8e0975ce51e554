"""The filter grammar: Chroma's ``where`` syntax over a memory's metadata, plus the
reserved fields ``tags``, ``created_at`` and ``updated_at``, validated once into
:class:`Condition` / :class:`Logical` nodes (every error names the part of the filter at
fault)."""

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


# The integers Chroma and SQLite compare: 64 bits.
INT64 = range(-(2**63), 2**63)


def _short(value: Any) -> str:
    """A repr for an error message, cut short (a deeply nested filter's is huge)."""
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "…"


def _scalar(value: Any, path: str) -> Scalar:
    if isinstance(value, float) and not math.isfinite(value):
        # Chroma rejects inf and nan in a where clause ("Invalid where clause").
        raise InvalidInputError(path, f"expected a finite number, got {value!r}")
    if isinstance(value, int) and not isinstance(value, bool) and value not in INT64:
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
