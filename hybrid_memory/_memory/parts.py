"""The parts of one open store and how they are wired together: the Chroma collection,
its keyword index, the tag cache, the sync with the collection, the writer, the
searcher, the worker threads and the lock that orders writes; and the parts of the
namespaces opened from it, which close with it.

A store keeps at most ``open_namespaces`` namespaces open (see
:func:`hybrid_memory._process.descriptors.namespaces_kept_open`); the one used least recently
beyond that is closed (its keyword index file and worker threads released) and opened
again on its next use, so that ten thousand tenants fit in one process's descriptor
limit. Nothing is lost by closing one: Chroma holds its memories, and the index file
it leaves is reused (caught up from its watermark) when it is opened again. A namespace
in use by a call (:meth:`StoreParts.lease`) is never closed under it."""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hybrid_memory._embedding.embedders import Embedder, resolve_embedding
from hybrid_memory._embedding.query_cache import QueryCache
from hybrid_memory._keyword.index import KeywordIndex
from hybrid_memory._model.errors import StoreError
from hybrid_memory._model.namespaces import (
    namespace_collection,
    namespace_digest,
    namespace_index_path,
    partition_collection,
)
from hybrid_memory._model.settings import HybridMemorySettings
from hybrid_memory._model.tags import TagCache
from hybrid_memory._process.descriptors import namespaces_kept_open
from hybrid_memory._process.exit import close_at_exit, closed
from hybrid_memory._search.searcher import Searcher
from hybrid_memory._store.collection import ChromaCollection
from hybrid_memory._store.index_location import index_path, server_identity
from hybrid_memory._store.namespace_registry import NamespaceStore
from hybrid_memory._store.recent_vectors import RecentVectors
from hybrid_memory._store.sync import CLOCK_SKEW, IndexSync
from hybrid_memory._store.writer import Writer

log = logging.getLogger("hybrid_memory")

NAMESPACE_PAGE_SIZE = 512  # bytes per page of a namespace's keyword index file
_CLOSING_BEHIND = 8  # namespaces waiting to be closed beyond which a call closes its own


