"""Namespaces of a store, named apart.

Each namespace has a name of its own, as if it were a collection of its own (see
:meth:`hybrid_memory.HybridMemory.namespace`), and its own keyword index, so ids, tags,
counts and BM25 statistics of one namespace cannot reach another. Its memories live in
the one collection all namespaces of the store share (:func:`partition_collection`),
marked by its key (:func:`namespace_digest`: :mod:`hybrid_memory._store.partition`); earlier
versions made that name a Chroma collection of its own, which a store opening a
namespace moves into the shared one. This module only names them: a pure mapping from
(parent's name, namespace name) to a name, a key and an index file name.

The mapping must be injective for any namespace string, whatever characters it holds
(``"A"`` and ``"A:sub"``, ``"a b"`` and ``"a-b"``, ``"Ä"`` and ``"A"``), while Chroma
accepts only 3-512 characters of ``[a-zA-Z0-9._-]``, starting and ending alphanumeric,
without ``..``. A readable slug alone cannot be injective, so the name ends with a hash
of the exact (parent, namespace) pair; the slug is there for people listing collections.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hybrid_memory._model.encodable import encodable
from hybrid_memory._model.errors import InvalidInputError

_NOT_SLUG = re.compile(r"[^a-zA-Z0-9_-]+")  # no '.': a slug never adds a '..'
_SLUG_LENGTH = 40
_PARENT_LENGTH = 100
# 128 bits of SHA-256: a collision between two namespace names is not a practical event.
_DIGEST_LENGTH = 32
# Collection metadata of a namespace's collection: its exact name and its parent's
# collection, so that the namespaces of a store can be listed (a collection's own name
# keeps only a slug of the namespace's).
NAMESPACE_META = "hm:namespace"
PARENT_META = "hm:parent"


def valid_namespace(name: Any) -> str:
    """``name`` if it can name a namespace: any non-empty string of valid Unicode."""
    if not isinstance(name, str) or not name:
        raise InvalidInputError("namespace", f"expected a non-empty string, got {name!r}")
    return encodable(name, "namespace")


def namespace_digest(parent_collection: str, name: str) -> str:
    """The hash that tells namespaces apart: of the exact pair, JSON-encoded so that no
    two pairs share an encoding."""
    exact = json.dumps([parent_collection, name]).encode("utf-8")
    return hashlib.sha256(exact).hexdigest()[:_DIGEST_LENGTH]


def namespace_collection(parent_collection: str, name: str) -> str:
    """The Chroma collection of namespace ``name`` of the store on ``parent_collection``:
    ``<parent>.ns.<slug>.<digest>`` (``<parent>.ns.<digest>`` when the name has no
    letters or digits), at most 100 + 4 + 41 + 33 characters."""
    parent = parent_collection[:_PARENT_LENGTH].rstrip("._-")
    slug = _NOT_SLUG.sub("-", name).strip("_-")[:_SLUG_LENGTH].strip("_-")
    digest = namespace_digest(parent_collection, name)
    return ".".join(part for part in (parent, "ns", slug, digest) if part)


# What the two collections beside a store's own are named after it; a store's own
# collection may not end so (it would be another store's namespaces).
PARTITION_SUFFIX = ".namespaces"
REGISTRY_SUFFIX = ".namespace-names"


def partition_collection(store_collection: str) -> str:
    """The Chroma collection holding the memories of every namespace (nested ones too)
    of the store on collection ``store_collection``: ``<store>.namespaces``. Never the
    name of a namespace's own collection of earlier versions (those end in a digest)."""
    return f"{store_collection[:_PARENT_LENGTH].rstrip('._-')}{PARTITION_SUFFIX}"


def registry_collection(store_collection: str) -> str:
    """The Chroma collection naming the namespaces of the store on collection
    ``store_collection`` that were closed before any write (and, as earlier versions
    wrote it, every namespace): those written are named in the shared collection."""
    return f"{store_collection[:_PARENT_LENGTH].rstrip('._-')}{REGISTRY_SUFFIX}"


def namespace_index_path(parent_index_path: str, parent_collection: str, name: str) -> str:
    """The keyword index file of a namespace when the parent's index file was given
    explicitly: beside it, its name extended by the namespace's digest."""
    parent = Path(parent_index_path)
    digest = namespace_digest(parent_collection, name)
    return str(parent.with_name(f"{parent.stem}.ns-{digest}{parent.suffix}"))


def namespace_labels(parent_collection: str, name: str) -> dict[str, str]:
    """The metadata recorded with namespace ``name``'s collection."""
    return {NAMESPACE_META: name, PARENT_META: parent_collection}


def child_namespace(
    parent_collection: str, collection: str, metadata: Mapping[str, Any] | None
) -> str | None:
    """The name of the namespace directly under the store on ``parent_collection`` whose
    collection is ``collection`` (with this collection ``metadata``); None when it is
    not one. A collection made before namespaces were labelled (no
    :data:`NAMESPACE_META`) is recognised when the namespace's name is its own slug
    (letters, digits, ``-`` and ``_``), which covers most names; it is labelled the
    next time it is opened."""
    meta = metadata or {}
    name = meta.get(NAMESPACE_META)
    if meta.get(PARENT_META) == parent_collection and isinstance(name, str) and name:
        return name if namespace_collection(parent_collection, name) == collection else None
    parts = collection.rsplit(".", 2)
    if (
        len(parts) == 3
        and parts[1]
        and namespace_collection(parent_collection, parts[1]) == collection
    ):
        return parts[1]
    return None
