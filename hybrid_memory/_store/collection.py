"""The Chroma side of a store: the client (embedded, in memory or a server), the
collection and every call made to it, each failure turned into :class:`StoreError`."""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from hybrid_memory._embedding.vectors import Matrix, Vector, nearest_by_cosine
from hybrid_memory._keyword.file import why_no_room
from hybrid_memory._model.errors import (
    EmbeddingMismatchError,
    InvalidInputError,
    MemoryNotFoundError,
    StoreError,
)
from hybrid_memory._model.records import IndexRow, row_from_chroma, rows_from_chroma
from hybrid_memory._model.settings import HybridMemorySettings
from hybrid_memory._process.descriptors import descriptor_exhaustion
from hybrid_memory._process.disk_room import check_room
from hybrid_memory._shared_path.ownership import PathOwnership, acquire
from hybrid_memory._shared_path.server import WRITE_OPERATIONS
from hybrid_memory._shared_path.write_ledger import collection_key
from hybrid_memory._store.client import SERVER_HINT, is_timeout, make_client
from hybrid_memory._store.partition import (
    NAMING_WRITES,
    scoped_answer,
    scoped_call,
    scoped_where,
    with_name_record,
)
from hybrid_memory._store.write_marker import WriteMarker

# Collection-level metadata recording how the collection was built.
EMBEDDING_META = "hm:embedding"
DIMENSION_META = "hm:dimension"

PAGE = 5000  # records per Chroma read
_OPEN_PATIENCE = 10.0  # seconds to keep retrying the opening of a store
# Among at most this many ids, the nearest are found by reading their vectors and
# comparing them all: Chroma's graph search restricted to few ids degrades.
_COMPARE_ALL = 256
# How many times a restricted search is asked again after ids vanished under it.
_VANISHED_RETRIES = 3
# What a write of collection metadata only touches, for the ledger: no mark reads it.
_METADATA_ONLY = "metadata-only"


