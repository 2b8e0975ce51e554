"""Where the namespaces of one store live in Chroma, and how they got there.

Every namespace of a store, nested ones too, keeps its memories in one collection beside
the store's (:func:`~hybrid_memory._model.namespaces.partition_collection`, each its share:
:mod:`hybrid_memory._store.partition`), and is named by a record of that collection written in
the same Chroma call as its first memories
(:func:`~hybrid_memory._store.partition.with_name_record`):
a namespace holding memories is listed by any process, whatever stopped the one that
wrote them, and creating one is one Chroma write. A namespace closed before any write
is named in a second collection (:func:`~hybrid_memory._model.namespaces.registry_collection`,
where earlier versions named every namespace when first opened), so that it is listed
even while it holds no memory, as when each namespace was a collection of its own.

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

from hybrid_memory._model.errors import StoreError
from hybrid_memory._model.namespaces import (
    NAMESPACE_META,
    PARENT_META,
    child_namespace,
    namespace_collection,
    namespace_digest,
    partition_collection,
    registry_collection,
)
from hybrid_memory._model.settings import HybridMemorySettings
from hybrid_memory._store.collection import PAGE, ChromaCollection

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
        self._lock = threading.RLock()  # RLock: a move under it names the namespace
        self._registry: ChromaCollection | None = None
        self._names: ChromaCollection | None = None  # the shared collection, read whole
        self._registered: set[str] = set()  # keys this process knows are named
        # Keys of namespaces opened here and not named yet: (name, parent) each.
        self._unnamed: dict[str, tuple[str, str]] = {}
        self._legacy: set[str] | None = None  # earlier versions' collections, not moved yet
        self._client: Any = None
        self._near: ChromaCollection | None = None  # a share opened here: its client
        # The shared collection as the first namespace opened it, checked (its embedding):
        # every namespace opened after it calls it without opening it again.
        self.shared: Any = None
        # Namespaces closed while their keyword index was in step with their share, by
        # key: the path owner's write mark then (IndexSync.in_step_write_count, IndexSync.resume).
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
        own when an earlier version made one, and named by its first write."""
        legacy = namespace_collection(parent, name)
        key = namespace_digest(parent, name)
        with self._lock:
            self._client = share.client
            self._near = share
            if key not in self._registered:  # (each share of it, if opened twice)
                # Named by its first add or upsert, in the same Chroma write as its
                # memories (a second write, to the registry, was ~20 ms of the ~45 ms a
                # namespace's creation cost beyond Chroma's add): a namespace holding
                # memories is then never missing from the listing, whatever stops the
                # process. The move below is such a write. One closed before any write
                # is named in the registry then (name_unwritten).
                self._unnamed.setdefault(key, (name, parent))
                share.unnamed = (name, parent, lambda written: self._named(key, written))
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

    def _named(self, key: str, written: bool) -> None:
        """Namespace ``key``'s name was recorded by a write of its share (``written``), or
        is to be recorded in the registry now (its share's write has no room for it, or
        it is closed before any write)."""
        with self._lock:
            pending = self._unnamed.get(key)
            if pending is None:
                return
            if not written:
                name, parent = pending
                assert self._near is not None  # set by opened, before any share is named
                self._open_registry(self._near, None).call(
                    "upsert",
                    ids=[key],
                    embeddings=[_REGISTRY_VECTOR],
                    documents=[name],
                    metadatas=[{NAMESPACE_META: name, PARENT_META: parent}],
                )
            del self._unnamed[key]
            self._registered.add(key)

    def name_unwritten(self, share: ChromaCollection, *, holding: bool) -> None:
        """Before ``share`` (a namespace's) is closed: its name, if no write of this
        process recorded it, recorded in the registry, so that other processes list it
        too (a namespace opened and left empty). Not when it ``holding`` memories: the
        write that stored them named it (as does every version that had the shared
        collection, earlier ones in the registry when the namespace was opened), and a
        Chroma write on each close of a namespace only read here costs its searches."""
        naming, share.unnamed = share.unnamed, None
        if naming is not None:
            naming[2](holding)

    def children(self, parent: ChromaCollection) -> list[str]:
        """The names of the namespaces directly under the store or namespace whose
        collection (or share) is ``parent``, sorted: named in the shared collection (by
        their first write), in the registry, still in a collection of their own, or
        opened in this process and not named yet."""
        found: set[str] = set()
        with self._lock:
            registry = self._registry
            found.update(n for n, p in self._unnamed.values() if p == parent.name)
        listed = parent.client_collections()
        names = {name for name, _ in listed}
        if registry is None and registry_collection(self.root) in names:
            with self._lock:
                registry = self._open_registry(parent, None)
        where = {PARENT_META: parent.name}
        sources = [registry] if registry is not None else []
        if partition_collection(self.root) in names:
            sources.append(self._open_shared(parent))
        for source in sources:
            got = source.call("get", where=where, include=["metadatas"])
            found.update(
                str(m[NAMESPACE_META]) for m in got["metadatas"] if m and m.get(NAMESPACE_META)
            )
        for collection, metadata in listed:
            name = child_namespace(parent.name, collection, metadata)
            if name is not None:
                found.add(name)
        return sorted(found)

    def _open_shared(self, near: ChromaCollection) -> ChromaCollection:
        """The shared collection as a whole (not a namespace's share of it), to read the
        names recorded in it; opened on ``near``'s client."""
        with self._lock:
            if self._names is None:
                name = partition_collection(self.root)
                self._names = ChromaCollection(
                    near._settings.model_copy(update={"collection": name}),
                    name,
                    near._embedding_name,
                    near.client,
                    opened=self.shared,
                )
            return self._names

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
            names, self._names = self._names, None
            client = self._client
        if names is not None:
            names.close()
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
