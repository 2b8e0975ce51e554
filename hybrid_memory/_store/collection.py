"""One Chroma collection as a store uses it: opened for an embedding, every call made to
it (each failure turned into :class:`StoreError`), its writes counted for the other
processes on an embedded path, and its records written and read.

What it does is spread by concern: opening (:mod:`.opening`), reads a page at a time and
the vectors they keep (:mod:`.paged_reads`), nearest neighbours (:mod:`.nearest`), a
namespace's share of a collection (:mod:`.partition`), the counts of who wrote
(:mod:`.write_counts`), and room on disk (:mod:`hybrid_memory._process.disk_room`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hybrid_memory._embedding.vectors import Matrix, Vector
from hybrid_memory._model.errors import EmbeddingMismatchError, InvalidInputError, StoreError
from hybrid_memory._model.records import IndexRow
from hybrid_memory._model.settings import HybridMemorySettings
from hybrid_memory._process.disk_room import check_room, why_no_room
from hybrid_memory._shared_path.ownership import acquire
from hybrid_memory._shared_path.server import WRITE_OPERATIONS
from hybrid_memory._store import nearest
from hybrid_memory._store.client import is_timeout, make_client
from hybrid_memory._store.opening import DIMENSION_META, open_with_retries
from hybrid_memory._store.paged_reads import PAGE, KeptVectors, PagedReads
from hybrid_memory._store.partition import (
    NAMING_WRITES,
    scoped_answer,
    scoped_call,
    scoped_where,
    with_name_record,
)
from hybrid_memory._store.write_counts import WriteCounts

# Embedded Chroma's answer to a read of an HNSW segment not yet on disk, and how long to
# wait before asking once more.
_SEGMENT_NOT_READY = "Error creating hnsw segment reader"
_SEGMENT_RETRY_SECONDS = 0.1


class ChromaCollection(PagedReads):
    """One Chroma collection, opened (created when new) for an embedding.

    The collection records the embedding's name and vector dimension in its metadata;
    reopening it with another embedding fails with :class:`EmbeddingMismatchError`.

    With ``partition`` (a namespace's key), this is that namespace's share of the Chroma
    collection ``chroma_name`` that all namespaces of a store live in
    (:mod:`hybrid_memory._store.partition`): every call reads and writes its records only, and
    answers as a collection of its own named ``name`` would.
    """

    def __init__(
        self,
        settings: HybridMemorySettings,
        name: str,
        embedding_name: str,
        client: Any = None,
        *,
        labels: Mapping[str, Any] | None = None,
        partition: str | None = None,
        chroma_name: str | None = None,
        opened: Any = None,
        counted_by: ChromaCollection | None = None,
    ) -> None:
        self.name = name
        self.partition = partition
        # A namespace's share whose name is not recorded yet (NamespaceStore.opened): the
        # name and parent its first add or upsert records in the same Chroma write, and
        # what to call then: ``named(True)`` once a write recorded it, ``named(False)``
        # to record it on its own (see partition.with_name_record).
        self.unnamed: tuple[str, str, Callable[[bool], None]] | None = None
        self._chroma_name = chroma_name or name
        self._settings = settings
        self._embedding_name = embedding_name
        self._kept = KeptVectors()
        # An embedded path is shared with the other processes on it through its owner
        # (hybrid_memory._shared_path); a server or an in-memory store gets a client of
        # its own. A namespace's writes are counted by its store's share of the path.
        path = settings.path if client is None and not settings.url else None
        ownership = (
            acquire(path, settings.request_timeout, settings.write_reserve) if path else None
        )
        self.writes: WriteCounts = WriteCounts(
            ownership=ownership,
            counter=ownership or (counted_by.writes.counter if counted_by else None),
            chroma_name=self._chroma_name,
            share=partition,
        )
        self._ownership = ownership
        self._own_client = client is None and ownership is None
        if ownership is not None:
            self.client = ownership.client(settings.request_timeout)
        else:
            self.client = client if client is not None else make_client(settings, attempts=5)
        try:
            # ``opened``: the Chroma collection, already opened (and checked) on this
            # client by another namespace of the store: not asked for again. A new one is
            # created with ``labels`` (a namespace's, the dimension its store's vectors
            # have) in one call instead of a create and modifies.
            if opened is None:
                self.client, opened = open_with_retries(
                    self.client,
                    settings,
                    self._chroma_name,
                    dict(labels or {}),
                    embedding_name,
                    own_client=self._own_client,
                )
            self._collection = opened
        except BaseException:
            self.close()
            raise
        self.dimension: int | None = (self._collection.metadata or {}).get(DIMENSION_META)

    @property
    def chroma(self) -> Any:
        """The Chroma collection (or the path owner's proxy of it) this object calls."""
        return self._collection

    @property
    def id(self) -> str:
        """What names this collection's records for good: Chroma's id of the collection
        (a collection made again under the same name gets another), and the namespace."""
        own = str(self._collection.id)
        return own if self.partition is None else f"{own}:{self.partition}"

    def call(self, operation: str, **kwargs: Any) -> Any:
        """``collection.<operation>(**kwargs)``; a failure becomes StoreError. A write on an
        embedded path is refused while the disk has no room, and counted."""
        if operation not in WRITE_OPERATIONS:
            return self._call(operation, kwargs)
        if self._ownership is not None and self._settings.path:
            check_room(self._settings.path, self._settings.write_reserve)
        with self.writes.counting(operation):
            return self._call(operation, kwargs)

    def _call(self, operation: str, kwargs: dict[str, Any]) -> Any:
        try:
            return self._call_once(operation, kwargs)
        except StoreError as exc:
            # Embedded Chroma may answer a read with no HNSW segment on disk while a
            # write beside it persists one: a moment later the read succeeds.
            if operation in WRITE_OPERATIONS or _SEGMENT_NOT_READY not in str(exc):
                raise
            time.sleep(_SEGMENT_RETRY_SECONDS)
            return self._call_once(operation, kwargs)

    def _call_once(self, operation: str, kwargs: dict[str, Any]) -> Any:
        key = self.partition
        try:
            if key is None:
                return getattr(self._collection, operation)(**kwargs)
            scoped = scoped_call(key, operation, kwargs)
            naming = self.unnamed if operation in NAMING_WRITES else None
            if naming is not None and len(scoped["ids"]) >= self.max_batch():
                naming[2](False)  # no room for the name in this write: recorded first
                naming = None
            if naming is not None:
                scoped = with_name_record(key, naming[0], naming[1], scoped)
            got = getattr(self._collection, operation)(**scoped)
            if naming is not None:
                self.unnamed = None
                naming[2](True)
            return scoped_answer(key, operation, got)
        except (InvalidInputError, StoreError):
            raise
        except Exception as exc:
            if self._settings.url and is_timeout(exc):
                raise StoreError(
                    f"Chroma {operation} failed: the Chroma server at {self._settings.url} did "
                    f"not answer within {self._settings.request_timeout:g} s (request_timeout, "
                    "HYBRID_MEMORY_REQUEST_TIMEOUT); the next call asks again. A write that "
                    "timed out may still be applied by the server."
                ) from exc
            raise StoreError(f"Chroma {operation} failed: {exc}{self._no_room(operation)}") from exc

    def count(self) -> int:
        if self.partition is not None:  # Chroma counts a whole collection only
            return len(self.call("get", include=[])["ids"])
        return int(self.call("count"))

    def _no_room(self, operation: str) -> str:
        """Why a write of an embedded store may have failed for want of room on disk, to
        name in its error; "" when nothing tells, or for a read."""
        path = self._settings.path
        if not path or operation not in WRITE_OPERATIONS:
            return ""
        reason = why_no_room(path)
        return f" (in {path}: {reason})" if reason else ""

    # --- nearest neighbours ---------------------------------------------------------------

    def nearest(self, vector: Vector, n: int, where: dict[str, Any] | None) -> dict[str, float]:
        """The ``n`` nearest records passing ``where``: ``{id: cosine similarity}``, nearest
        first (:func:`hybrid_memory._store.nearest.nearest`)."""
        return nearest.nearest(self, vector, n, where)

    def nearest_among(self, vector: Vector, n: int, ids: list[str]) -> dict[str, float]:
        """The ``n`` nearest among ``ids`` only, those deleted meanwhile left out
        (:func:`hybrid_memory._store.nearest.nearest_among`)."""
        return nearest.nearest_among(self, vector, n, ids)

    # --- writing --------------------------------------------------------------------------

    def max_batch(self) -> int:
        """How many records Chroma takes in one write."""
        try:
            return max(1, int(self.client.get_max_batch_size()))
        except Exception:
            return 1000

    def write(
        self,
        operation: str,
        rows: Sequence[IndexRow],
        vectors: Matrix,
        metadatas: list[dict[str, Any]],
    ) -> None:
        """``add`` or ``upsert`` these rows (text as the document) with their vectors and
        their metadata as Chroma stores it: one write, of at most :meth:`max_batch` rows.

        An ``add`` (of ids the store generated) either returns with every record stored or
        raises with none stored: Chroma can fail an add after its log took the records
        (embedded Chroma on a full disk: "Error in compaction", the records applied at the
        next open), so a failed add whose records are all found is reported as done, and
        one whose records are not all found is taken back with a delete of its ids before
        the error is raised."""
        ids = [r.id for r in rows]
        try:
            self.call(
                operation,
                ids=ids,
                embeddings=vectors,
                documents=[r.text for r in rows],
                metadatas=metadatas,
            )
        except StoreError as failure:
            if operation != "add":
                raise
            with contextlib.suppress(StoreError):
                if len(self.existing(ids)) == len(ids):
                    return  # stored after all: the add stands
            try:
                self.call("delete", ids=ids)
            except StoreError as undo:
                raise StoreError(
                    f"{failure}; taking the add back failed too ({undo}), so its "
                    f"{len(ids)} memories may appear once Chroma recovers"
                ) from failure
            raise

    def delete(self, ids: Sequence[str]) -> None:
        """Delete the records with these ids (distinct), a page at a time."""
        for start in range(0, len(ids), PAGE):
            self.call("delete", ids=list(ids[start : start + PAGE]))

    def check_dimension(self, vectors: Matrix) -> None:
        """Record the first vectors' dimension with the collection; refuse another one."""
        if len(vectors) == 0:
            return
        dimension = int(vectors.shape[1])
        if self.dimension is None:
            self.dimension = dimension
            meta = {**(self._collection.metadata or {}), DIMENSION_META: dimension}
            self.call("modify", metadata=meta)
        elif dimension != self.dimension:
            raise EmbeddingMismatchError(
                f"embedding {self._embedding_name!r} produced {dimension}-dimensional vectors, "
                f"but collection {self.name!r} holds {self.dimension}-dimensional ones"
            )

    def client_collections(self) -> list[tuple[str, Mapping[str, Any]]]:
        """Every collection of this store's Chroma client (database): name and metadata."""
        list_collections = getattr(self.client, "list_collections", None)
        if list_collections is None:
            raise StoreError(
                "the namespaces cannot be listed from this process: another process owns "
                "the store's path and does not list collections for others; run this while "
                "no other process (an MCP server, an agent) holds the path"
            )
        try:
            found = list_collections()
        except Exception as exc:
            raise StoreError(f"Chroma list_collections failed: {exc}") from exc
        return [(str(c.name), c.metadata or {}) for c in found]

    def drop(self) -> None:
        """Delete the collection (a private in-memory store's, on close); a namespace's
        share of one: its records."""
        with contextlib.suppress(Exception):  # it dies with the process anyway
            if self.partition is not None:
                self._collection.delete(where=scoped_where(self.partition, None))
                return
            # Records first: Chroma 1.5 otherwise leaves their array-metadata index
            # entries behind to match in the next collection (see _search/legs.py).
            while ids := self._collection.get(limit=PAGE, include=[])["ids"]:
                self._collection.delete(ids=ids)
            self.client.delete_collection(self._chroma_name)

    def close(self) -> None:
        """Give this store's share of an embedded path back: the last store of this
        process on it closes Chroma's files and lets another process own the path."""
        self.writes.close()
        ownership, self._ownership = self._ownership, None
        if ownership is not None:
            ownership.release()
