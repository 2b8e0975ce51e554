"""How one LangGraph item is laid out as one hybrid-memory memory, and the engine
filters over that layout.

One LangGraph item is one memory:

- its id is derived from the namespace and key (a hash), so a second ``put`` of the
  same key replaces the memory (an upsert), never adds a copy;
- the namespace is metadata: the whole of it as JSON (``lg_namespace``), its depth
  (``lg_depth``), each label by position from the start (``lg_ns_0``, ``lg_ns_1``, ...)
  and from the end (``lg_nsr_0`` is the last label), so namespace prefixes, suffixes
  and wildcards are filters the engine applies before any cut;
- the value is kept whole as JSON text in ``lg_value`` (the engine's metadata takes
  only scalars and lists, so JSON is the lossless encoding), and each top-level
  scalar field of it also as ``lgv:<field>``, so a LangGraph ``filter`` on those
  fields becomes an engine filter;
- the memory's text (what the vector and keyword legs search) is the value's fields
  chosen by the put's ``index`` or the store's ``index={"fields": [...]}`` (default:
  the whole value as JSON); ``index=False`` stores the item as not searchable by
  text (``lg_indexed`` is False, and searches with a query leave it to the end)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from langgraph.store.base import Item, MatchCondition, SearchItem

from hybrid_memory import Memory

# Metadata keys of a stored item (see the module docstring).
ITEM = "lg_item"
KEY = "lg_key"
NAMESPACE = "lg_namespace"
DEPTH = "lg_depth"
VALUE = "lg_value"
INDEXED = "lg_indexed"
UPDATED = "lg_updated_at"
HAS_TTL = "lg_has_ttl"
TTL_MINUTES = "lg_ttl"
EXPIRES = "lg_expires_at"
VALUE_FIELD = "lgv:"


def label_key(position: int) -> str:
    """The metadata key of a namespace's label at ``position`` from the start."""
    return f"lg_ns_{position}"


def label_from_end_key(position: int) -> str:
    """The metadata key of a namespace's label at ``position`` from the end (0: last)."""
    return f"lg_nsr_{position}"


def item_id(namespace: tuple[str, ...], key: str) -> str:
    """The memory id of the item at ``namespace``/``key``: stable across processes."""
    path = json.dumps([list(namespace), key], ensure_ascii=False, separators=(",", ":"))
    return "lg-" + hashlib.sha256(path.encode("utf-8")).hexdigest()


# --- engine filters over the item layout -------------------------------------------------------


def all_of(*clauses: Mapping[str, Any] | None) -> dict[str, Any]:
    """The clauses ANDed into one filter (empty ones left out; every item without any)."""
    parts: list[dict[str, Any]] = []
    for clause in clauses:
        if not clause:
            continue
        if set(clause) == {"$and"}:
            parts.extend(clause["$and"])
        else:
            parts.append(dict(clause))
    if not parts:
        return {DEPTH: {"$gte": 1}}
    return parts[0] if len(parts) == 1 else {"$and": parts}


def alive(now: float) -> dict[str, Any]:
    """Items without a TTL, or whose TTL has not run out."""
    return {"$or": [{HAS_TTL: False}, {EXPIRES: {"$gt": now}}]}


def prefix_filter(prefix: tuple[str, ...]) -> dict[str, Any]:
    """Items whose namespace starts with ``prefix``: label by label, so ``("a",)``
    holds ``("a", "b")`` but never ``("ab",)``."""
    if not prefix:
        return {DEPTH: {"$gte": 1}}
    return all_of(*({label_key(i): label} for i, label in enumerate(prefix)))


def match_filter(condition: MatchCondition) -> dict[str, Any]:
    """A ``list_namespaces`` condition; ``"*"`` matches any one label."""
    path = tuple(condition.path)
    key = label_key if condition.match_type == "prefix" else label_from_end_key
    labels = path if condition.match_type == "prefix" else tuple(reversed(path))
    clauses: list[dict[str, Any]] = [{DEPTH: {"$gte": max(1, len(path))}}]
    clauses += [{key(i): label} for i, label in enumerate(labels) if label != "*"]
    return all_of(*clauses)


# --- items ---------------------------------------------------------------------------------


def current_time() -> float:
    """The current time, epoch seconds (UTC)."""
    return datetime.now(timezone.utc).timestamp()


def to_item(memory: Memory, *, search: bool = False, score: float | None = None) -> Item:
    """The LangGraph item a memory holds (a ``SearchItem`` with ``score`` for a search)."""
    meta = memory.metadata
    updated = datetime.fromtimestamp(float(meta[UPDATED]), tz=timezone.utc)
    created = memory.created_at or updated
    namespace = tuple(json.loads(str(meta[NAMESPACE])))
    value = json.loads(str(meta[VALUE]))
    key = str(meta[KEY])
    if search:
        return SearchItem(namespace, key, value, created, updated, score)
    return Item(value=value, key=key, namespace=namespace, created_at=created, updated_at=updated)