class StoreParts:
    """What a store and the views made by ``HybridMemory.with_settings`` share."""

    def __init__(
        self,
        settings: HybridMemorySettings,
        client: Any,
        embedding: Any,
        embedding_name: str | None,
        *,
        namespace: tuple[str, ...] = (),
        private: bool | None = None,
        labels: dict[str, Any] | None = None,
        partition: str | None = None,
        namespaces: NamespaceStore | None = None,
        counted_by: ChromaCollection | None = None,
        pool: ThreadPoolExecutor | None = None,
    ) -> None:
        s = settings
        self.settings = settings
        self.namespace_path = namespace
        self.given_client = client is not None  # a namespace's: see _open_namespace
        self.embedder: Embedder = resolve_embedding(embedding, s, embedding_name)
        # A store held in memory only, without a collection name, gets a private one,
        # dropped on close (and so do its namespaces).
        if private is None:
            private = (
                client is None
                and s.path is None
                and s.url is None
                and "collection" not in s.model_fields_set
            )
        self.private = private
        name = f"hm-{uuid.uuid4().hex[:12]}" if self.private else s.collection
        # What every namespace under this store (at any depth) shares: the collection
        # holding their memories and the one naming them; a namespace's own memories
        # are its ``partition`` of the former (see hybrid_memory._store.partition).
        self.namespaces = namespaces or NamespaceStore(name)
        self.collection: ChromaCollection = ChromaCollection(
            s,
            name,
            self.embedder.name,
            client,
            labels=labels,
            partition=partition,
            chroma_name=None if partition is None else partition_collection(self.namespaces.root),
            opened=None if partition is None else self.namespaces.shared,
            counted_by=counted_by,
        )
        if partition is not None:  # the next namespace opened reuses it (one call less)
            self.namespaces.shared = self.collection.chroma
        # What the store talks to, when that outlives this process and is not a ``path``
        # (whose index lives beside it): the index is then kept in a cache file.
        self.server = None if self.private or s.path else server_identity(s, self.collection.client)
        self.index = KeywordIndex(
            index_path(s, name, self.collection.id, self.server),
            s.keyword_tokenizer,
            # A namespace's index is mostly small: every table and index takes a page or
            # more, so 512-byte pages (SQLite's least) make one of ten memories 17.5 KiB
            # (27 at 1 KiB, ~90 at 4 KiB), which is most of what a tenant costs on disk.
            # A namespace of 20,000 searched and added as fast at 512 as at 1 KiB (each
            # within the other's noise; its file 8% larger; issue 44).
            page_size=None if partition is None else NAMESPACE_PAGE_SIZE,
            # And no copy of its vectors: a small namespace's search reads them all from
            # Chroma in one call anyway (VectorLeg.share_vectors), and the copy was 11 of
            # the 37 KiB of a namespace of ten memories (384 dimensions).
            keep_vectors=partition is None,
        )
        self.tags = TagCache(self.index.all_tags, s.tag_cache_ttl)
        self.lock = threading.RLock()
        # Query embeddings of concurrent searches, and the periodic sync check (one at a
        # time, so it never queues the embeddings of two searches). A namespace uses its
        # store's: a pool of its own started a thread in most searches of a namespace
        # opened again (~2 ms each on a loaded machine).
        self._own_pool = pool is None
        self.pool = pool or ThreadPoolExecutor(max_workers=3, thread_name_prefix="hybrid-memory")
        self.sync = IndexSync(
            self.collection,
            self.index,
            self.tags,
            self.lock,
            self.pool,
            late_commits=s.request_timeout + CLOCK_SKEW,
            chroma_path=None if s.url else s.path,
        )
        # This process's latest writes, compared exactly by the vector leg (Chroma's
        # search is approximate: a memory just added must be found).
        recent = RecentVectors()
        self.writer = Writer(
            self.collection, self.index, self.sync, self.tags, self.embedder, self.lock, recent
        )
        self.searcher = Searcher(
            self.collection,
            self.index,
            QueryCache(self.embedder, s.query_cache_size),
            self.pool,
            recent,
        )
        self.closed = False
        # Open namespaces, least recently used first; each with how many calls use it now.
        self._namespaces: OrderedDict[str, StoreParts] = OrderedDict()
        self._namespaces_lock = threading.Lock()
        self.leases = 0  # calls using these parts now (guarded by the parent's lock)
        self.kept_open = s.open_namespaces or namespaces_kept_open()
        # Closes the namespaces beyond kept_open, off the calls that opened others.
        self._closer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hybrid-memory-close")
        self._closing = 0  # namespaces queued there, not closed yet
        close_at_exit(self)  # see hybrid_memory._process.exit: no thread left running at exit

    def open_namespace(self, name: str, *, lease: bool = False) -> StoreParts:
        """The parts of namespace ``name`` (a valid one), opened on first use: a collection
        of its own on the same client, with the same embedder, and its own keyword index
        and tag cache. Kept open until this store closes, which closes them, or until
        more than ``kept_open`` namespaces are open and this one is the least recently
        used (then the next use opens it again). With ``lease``, one more call uses the
        parts, counted under the same lock that opened them: no other thread can close
        them in between (the caller gives the lease back: :meth:`lease`)."""
        with self._namespaces_lock:
            if self.closed:
                raise StoreError("the store is closed; open it again to use a namespace")
            parts = self._namespaces.get(name)
            if parts is None:
                parts = self._namespaces[name] = self._open_namespace(name)
            else:
                self._namespaces.move_to_end(name)
            if lease:
                parts.leases += 1
            evicted = self._least_used_beyond_limit()
        self._close_later(evicted)
        return parts

    @contextlib.contextmanager
    def lease(self, name: str) -> Iterator[StoreParts]:
        """The parts of namespace ``name``, kept open for as long as the block runs (a
        call in progress is never left with a closed index)."""
        parts = self.open_namespace(name, lease=True)
        try:
            yield parts
        finally:
            with self._namespaces_lock:
                parts.leases -= 1
                evicted = self._least_used_beyond_limit()
            self._close_later(evicted)

    def _close_later(self, evicted: list[StoreParts]) -> None:
        """Close namespaces taken out of the open ones, in the closing thread: closing
        one (its index file's last checkpoint, its threads joined) took ~20 ms of a
        search that had to open another namespace. Closed here, in this thread, when
        that thread is behind (so that descriptors stay bounded) or gone."""
        for old in evicted:
            with self._namespaces_lock:
                behind = self._closing >= _CLOSING_BEHIND or self.closed
                if not behind:
                    self._closing += 1
            if behind:
                old.close()
                continue
            try:
                self._closer.submit(self._close_one, old)
            except RuntimeError:  # the store is closing: its close waits for this one
                with self._namespaces_lock:
                    self._closing -= 1
                old.close()

    def _close_one(self, old: StoreParts) -> None:
        try:
            old.close()
        finally:
            with self._namespaces_lock:
                self._closing -= 1

    def _least_used_beyond_limit(self) -> list[StoreParts]:
        """Takes out of the open namespaces, least recently used first, those beyond
        ``kept_open`` that no call is using; the caller closes them (outside the lock).
        The namespaces of a private in-memory store are never closed: closing drops
        them."""
        beyond = len(self._namespaces) - self.kept_open
        if self.private or beyond <= 0:
            return []
        out: list[StoreParts] = []
        # Never the most recently used: it was just opened for a call (with every other
        # namespace in use, the store stays above the limit until a call ends).
        for name in list(self._namespaces)[:-1]:
            if beyond <= 0:
                break
            parts = self._namespaces[name]
            if parts.leases == 0 and not parts._leased_inside():
                del self._namespaces[name]
                out.append(parts)
                beyond -= 1
        return out

    def _leased_inside(self) -> bool:
        """Whether a call uses one of the namespaces nested under these parts."""
        with self._namespaces_lock:
            return any(p.leases or p._leased_inside() for p in self._namespaces.values())

    def open_count(self) -> int:
        """How many namespaces directly under this store are open now."""
        with self._namespaces_lock:
            return len(self._namespaces)

    def _open_namespace(self, name: str) -> StoreParts:
        s = self.settings
        parent = self.collection.name
        # The name the namespace would have as a collection of its own (as earlier
        # versions made it): it names its index file, and what it is moved from.
        collection = namespace_collection(parent, name)
        overrides: dict[str, str] = {"collection": collection}
        if s.index_path:
            # Several namespaces must not share one explicitly named index file.
            overrides["index_path"] = namespace_index_path(s.index_path, parent, name)
        parts = StoreParts(
            # A copy, not a new validation (which re-reads the environment, a good part of
            # opening a namespace again after it was closed): the collection name is made
            # valid by namespace_collection, the index path beside a valid one.
            s.model_copy(update=overrides),
            self.collection.client,
            self.embedder,
            None,
            namespace=(*self.namespace_path, name),
            private=self.private,
            partition=namespace_digest(parent, name),
            namespaces=self.namespaces,
            counted_by=self.collection,  # its writes counted by the path's owner
            pool=self.pool,
        )
        parts.given_client = self.given_client
        try:
            self.namespaces.opened(parts.collection, parent, name, s)
            # Closed in step and untouched since (the path owner counted no write that
            # can touch its share): nothing to read. Else, as a store on open: compare
            # ids too (see HybridMemory.__init__).
            mark = self.namespaces.closed_in_step.pop(parts.collection.partition or "", None)
            if mark is None or not parts.sync.resume(mark):
                parts.sync.rebuilding_on_damage(lambda: parts.sync.sync(reconcile=True))
        except BaseException:
            parts.close()
            raise
        return parts

    def namespace_names(self) -> list[str]:
        """The names of the namespaces directly under this store, sorted: those opened
        here or in any other process, holding memories or not."""
        return self.namespaces.children(self.collection)

    def close(self) -> None:
        closed(self)
        with self._namespaces_lock:
            if self.closed:
                return
            self.closed = True
            namespaces, self._namespaces = list(self._namespaces.values()), OrderedDict()
        self._closer.shutdown(wait=True)  # namespaces closed off the calls first
        for parts in namespaces:
            parts.close()
        self.sync.stop()
        if self._own_pool:
            self.pool.shutdown(wait=True)
        else:  # the store's pool: only this namespace's check is waited for
            self.sync.wait_checks()
        key, mark = self.collection.partition, self.sync.in_step_write_count
        if key is not None and not self.private:
            try:
                self.namespaces.name_unwritten(self.collection, holding=self.index.count() > 0)
            except StoreError as exc:  # only an empty namespace goes unlisted elsewhere
                log.warning("namespace %s could not be named: %s", self.collection.name, exc)
        if key is not None and mark is not None and not self.index.lagging:
            self.namespaces.closed_in_step[key] = mark  # see _open_namespace
        self.index.close()
        if self.private:
            self.collection.drop()
        if not self.namespace_path:
            self.namespaces.close(drop=self.private)
        self.collection.close()