class ChromaCollection:
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
        # to record it on its own (see _partition.with_name_record).
        self.unnamed: tuple[str, str, Callable[[bool], None]] | None = None
        self._chroma_name = chroma_name or name
        self._settings = settings
        self._embedding_name = embedding_name
        # Metadata a new collection is created with (a namespace's labels, the dimension
        # its store's vectors have): one call instead of a create and modifies.
        self._labels = dict(labels or {})
        # An embedded path is shared with the other processes on it through its owner
        # (see _ownership); a server or an in-memory store gets a client of its own.
        path = settings.path if client is None and not settings.url else None
        self._ownership = (
            acquire(path, settings.request_timeout, settings.write_reserve) if path else None
        )
        self._own_writes = 0  # writes this object made on the path (see others_writes)
        # Who counts this object's writes on an embedded path: its ownership of the path,
        # or (a namespace, on its store's client) the ownership of ``counted_by``'s.
        self._counter: PathOwnership | None = self._ownership or (
            counted_by._counter if counted_by is not None else None
        )
        self._own_marked = 0  # those of its writes the counter's marks count (own_writes)
        # What this object's writes can touch, for the path owner's ledger of writes.
        self._touching = partition if partition is not None else collection_key(self._chroma_name)
        # The vectors the last read of a namespace's whole share kept (rows(keep_vectors=
        # True)), by id with the updated_at they were read at: for the search that follows
        # (kept_vectors), which would read them again.
        self._kept_vectors: dict[str, tuple[float, np.ndarray]] = {}
        self._writes = WriteMarker(path) if path else None
        self._own_client = client is None and self._ownership is None
        if self._ownership is not None:
            self.client = self._ownership.client(settings.request_timeout)
        else:
            self.client = client if client is not None else make_client(settings, attempts=5)
        try:
            # ``opened``: the Chroma collection, already opened (and checked) on this
            # client by another namespace of the store: not asked for again.
            self._collection = opened if opened is not None else self._open_with_retries()
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
        """``collection.<operation>(**kwargs)``; a failure becomes StoreError."""
        if operation in WRITE_OPERATIONS and self._ownership is not None and self._settings.path:
            check_room(self._settings.path, self._settings.write_reserve)
        ownership = self._counter if operation in WRITE_OPERATIONS else None
        if ownership is None:
            return self._call(operation, kwargs)
        self._own_writes += 1  # before the path's count: never seen as another's
        # A ``modify`` changes the collection's metadata, never a record: no index is
        # behind for it (the first write of a namespace records the vectors' dimension).
        touching = self._touching if operation != "modify" else _METADATA_ONLY
        if touching is not _METADATA_ONLY:
            self._own_marked += 1
        ownership.note_write(touching)
        try:
            return self._call(operation, kwargs)
        finally:
            ownership.wrote(touching)

    def _call(self, operation: str, kwargs: dict[str, Any]) -> Any:
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
        """Why a write of an embedded store may have failed for want of room on disk
        (the disk nearly full, a file size limit), to name in its error; "" when
        neither holds, or for a read."""
        path = self._settings.path
        if not path or operation not in WRITE_OPERATIONS:
            return ""
        reason = why_no_room(path)
        return f" (in {path}: {reason})" if reason else ""

    # --- reading records ------------------------------------------------------------------

    def rows(
        self, where: Mapping[str, Any] | None = None, *, keep_vectors: bool = False
    ) -> Iterator[list[IndexRow]]:
        """Every record passing ``where`` (Chroma syntax), a page at a time.
        ``keep_vectors``: their vectors read too and kept for :meth:`kept_vectors`."""
        include = ["documents", "metadatas", *(["embeddings"] if keep_vectors else [])]
        if keep_vectors:
            self._kept_vectors = {}
        offset = 0
        while True:
            got = self.call("get", where=where, limit=PAGE, offset=offset, include=include)
            if not got["ids"]:
                return
            page = rows_from_chroma(got)
            if keep_vectors:
                self._kept_vectors.update(
                    (row.id, (row.updated_at, np.asarray(vector)))
                    for row, vector in zip(page, got["embeddings"], strict=True)
                )
                if len(self._kept_vectors) > _COMPARE_ALL:  # more than a search would take
                    self._kept_vectors, keep_vectors = {}, False
                    include = include[:2]
            yield page
            if len(got["ids"]) < PAGE:
                return  # the last page: asking for the next is one more scan (13-20 ms)
            offset += len(got["ids"])

    def rows_by_id(self, ids: Sequence[str]) -> Iterator[list[IndexRow]]:
        """The records with these ids (those that exist), a page at a time: one get with
        100,000 ids exceeds SQLite's limit on bound variables."""
        for start in range(0, len(ids), PAGE):
            page = list(ids[start : start + PAGE])
            yield rows_from_chroma(self.call("get", ids=page, include=["documents", "metadatas"]))

    def all_ids(self) -> set[str]:
        """Every record's id, in one read. Read a page at a time, each page's offset
        cost Chroma a scan to it: at a million memories a page of 5,000 at offset
        500,000 took 5 s, and all the pages ~15 minutes (a store opening reconciles its
        ids); one read took 9 s. The ids are all held in the returned set anyway."""
        return set(self.call("get", include=[])["ids"])

    def existing(self, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` name a stored record."""
        found: set[str] = set()
        unique = list(dict.fromkeys(ids))  # Chroma refuses a repeated id
        for start in range(0, len(unique), PAGE):
            found.update(self.call("get", ids=unique[start : start + PAGE], include=[])["ids"])
        return found

    def metadata_by_id(self, ids: Sequence[str]) -> dict[str, Mapping[str, Any]]:
        """The stored metadata of those of ``ids`` that exist."""
        found: dict[str, Mapping[str, Any]] = {}
        unique = list(dict.fromkeys(ids))  # Chroma refuses a repeated id
        for start in range(0, len(unique), PAGE):
            got = self.call("get", ids=unique[start : start + PAGE], include=["metadatas"])
            found.update((i, m or {}) for i, m in zip(got["ids"], got["metadatas"], strict=True))
        return found

    def stored(self, memory_id: str) -> tuple[IndexRow, Mapping[str, Any], Any]:
        """The memory with this id: its row, its metadata as stored, and its vector;
        :class:`MemoryNotFoundError` when there is none."""
        return self.stored_many([memory_id])[memory_id]

    def stored_many(self, ids: Sequence[str]) -> dict[str, tuple[IndexRow, Mapping[str, Any], Any]]:
        """:meth:`stored` for many ids (distinct), a page at a time: each must exist, else
        :class:`MemoryNotFoundError` for the first that does not."""
        found: dict[str, tuple[IndexRow, Mapping[str, Any], Any]] = {}
        for start in range(0, len(ids), PAGE):
            got = self.call(
                "get",
                ids=list(ids[start : start + PAGE]),
                include=["documents", "metadatas", "embeddings"],
            )
            for memory_id, document, metadata, vector in zip(
                got["ids"], got["documents"], got["metadatas"], got["embeddings"], strict=True
            ):
                found[memory_id] = (
                    row_from_chroma(memory_id, document, metadata),
                    metadata or {},
                    vector,
                )
        missing = [i for i in dict.fromkeys(ids) if i not in found]
        if missing:
            raise MemoryNotFoundError.of(missing)
        return found

    def any_passing(self, where: Mapping[str, Any]) -> bool:
        """Whether any record passes ``where`` (Chroma syntax): one id read, at most."""
        return bool(self.call("get", where=where, limit=1, include=[])["ids"])

    def updated_at_after(self, since: float, key: str) -> dict[str, float]:
        """``{id: updated_at}`` of every record stamped (``key``) after ``since``, a page
        at a time (the metadata only: no documents, no vectors)."""
        found: dict[str, float] = {}
        where = {key: {"$gt": since}}
        while True:
            got = self.call(
                "get", where=where, limit=PAGE, offset=len(found), include=["metadatas"]
            )
            for memory_id, meta in zip(got["ids"], got["metadatas"], strict=True):
                found[memory_id] = float((meta or {}).get(key) or 0.0)
            if len(got["ids"]) < PAGE:
                return found  # the last page

    def ids_matching(self, where: Mapping[str, Any] | None) -> list[str]:
        """The ids of every record passing ``where`` (Chroma syntax), read a page at a time."""
        found: list[str] = []
        while True:
            got = self.call("get", where=where, limit=PAGE, offset=len(found), include=[])
            found.extend(got["ids"])
            if len(got["ids"]) < PAGE:
                return found  # the last page

    @property
    def holds_kept_vectors(self) -> bool:
        return bool(self._kept_vectors)

    def kept_vectors(
        self, ids: Sequence[str], updated_at: Mapping[str, float]
    ) -> dict[str, np.ndarray] | None:
        """The vectors of ``ids`` as the last ``rows(keep_vectors=True)`` read them, when
        it read every one and each record is still as it was then (``updated_at``, the
        index's, is the read's); None otherwise. Kept for this one call either way: a
        namespace's first search after its share was read takes them instead of reading
        them again (on a server, a third of opening a namespace again)."""
        kept, self._kept_vectors = self._kept_vectors, {}
        out: dict[str, np.ndarray] = {}
        for memory_id in ids:
            entry = kept.get(memory_id)
            if entry is None or updated_at.get(memory_id) != entry[0]:
                return None
            out[memory_id] = entry[1]
        return out

    def vectors_by_id(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors of those of ``ids`` that exist, by id (a few: one read)."""
        if not ids:
            return {}  # Chroma refuses a get by no ids
        got = self.call("get", ids=list(ids), include=["embeddings"])
        return {i: np.asarray(v) for i, v in zip(got["ids"], got["embeddings"], strict=True)}

    # --- nearest neighbours ---------------------------------------------------------------

    @property
    def compare_all(self) -> int:
        """Among at most this many records, the nearest are found by reading their vectors
        and comparing them all."""
        return _COMPARE_ALL

    def nearest(self, vector: Vector, n: int, where: dict[str, Any] | None) -> dict[str, float]:
        """The ``n`` nearest records passing ``where``: ``{id: cosine similarity}``, nearest
        first.

        A namespace's records, when they are few, are read and compared one by one:
        Chroma's query restricted by a ``where`` scans the shared collection (47 ms p50
        with 30,000 records, growing with it), its ``get`` by the same ``where`` does not
        (5.5 ms)."""
        if self.partition is not None and n > 0:
            got = self.call("get", where=where, limit=_COMPARE_ALL + 1, include=["embeddings"])
            if len(got["ids"]) <= _COMPARE_ALL:
                found = got["ids"]
                return {
                    found[row]: similarity
                    for row, similarity in nearest_by_cosine(got["embeddings"], vector, n)
                }
        got = self.call(
            "query",
            query_embeddings=[vector],
            n_results=n,
            where=where,
            # Distances only: every other include costs Chroma more than the search
            # itself; the few hits returned are read by id afterwards.
            include=["distances"],
        )
        return _similarities(got)

    def nearest_among(self, vector: Vector, n: int, ids: list[str]) -> dict[str, float]:
        """The ``n`` nearest among ``ids`` only: compared one by one when they are few,
        else Chroma's graph search restricted to them.

        Ids deleted since they were chosen (by another thread or process) are simply
        not found: reading vectors skips them, and Chroma's restricted search, which
        fails when any listed id is gone ("Error finding id", Chroma 1.5), is asked
        again among the ids that still exist."""
        if not ids:
            return {}
        if len(ids) <= _COMPARE_ALL:
            return self._nearest_by_reading(vector, n, ids)
        for _ in range(_VANISHED_RETRIES):
            try:
                got = self.call(
                    "query",
                    query_embeddings=[vector],
                    n_results=min(n, len(ids)),
                    ids=ids,
                    include=["distances"],
                )
                return _similarities(got)
            except StoreError:
                present = self.existing(ids)
                if len(present) == len(ids):
                    raise  # not a vanished id
                ids = [i for i in ids if i in present]
                if len(ids) <= _COMPARE_ALL:
                    return self._nearest_by_reading(vector, n, ids)
        return self._nearest_by_reading(vector, n, ids)

    def _nearest_by_reading(self, vector: Vector, n: int, ids: list[str]) -> dict[str, float]:
        nearest: list[tuple[str, float]] = []
        for start in range(0, len(ids), PAGE):
            got = self.call("get", ids=ids[start : start + PAGE], include=["embeddings"])
            if got["ids"]:
                found = got["ids"]
                nearest.extend(
                    (found[row], similarity)
                    for row, similarity in nearest_by_cosine(got["embeddings"], vector, n)
                )
        nearest.sort(key=lambda pair: -pair[1])
        return dict(nearest[:n])

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

    def label(self, labels: Mapping[str, Any]) -> None:
        """Record ``labels`` in the collection's metadata, unless they are there already."""
        if self.partition is not None:
            return  # the collection is every namespace's: its records say which is whose
        meta = dict(self._collection.metadata or {})
        if any(meta.get(key) != value for key, value in labels.items()):
            self.call("modify", metadata={**meta, **labels})

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
            # entries behind to match in the next collection (see _legs.VectorLeg).
            while ids := self._collection.get(limit=PAGE, include=[])["ids"]:
                self._collection.delete(ids=ids)
            self.client.delete_collection(self._chroma_name)

    @property
    def own_writes(self) -> int:
        """How many writes of records this object made on its embedded path (0
        elsewhere): those :meth:`write_mark` counts."""
        return self._own_marked

    def write_mark(self) -> int | None:
        """How many writes that can touch this namespace's share the owner of the
        embedded path saw begin, by anyone
        (:mod:`hybrid_memory._shared_path.write_ledger`): while it reads the same, nobody
        wrote to it. None when it cannot tell (a write in flight, not the owner, a server,
        an in-memory store) and for a store's own collection."""
        counter = self._counter
        if counter is None or self.partition is None:
            # A store's own collection keeps its checks as they were (its write marker).
            return None
        return counter.write_mark(self.partition, collection_key(self._chroma_name))

    def write_marker(self) -> int | None:
        """A value that changes whenever anyone commits a write to this embedded store
        (:class:`~hybrid_memory._store.write_marker.WriteMarker`); None when it cannot tell
        (a server, a client the caller made, an in-memory store)."""
        return None if self._writes is None else self._writes.read()

    def others_writes(self) -> int | None:
        """How many writes anyone but this collection object has made on its embedded
        path so far, as this process, the path's owner, counted them (its other stores,
        and the writes it runs for other processes: :mod:`hybrid_memory._shared_path.ownership`);
        None when it cannot tell (not the owner, a server, an in-memory store)."""
        ownership = self._ownership
        begun = None if ownership is None or self._writes is None else ownership.writes_begun()
        return None if begun is None else begun - self._own_writes

    def close(self) -> None:
        """Give this store's share of an embedded path back: the last store of this
        process on it closes Chroma's files and lets another process own the path."""
        if self._writes is not None:
            self._writes.close()
        ownership, self._ownership = self._ownership, None
        if ownership is not None:
            ownership.release()

    # --- opening --------------------------------------------------------------------------

    def _open_with_retries(self) -> Any:
        """The collection, retried for a while when opening it fails: processes that
        create a new store at the same moment race in Chroma's own setup (its SQLite
        schema: "database is locked", "table collections already exists"); each
        retry starts over with a fresh client."""
        deadline = time.monotonic() + _OPEN_PATIENCE
        delay = 0.05
        while True:
            try:
                return self._open()
            except DescriptorsExhausted:
                raise
            except StoreError as exc:
                if time.monotonic() + delay > deadline:
                    s = self._settings
                    raise StoreError(
                        f"{exc}. Tried for {_OPEN_PATIENCE:.0f} s; is another program holding "
                        f"the store ({s.url or s.path or 'in memory'}) or is the Chroma server "
                        f"down? ({SERVER_HINT})"
                    ) from exc.__cause__
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 1.0)
            if self._own_client:
                self.client = make_client(self._settings, attempts=3)

    def _open(self) -> Any:
        failed = f"could not open Chroma collection {self._chroma_name!r}"
        try:
            collection = self.client.get_or_create_collection(
                self._chroma_name,
                configuration={"hnsw": {"space": "cosine"}},
                metadata={**self._labels, EMBEDDING_META: self._embedding_name},
                embedding_function=None,
            )
        except Exception as exc:
            exhausted = descriptor_exhaustion(exc)
            if exhausted:  # not a race to wait out: say which limit
                raise DescriptorsExhausted(f"{failed}: {exhausted} ({exc})") from exc
            raise StoreError(f"{failed}: {exc}") from exc
        recorded = (collection.metadata or {}).get(EMBEDDING_META)
        try:
            fresh = recorded is None and collection.count() == 0
            if fresh:
                collection.modify(
                    metadata={**(collection.metadata or {}), EMBEDDING_META: self._embedding_name}
                )
        except Exception as exc:
            raise StoreError(f"{failed}: {exc}") from exc
        if not fresh and recorded != self._embedding_name:
            raise EmbeddingMismatchError(
                f"collection {self._chroma_name!r} was written with embedding {recorded!r}, but "
                f"this store embeds with {self._embedding_name!r}; vectors of different models are "
                "not comparable. Open it with the same embedding (or pass embedding_name= if "
                "only the name changed), or use another collection."
            )
        return collection


class DescriptorsExhausted(StoreError):
    """Opening a collection failed for want of file descriptors: retrying cannot help."""


def _similarities(got: Mapping[str, Any]) -> dict[str, float]:
    """A one-query Chroma result as ``{id: cosine similarity}`` in rank order (the
    collection's distance is cosine: 1 − similarity)."""
    return {i: 1.0 - float(d) for i, d in zip(got["ids"][0], got["distances"][0], strict=True)}
