"""Keeping the derived keyword index in step with the collection.

The collection is the source of truth; the index is checked against it when a store
opens, after this process's writes (which go to both), and periodically for the
writes of other processes sharing the path or the server. A damaged index file is
rebuilt from the collection.
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor

from hybrid_memory._collection import ChromaCollection
from hybrid_memory._errors import StoreError
from hybrid_memory._index.file import is_damage
from hybrid_memory._index.index import KeywordIndex
from hybrid_memory._records import UPDATED_KEY
from hybrid_memory._tags import TagCache


class IndexSync:
    """Brings one keyword index up to date with its collection, on demand and on a clock.

    All index writes happen under ``lock`` (the store's write lock). Besides the time of
    the last check, it counts this process's writes twice each (:meth:`writing`): an
    odd count means a write is between the collection and the index, so a background
    check running meanwhile cannot trust what it sees.
    """

    def __init__(
        self,
        collection: ChromaCollection,
        index: KeywordIndex,
        tags: TagCache,
        lock: threading.RLock,
        pool: Executor,
    ) -> None:
        self._collection = collection
        self._index = index
        self._tags = tags
        self._lock = lock
        self._pool = pool
        self.last_check = -math.inf  # monotonic clock
        self._checking = threading.Lock()  # at most one background check in flight
        self._writes = 0
        self.closed = False

    def sync(self, *, full: bool = False, reconcile: bool = False) -> None:
        """See :meth:`HybridMemory.sync`."""
        with self._lock:
            index, collection = self._index, self._collection
            changed = False
            if index.get_state("collection_id") != collection.id:
                index.clear()
                index.set_state("collection_id", collection.id)
                changed = True
            watermark = None if full else index.watermark()
            where = None if watermark is None else {UPDATED_KEY: {"$gt": watermark}}
            for page in collection.rows(where):
                index.upsert(page)
                changed = True
            if full or reconcile or index.count() != collection.count():
                changed = self._reconcile() or changed
            self.last_check = time.monotonic()
            if changed:  # another process's write may have added or removed tags
                self._tags.invalidate()

    def maybe_sync(self, interval: float) -> None:
        """The periodic check: due every ``interval`` seconds, run in the background
        unless the index may be far behind (no check started for two intervals) or
        the interval is 0."""
        now = time.monotonic()
        since = now - self.last_check
        if since < interval:
            return
        if interval == 0 or since >= 2 * interval:
            self.rebuilding_on_damage(self.sync)
        elif self._checking.acquire(blocking=False):
            # The interval counts from the check's start, finished or not; a check
            # that fails or cannot tell gives the time back: the next call asks again.
            previous, self.last_check = self.last_check, now
            try:
                self._pool.submit(self._check_in_background, previous, now)
            except RuntimeError:  # the store was closed
                self.last_check = previous
                self._checking.release()

    def _check_in_background(self, previous: float, started: float) -> None:
        try:
            if self.closed:
                return
            writes = self._writes
            behind = writes % 2 == 0 and self._behind()
            if writes % 2 or self._writes != writes:
                # This process wrote meanwhile, between the collection and the index:
                # the answer may be wrong either way. Ask again at the next call.
                if self.last_check == started:
                    self.last_check = previous
            elif behind:
                self.rebuilding_on_damage(self.sync)
        except Exception:
            # Chroma unreachable, say: the next call starts another check, and once no
            # check succeeded for two intervals, calls check themselves and raise.
            if self.last_check == started:
                self.last_check = previous
        finally:
            self._checking.release()

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Marks a write of this process to the collection and then the index (under the
        write lock), for the background check."""
        self._writes += 1
        try:
            yield
        finally:
            self._writes += 1

    def _behind(self) -> bool:
        """Whether :meth:`sync` would find anything to do, asked without the write lock,
        so that a check finding nothing (the usual answer) never holds up a write. The
        answer holds only if this process wrote nothing meanwhile (see :meth:`writing`)."""
        index = self._index
        if index.get_state("collection_id") != self._collection.id:
            return True
        watermark = index.watermark()
        if watermark is not None and self._collection.any_updated_after(watermark, UPDATED_KEY):
            return True
        return index.count() != self._collection.count()

    def _reconcile(self) -> bool:
        """Make the index hold exactly the collection's ids; True if it changed."""
        in_collection = self._collection.all_ids()
        indexed = self._index.ids()
        stale = indexed - in_collection
        if stale:
            self._index.delete(stale)
        missing = sorted(in_collection - indexed)
        for page in self._collection.rows_by_id(missing):
            self._index.upsert(page)
        return bool(stale or missing)

    def repair(self, cause: BaseException) -> None:
        """Reopen the index after damage (:func:`is_damage`) and refill it from the
        collection: it is derived state."""
        with self._lock:
            self._index.reset(cause)
            self.sync(reconcile=True)
            self._tags.invalidate()

    def rebuilding_on_damage(self, work: Callable[[], object]) -> None:
        """Index work whose result a rebuild from the collection gives too (a sync, or an
        index write after the collection took the write): on damage, the rebuild stands
        in for it."""
        try:
            work()
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise StoreError(f"the keyword index failed: {exc}") from exc
            self.repair(exc)