class StoreHandle:
    """How a store reaches its parts: always the same ones."""

    def __init__(self, parts: StoreParts) -> None:
        self._parts = parts

    def parts(self) -> StoreParts:
        return self._parts

    @contextlib.contextmanager
    def lease(self) -> Iterator[StoreParts]:
        yield self._parts


class NamespaceHandle:
    """How a namespace view reaches its parts: through its parent, which opens them again
    when they were closed for being the least recently used. Within :meth:`lease` (a
    public call in progress) this thread keeps the same parts, open."""

    def __init__(self, parent: StoreHandle | NamespaceHandle, name: str) -> None:
        self.parent = parent
        self.name = name
        self._held = threading.local()

    def parts(self) -> StoreParts:
        held: list[StoreParts] | None = getattr(self._held, "stack", None)
        if held:
            return held[-1]
        return self.parent.parts().open_namespace(self.name)

    @contextlib.contextmanager
    def lease(self) -> Iterator[StoreParts]:
        held: list[StoreParts] | None = getattr(self._held, "stack", None)
        if held:  # a call inside a call of this view: already held
            yield held[-1]
            return
        with self.parent.lease() as parent, parent.lease(self.name) as parts:
            self._held.stack = [parts]
            try:
                yield parts
            finally:
                self._held.stack = []
