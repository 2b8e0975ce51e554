"""Where the namespaces of one store live in Chroma, and how they got there.

Every namespace of a store, nested ones too, keeps its memories in one collection beside
the store's (:func:`~hybrid_memory._namespaces.partition_collection`, each its share:
:mod:`hybrid_memory._partition`), and is named in a second one
(:func:`~hybrid_memory._namespaces.registry_collection`): one record per namespace,
written when it is first opened, so that a namespace is listed (by any process) even
while it holds no memory, as when each namespace was a collection of its own.

Earlier versions made each namespace a Chroma collection of its own,
``<parent>.ns.<slug>.<digest>``: ten thousand tenants were ten thousand collections,
which a Chroma server (its descriptors) and an embedded path (its HNSW files, its disk)
do not hold. Such a collection is moved into the shared one when its namespace is first
opened: its records copied with their ids, vectors, documents and metadata (the times
are in the metadata), checked all there, then the old collection deleted.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any

from hybrid_memory._collection import PAGE, ChromaCollection
from hybrid_memory._errors import StoreError
from hybrid_memory._namespaces import (
    NAMESPACE_META,
    PARENT_META,
    child_namespace,
    namespace_collection,
    namespace_digest,
    partition_collection,
    registry_collection,
)
from hybrid_memory._settings import HybridMemorySettings

log = logging.getLogger("hybrid_memory")

# What the registry's records are "embedded" with: Chroma keeps a vector with every
# record, and a name needs none; one constant dimension keeps them apart from any model.
REGISTRY_EMBEDDING = "hm-namespace-registry"
_REGISTRY_VECTOR = [1.0]


class NamespaceStore:
    """The namespaces of the store on collection ``root``: the registry of their names
    and the move of earlier versions' namespace collections. Shared by the store's parts
    and every namespace opened from it."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._registry: ChromaCollection | None = None
        self._registered: set[str] = set()  # keys this process knows are named
        self._legacy: set[str] | None = None  # earlier versions' collections, not moved yet
        self._client: Any = None
        # The shared collection as the first namespace opened it, checked (its embedding):
        # every namespace opened after it calls it without opening it again.
        self.shared: Any = None
        # Namespaces closed while their keyword index was in step with their share, by
        # key: the path owner's write mark then (IndexSync.in_step_mark, IndexSync.resume).
        self.closed_in_step: dict[str, int] = {}

    def opened(
        self,
        share: ChromaCollection,
        parent: str,
        name: str,
        settings: HybridMemorySettings,
    ) -> None:
        """Namespace ``name`` under the store or namespace named ``parent`` was opened on
        ``share`` (its share of the shared collection): moved from a collection of its
        own when an earlier version made one, and named in the registry."""
        legacy = namespace_collection(parent, name)
        with self._lock:
            self._client = share.client
            if legacy in self._legacy_names(share):
                try:
                    _move(share, legacy, settings)
                except StoreError:
                    # Another process moving it at the same moment deletes it once all
                    # its records are in the shared collection: then nothing is missing.
                    if any(name == legacy for name, _ in share.client_collections()):
                        raise
                assert self._legacy is not None
                self._legacy.discard(legacy)
            key = namespace_digest(parent, name)
            if key in self._registered:
                return
            registry = self._open_registry(share, settings)
            if not registry.call("get", ids=[key], include=[])["ids"]:
                registry.call(
                    "upsert",
                    ids=[key],
                    embeddings=[_REGISTRY_VECTOR],
                    documents=[name],
                    metadatas=[{NAMESPACE_META: name, PARENT_META: parent}],
                )
            self._registered.add(key)

    def children(self, parent: ChromaCollection) -> list[str]:
        """The names of the namespaces directly under the store or namespace whose
        collection (or share) is ``parent``, sorted: named in the registry, or still in
        a collection of their own."""
        found: set[str] = set()
        with self._lock:
            registry = self._registry
        if registry is None and self._registry_exists(parent):
            with self._lock:
                registry = self._open_registry(parent, None)
        if registry is not None:
            where = {PARENT_META: parent.name}
            got = registry.call("get", where=where, include=["metadatas"])
            found.update(
                str(m[NAMESPACE_META]) for m in got["metadatas"] if m and m.get(NAMESPACE_META)
            )
        for collection, metadata in parent.client_collections():
            name = child_namespace(parent.name, collection, metadata)
            if name is not None:
                found.add(name)
        return sorted(found)

    def _registry_exists(self, parent: ChromaCollection) -> bool:
        wanted = registry_collection(self.root)
        return any(name == wanted for name, _ in parent.client_collections())

    def _open_registry(
        self, near: ChromaCollection, settings: HybridMemorySettings | None
    ) -> ChromaCollection:
        """The registry, opened on ``near``'s client (created when new). Under the lock."""
        if self._registry is None:
            name = registry_collection(self.root)
            s = settings or near._settings
            self._registry = ChromaCollection(
                s.model_copy(update={"collection": name}), name, REGISTRY_EMBEDDING, near.client
            )
        return self._registry

    def _legacy_names(self, share: ChromaCollection) -> set[str]:
        """The collections of earlier versions' namespaces of this store (any depth), as
        listed once; an empty set when the client cannot list them. Under the lock."""
        if self._legacy is None:
            try:
                listed = share.client_collections()
            except StoreError as exc:
                log.warning("namespaces of earlier versions cannot be looked for: %s", exc)
                listed = []
            self._legacy = {
                name
                for name, _ in listed
                if name.startswith(f"{self.root[:100].rstrip('._-')}.ns.")
            }
        return self._legacy

    def close(self, *, drop: bool) -> None:
        """Close the registry; with ``drop`` (a private in-memory store's), delete both
        shared collections."""
        with self._lock:
            registry, self._registry = self._registry, None
            client = self._client
        if registry is not None:
            if drop:
                registry.drop()
            registry.close()
        if drop and client is not None:
            with contextlib.suppress(Exception):  # it dies with the process anyway
                client.delete_collection(partition_collection(self.root))


def _move(share: ChromaCollection, legacy: str, settings: HybridMemorySettings) -> None:
    """Copy every record of the collection ``legacy`` (an earlier version's namespace)
    into ``share``, check that they are all there, then delete ``legacy``."""
    old = ChromaCollection(
        settings.model_copy(update={"collection": legacy}),
        legacy,
        share._embedding_name,
        share.client,
    )
    try:
        ids: list[str] = []
        batch = min(PAGE, share.max_batch())
        include = ["documents", "metadatas", "embeddings"]
        while True:
            got = old.call("get", limit=batch, offset=len(ids), include=include)
            if not got["ids"]:
                break
            share.call(
                "upsert",
                ids=got["ids"],
                embeddings=got["embeddings"],
                documents=[d or "" for d in got["documents"]],
                metadatas=[dict(m or {}) for m in got["metadatas"]],
            )
            ids.extend(got["ids"])
        missing = len(ids) - len(share.existing(ids))
        if missing or old.count() != len(ids):
            raise StoreError(
                f"moving namespace collection {legacy!r} into {share._chroma_name!r} "
                f"left {missing} of {len(ids)} memories behind (or it changed meanwhile); it "
                "is kept, and moved again the next time the namespace is opened"
            )
        log.info("namespace collection %r moved (%d memories)", legacy, len(ids))
        old.drop()
    finally:
        old.close()
