"""One namespace's share of the collection all namespaces of a store live in: each
Chroma call of a namespace, rewritten to touch only its own records.

All the namespaces of a store, nested ones too, keep their memories in one Chroma
collection beside the store's own (:func:`hybrid_memory._model.namespaces.partition_collection`).
A record of namespace ``key`` (its :func:`~hybrid_memory._model.namespaces.namespace_digest`)
carries ``hm:ns = key`` in its metadata and the Chroma id ``<key>:<memory id>``, so that
the same memory id in two namespaces names two records. This module only rewrites the
arguments of a call (ids prefixed, the namespace's condition ANDed into every ``where``,
the key stamped into every metadata written) and its answer (ids without the prefix,
the key out of the metadata): pure functions, no I/O.

Why a collection beside the store's and not the store's own: the store's searches would
then have to leave the namespaces' records out with a ``where`` on every vector query,
and Chroma's filtered query costs many times its plain one (docs/performance-history.md),
besides a count that becomes a scan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from hybrid_memory._model.namespaces import NAMESPACE_META, PARENT_META

# The metadata key holding the namespace a record belongs to (its digest).
PARTITION_KEY = "hm:ns"
# Calls whose ``ids`` name records, and those that take a ``where``.
_WITH_IDS = frozenset({"get", "delete", "add", "upsert", "update", "query"})
_WITH_WHERE = frozenset({"get", "delete", "query"})
_WRITES = frozenset({"add", "upsert", "update"})
# The writes that can carry a namespace's name record (they bring vectors to copy).
NAMING_WRITES = frozenset({"add", "upsert"})
# The Chroma id of a namespace's name record starts so: never a record of a namespace,
# whose ids start with the 32 hex digits of its key and a ':'.
NAME_RECORD_PREFIX = "hm:name:"


def chroma_id(key: str, memory_id: str) -> str:
    """The Chroma id of memory ``memory_id`` of namespace ``key``."""
    return f"{key}:{memory_id}"


def memory_id(key: str, chroma: str) -> str:
    """The memory id inside a Chroma id of namespace ``key`` (:func:`chroma_id`)."""
    return chroma[len(key) + 1 :]


def scoped_where(key: str, where: Mapping[str, Any] | None) -> dict[str, Any]:
    """``where`` (Chroma syntax), narrowed to the records of namespace ``key``."""
    own = {PARTITION_KEY: key}
    return own if not where else {"$and": [dict(where), own]}


def scoped_call(key: str, operation: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments of ``collection.<operation>(**kwargs)`` made by namespace ``key``,
    as the shared collection takes them."""
    out = dict(kwargs)
    ids = out.get("ids")
    if operation in _WITH_IDS and ids is not None:
        out["ids"] = [chroma_id(key, i) for i in ids]
    elif operation in _WITH_WHERE:
        # A call by ids reaches only this namespace's records (their ids carry its key);
        # any other is narrowed to them.
        out["where"] = scoped_where(key, out.get("where"))
    if operation in _WRITES:
        metadatas = out.get("metadatas")
        count = len(out["ids"])
        out["metadatas"] = [
            {**(m or {}), PARTITION_KEY: key}
            for m in (metadatas if metadatas is not None else [None] * count)
        ]
    return out


def name_record_id(key: str) -> str:
    """The Chroma id of the record naming namespace ``key`` in the shared collection."""
    return f"{NAME_RECORD_PREFIX}{key}"


def with_name_record(key: str, name: str, parent: str, scoped: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments of a namespace's ``add`` or ``upsert`` (as :func:`scoped_call` made
    them) with one more record: the one naming namespace ``name`` (key ``key``) under
    ``parent``, so that the namespace's memories and its name are stored in one Chroma
    write, never one without the other.

    The record carries no :data:`PARTITION_KEY`, so no namespace's call (all narrowed to
    their key, or by ids that start with it) ever reads it; its metadata are those of the
    registry's records (:data:`NAMESPACE_META`, :data:`PARENT_META`), its document the
    name, its vector a copy of the first record's (Chroma keeps a vector with every
    record, of the collection's dimension). An ``add`` of a name recorded already leaves
    the stored one (Chroma skips ids it holds); an ``upsert`` writes the same again."""
    out = dict(scoped)
    embeddings = out["embeddings"]
    if isinstance(embeddings, np.ndarray):
        out["embeddings"] = np.concatenate([embeddings, embeddings[:1]])
    else:
        out["embeddings"] = [*embeddings, embeddings[0]]
    out["ids"] = [*out["ids"], name_record_id(key)]
    if out.get("documents") is not None:
        out["documents"] = [*out["documents"], name]
    out["metadatas"] = [*out["metadatas"], {NAMESPACE_META: name, PARENT_META: parent}]
    return out


def scoped_answer(key: str, operation: str, got: Any) -> Any:
    """The answer of a call rewritten by :func:`scoped_call`, as the namespace would
    have had it from a collection of its own: ids without the prefix, metadata without
    :data:`PARTITION_KEY`."""
    if operation == "get":
        return {
            **got,
            "ids": _unprefixed(key, got["ids"]),
            "metadatas": _own_metadatas(got.get("metadatas")),
        }
    if operation == "query":
        metadatas = got.get("metadatas")
        return {
            **got,
            "ids": [_unprefixed(key, ids) for ids in got["ids"]],
            "metadatas": None if metadatas is None else [_own_metadatas(m) for m in metadatas],
        }
    return got


def _unprefixed(key: str, ids: Sequence[str]) -> list[str]:
    return [memory_id(key, i) for i in ids]


def _own_metadatas(metadatas: Sequence[Mapping[str, Any] | None] | None) -> Any:
    if metadatas is None:
        return None
    return [
        None if m is None else {k: v for k, v in m.items() if k != PARTITION_KEY} for m in metadatas
    ]
