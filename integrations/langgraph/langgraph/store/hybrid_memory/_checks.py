"""Checking what LangGraph hands the store (index and TTL configurations, operations)
before anything runs: a bad one raises naming the field, and nothing is written."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, cast

from langgraph.store.base import (
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
    TTLConfig,
    tokenize_path,
    validate_op_namespace,
)
from langgraph.store.hybrid_memory._filters import translate_filter

from hybrid_memory import InvalidInputError


def sweep_minutes(given: float | None, ttl_config: TTLConfig | None) -> float:
    """The sweeper's interval in minutes: ``given``, else the TTL config's, else 5."""
    interval = given or (ttl_config or {}).get("sweep_interval_minutes")
    minutes = float(interval or 5)
    if not minutes > 0:
        raise InvalidInputError("sweep_interval_minutes", f"expected > 0, got {interval!r}")
    return minutes


INDEX_KEYS = ("fields", "text_fields", "embed", "dims", "distance_type")


def index_config(index: Any) -> IndexConfig | None:
    """The checked index configuration, as given (a copy); None without one."""
    if index is None:
        return None
    if not isinstance(index, Mapping):
        raise InvalidInputError(
            "index", f"expected a dict such as {{'fields': ['text']}}, got {index!r}"
        )
    unknown = sorted(set(index) - set(INDEX_KEYS))
    if unknown:
        raise InvalidInputError(
            "index", f"unknown keys {unknown}; allowed: {', '.join(INDEX_KEYS)}"
        )
    for name in ("fields", "text_fields"):
        if index.get(name) is not None:
            index_paths(index[name], f"index.{name}")
    if "fields" in index and "text_fields" in index:
        raise InvalidInputError("index", "give fields or text_fields (the same thing), not both")
    dims = index.get("dims")
    if dims is not None and (isinstance(dims, bool) or not isinstance(dims, int) or dims < 1):
        raise InvalidInputError("index.dims", f"expected a positive integer, got {dims!r}")
    distance = index.get("distance_type", "cosine")
    if distance != "cosine":
        raise InvalidInputError(
            "index.distance_type", f"only 'cosine' (the vector leg's), got {distance!r}"
        )
    return cast(IndexConfig, dict(index))


def index_fields(index: Mapping[str, Any] | None) -> list[str]:
    """The JSON paths whose text is searchable (``["$"]``, the whole value, by default)."""
    fields = None if index is None else index.get("fields", index.get("text_fields"))
    if fields is None:
        return ["$"]
    return list(fields)


def index_paths(paths: Any, field: str) -> list[str]:
    """``paths`` checked to be LangGraph JSON paths (``field`` names them in errors)."""
    if isinstance(paths, str) or not isinstance(paths, Sequence):
        raise InvalidInputError(
            field, f"expected a list of JSON paths such as ['text'], got {paths!r}"
        )
    for path in paths:
        if not isinstance(path, str) or not path:
            raise InvalidInputError(field, f"paths must be non-empty strings, got {path!r}")
        if path != "$":
            try:
                tokenize_path(path)
            except Exception as exc:  # LangGraph's own parser decides what a path is
                raise InvalidInputError(field, f"invalid path {path!r}: {exc}") from exc
    return list(paths)


def ttl_config(ttl: Any) -> TTLConfig | None:
    """The checked TTL configuration (a copy); None without one."""
    if ttl is None:
        return None
    if not isinstance(ttl, Mapping):
        raise InvalidInputError("ttl", f"expected a TTLConfig dict, got {ttl!r}")
    allowed = {"default_ttl", "refresh_on_read", "sweep_interval_minutes", "omit_expired"}
    unknown = sorted(set(ttl) - allowed)
    if unknown:
        raise InvalidInputError(
            "ttl", f"unknown keys {unknown}; allowed: {', '.join(sorted(allowed))}"
        )
    default = ttl.get("default_ttl")
    if default is not None:
        check_ttl(default, "ttl.default_ttl")
    return cast(TTLConfig, dict(ttl))


def check_ttl(ttl: Any, field: str) -> None:
    """Raise unless ``ttl`` is a positive, finite number of minutes."""
    if (
        isinstance(ttl, bool)
        or not isinstance(ttl, (int, float))
        or not math.isfinite(ttl)
        or ttl <= 0
    ):
        raise InvalidInputError(
            field, f"expected None or a positive number of minutes, got {ttl!r}"
        )


def check_count(value: Any, field: str) -> None:
    """Raise unless ``value`` is an integer >= 0 (a limit, an offset, a depth)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInputError(field, f"expected an integer >= 0, got {value!r}")


def tuple_namespace(op: Any) -> Any:
    """The operation with a namespace given as a list turned into a tuple, as LangGraph's
    own stores take it."""
    if isinstance(op, SearchOp) and isinstance(op.namespace_prefix, list):
        return op._replace(namespace_prefix=tuple(op.namespace_prefix))
    if isinstance(op, (GetOp, PutOp)) and isinstance(op.namespace, list):
        return op._replace(namespace=tuple(op.namespace))
    return op


def check_op(op: Any, position: int) -> None:
    """Raise for a malformed operation, naming it by its position in the batch."""
    where = f"ops[{position}]"
    if not isinstance(op, (GetOp, PutOp, SearchOp, ListNamespacesOp)):
        raise InvalidInputError(
            where,
            f"unknown operation {type(op).__name__}; "
            "allowed: GetOp, PutOp, SearchOp, ListNamespacesOp",
        )
    namespace = op.namespace_prefix if isinstance(op, SearchOp) else getattr(op, "namespace", ())
    if not isinstance(namespace, tuple):
        raise InvalidInputError(
            f"{where}.namespace", f"expected a tuple of strings, got {namespace!r}"
        )
    validate_op_namespace(op)
    if isinstance(op, (GetOp, PutOp)) and not isinstance(op.key, str):
        raise InvalidInputError(f"{where}.key", f"expected a string, got {op.key!r}")
    if isinstance(op, GetOp) and not namespace:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    if isinstance(op, PutOp):
        if not namespace:
            raise InvalidNamespaceError("Namespace cannot be empty.")
        # (A root label "langgraph" is refused by BaseStore.put, not here: LangGraph's
        # own stores accept such a PutOp in batch(), which LangGraph itself may send.)
        if op.value is not None:
            if not isinstance(op.value, Mapping):
                raise InvalidInputError(
                    f"{where}.value", f"expected a dict or None, got {op.value!r}"
                )
            bad = [k for k in op.value if not isinstance(k, str)]
            if bad:
                raise InvalidInputError(f"{where}.value", f"keys must be strings, got {bad[0]!r}")
        if op.index is not None and op.index is not False:
            index_paths(op.index, f"{where}.index")
        if op.ttl is not None:
            check_ttl(op.ttl, f"{where}.ttl")
    elif isinstance(op, SearchOp):
        check_count(op.limit, f"{where}.limit")
        check_count(op.offset, f"{where}.offset")
        if op.query is not None and not isinstance(op.query, str):
            raise InvalidInputError(
                f"{where}.query", f"expected a string or None, got {op.query!r}"
            )
        translate_filter(op.filter, f"{where}.filter")
    elif isinstance(op, ListNamespacesOp):
        check_count(op.limit, f"{where}.limit")
        check_count(op.offset, f"{where}.offset")
        if op.max_depth is not None:
            check_count(op.max_depth, f"{where}.max_depth")
        for condition in op.match_conditions or ():
            if not isinstance(condition, MatchCondition) or condition.match_type not in (
                "prefix",
                "suffix",
            ):
                raise InvalidInputError(
                    f"{where}.match_conditions",
                    "expected MatchCondition with match_type 'prefix' or 'suffix', "
                    f"got {condition!r}",
                )
