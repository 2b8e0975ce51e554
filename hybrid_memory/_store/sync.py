"""Keeping the derived keyword index in step with the collection.

The collection is the source of truth; the index is checked against it when a store
opens, after this process's writes (which go to both), and periodically for the
writes of other processes sharing the path or the server. A damaged index file is
rebuilt from the collection.

An index that must be filled from scratch with more than ``warm_in_background``
memories (the first process on a machine to open a large server store, say) is filled
by a background thread ("warming"), so that the store opens at once: until it is warm,
searches answer from the vector leg (saying so in ``fallback_mode``) and the calls
that read the index wait for it (:meth:`IndexSync.wait_warm`).
"""

from __future__ import annotations

import logging
import math
import sqlite3
import threading
import time
from concurrent.futures import Executor, Future
from typing import Any

from hybrid_memory._keyword.index import KeywordIndex
from hybrid_memory._model.errors import StoreError
from hybrid_memory._model.records import UPDATED_KEY
from hybrid_memory._model.tags import TagCache
from hybrid_memory._model.times import now_timestamp
from hybrid_memory._store.chroma_log import LogPosition
from hybrid_memory._store.collection import PAGE, ChromaCollection
from hybrid_memory._store.sync_check import PeriodicCheck
from hybrid_memory._store.sync_copy import Counted, copy_all, log_failure
from hybrid_memory._store.sync_in_step import InStepTracking
from hybrid_memory._store.sync_repair import Repair
from hybrid_memory._store.sync_warming import Warming

log = logging.getLogger("hybrid_memory")

# How far the clocks of the machines writing to one store may disagree, for the catch-up's
# overlap (see IndexSync.settled): NTP keeps them within milliseconds.
CLOCK_SKEW = 5.0
# The index file's state key of the settled point (IndexSync.settled).
_SETTLED_KEY = "settled_before"
# The most stamps of its own a check names to Chroma (IndexSync._unseen); Chroma's SQLite
# binds each as a variable (at most 32,766 per statement).
_STAMPS_NAMED = 5_000


class IndexSync(InStepTracking, Warming, Repair, PeriodicCheck):
    """Brings one keyword index up to date with its collection, on demand and on a clock.

    All index writes happen under ``lock`` (the store's write lock). Besides the time of
    the last check, it counts this process's writes twice each (:meth:`writing`): an
    odd count means a write is between the collection and the index, so a background
    check running meanwhile cannot trust what it sees.

    **What a catch-up reads.** A write is stamped (``updated_at``, the writer's clock)
    just before its one Chroma request, and commits when that request is done: another
    process's write can commit after a later-stamped one, so "everything stamped after
    the newest ``updated_at`` indexed" misses it (an update changes no count, so nothing
    else brings it in: found by ``benchmarks/history_check.py`` on a server store). A
    write that anyone was told of committed within ``late_commits`` seconds of its stamp
    (the request's deadline plus :data:`CLOCK_SKEW`), so a read of the collection that
    started at ``t`` saw every write stamped before ``t - late_commits``. The index
    keeps that point of its last complete read (:attr:`settled`, also in the index file
    for the processes sharing it), and a check asks Chroma for the records stamped after
    it whose stamp is none of the index's (:meth:`_unseen`): new writes, and late ones.
    So the stamps of the last ``late_commits`` seconds are sent with every check (a few
    ms per thousand), and only what the index lacks is read and copied.
    """

    def __init__(
        self,
        collection: ChromaCollection,
        index: KeywordIndex,
        tags: TagCache,
        lock: threading.RLock,
        pool: Executor,
        late_commits: float,
        chroma_path: str | None = None,
    ) -> None:
        self._collection = collection
        # The collection's log position, when it lives on an embedded Chroma path (None:
        # a server, a client the caller made, in memory).
        self._log = (
            None if chroma_path is None else LogPosition(chroma_path, str(collection.chroma.id))
        )
        # The log position when the index was last known in step with the collection,
        # carried through this process's own writes (see writing): while the collection
        # reads the same, the index is in step, and closing stores it for the next open.
        self._in_step_position: str | None = None
        self._late_commits = late_commits
        # Every write stamped up to this time (this process's clock) that the collection
        # holds is in the index as the collection holds it (None: not known; see above).
        self.settled: float | None = None
        self._index = index
        self._tags = tags
        self._lock = lock
        self._pool = pool
        self.last_check = -math.inf  # monotonic clock
        self.check_seconds = 0.0  # how long the last check took (see _CHECK_SHARE)
        # The collection's write marker when a check last found the index in step: while
        # it reads the same, nobody wrote since, and a check has nothing to find.
        self._in_step_marker: int | None = None
        # The same, as the path owner's count of the writes that can touch the collection
        # (:meth:`WriteCounts.begun_on_share`): unlike the marker, writes elsewhere on the
        # path (other namespaces) leave it alone; kept when a namespace closes, so that
        # opening it again needs no read of the collection while it is unchanged.
        self.in_step_write_count: int | None = None
        self._checking = threading.Lock()  # at most one background check in flight
        self._writes = 0
        self.closed = False
        self._warm_thread: threading.Thread | None = None
        self._warmed = 0  # memories the warming fill has read so far
        self._to_warm = 0  # memories in the collection when it started
        self._comparing: Future[None] | None = None  # see _compare_in_background
        # The open found the collection's log position behind the index's: a backup was
        # put back, and the next sync re-reads every memory.
        self._restored = False

    # --- opening ---------------------------------------------------------------------------

    def open(self, *, reconcile: bool, warm_above: int) -> None:
        """The check a store makes when it opens. An index that must be filled from
        scratch with many memories warms in the background. An index kept from an
        earlier open whose stored log position is the collection's is in step as it is
        (nothing read). Otherwise a large index is compared with the collection in the
        background, while it answers searches, and a small one catches up what changed
        since its watermark at once. ``reconcile``: then compare ids at once too (else
        in the background: deletes made meanwhile by others are reconciled within a
        moment). ``warm_above``: the setting ``warm_in_background``."""
        with self._lock:
            index, collection = self._index, self._collection
            fresh = index.get_state("collection_id") != collection.id
            if fresh:
                size = collection.count()
                if size > warm_above:
                    self._to_warm = size
                    self._warm_thread = threading.Thread(
                        target=self._warm, name="hybrid-memory-warm", daemon=True
                    )
                    self._warm_thread.start()
                    return
            if not fresh and self._resume_at_position():
                return
            if not fresh and index.count() > warm_above:
                # A large index kept from an earlier open, whose collection may have
                # changed behind its back: compared in the background while searches
                # answer from it (the vector leg reads the collection as it is).
                self._compare_in_background()
                return
        restored, self._restored = self._restored, False
        self.rebuilding_on_damage(
            lambda: self.sync(reconcile=reconcile or fresh or restored, full=restored)
        )
        if not (reconcile or fresh or restored):
            self._reconcile_in_background()

    def _compare_in_background(self) -> None:
        """A full catch-up and comparison of ids on the pool, the index answering
        searches meanwhile; the periodic check waits for it (:meth:`maybe_sync`)."""
        self.last_check = time.monotonic()

        restored, self._restored = self._restored, False

        def run() -> None:
            if not self.closed:
                self.rebuilding_on_damage(lambda: self.sync(reconcile=True, full=restored))

        self._comparing = self._pool.submit(run)
        self._comparing.add_done_callback(log_failure)

    def comparing(self) -> bool:
        """Whether the comparison an open started in the background is under way."""
        return self._comparing is not None and not self._comparing.done()

    def _reconcile_in_background(self) -> None:
        """Compare ids with the collection on the pool. The collection's ids (a read
        that grows with the store) are read without the write lock, so that this
        process's writes go on meanwhile; see :meth:`_reconcile` for what a write made
        during that read cannot be mistaken for."""

        def run() -> None:
            with self._checking:
                if self.closed:
                    return
                in_collection = self._collection.all_ids()

                def compare() -> None:
                    with self._lock:
                        if self._reconcile(in_collection):
                            self._tags.invalidate()

                self.rebuilding_on_damage(compare)

        future = self._pool.submit(run)
        future.add_done_callback(log_failure)

    # --- warming: a fill from scratch in the background --------------------------------

    def stop(self) -> None:
        """On close: stop a fill in progress (the next open starts it again), and store
        the collection's log position if the index is known to be in step with it, so
        that the next open reads nothing of the collection."""
        self.closed = True
        self.wait_warm()
        try:
            self._keep_position_if_unchanged()
        except (sqlite3.Error, StoreError) as exc:  # the next open compares instead
            log.debug("the keyword index's log position was not stored: %s", exc)

    def wait_checks(self) -> None:
        """After :meth:`stop`: return once no background check of this index is queued
        or running (one queued finds it closed and returns at once)."""
        with self._checking:
            pass

    def sync(self, *, full: bool = False, reconcile: bool = False) -> None:
        """See :meth:`HybridMemory.sync`."""
        self.wait_warm()
        with self._lock:
            clock = time.perf_counter()
            started = now_timestamp()  # before the reads (see the class's docstring)
            index, collection = self._index, self._collection
            marker = collection.writes.file_version()  # before the reads: a write after it shows
            mark = collection.writes.begun_on_share()  # the same, counted (see in_step_write_count)
            position = self._position()  # the same, as Chroma's log tells it
            changed = emptied = False
            if index.get_state("collection_id") != collection.id:
                if index.count():  # a new file (a new namespace's) has nothing to clear
                    index.clear()
                index.set_state("collection_id", collection.id)
                changed = full = emptied = True
                self.settled = None
            since = None if full else self._since()
            where = None if since is None else self._unseen(since)
            if since is not None and where is None:
                where = {UPDATED_KEY: {"$gt": since}}  # compared row by row as copied
            whole_share = reconcile and not full and collection.partition is not None
            held = index.count() if whole_share else 0
            whole_share = whole_share and held < PAGE
            if whole_share:
                # A namespace's share, compared id by id: one read of all its records
                # (compared row by row as copied) gives the reconcile its ids too, where
                # the read of the changed ones and then of every id were two scans of
                # the shared collection (on a server, most of opening a namespace again).
                where = None
            # Its vectors too when the search that follows compares them all (see
            # VectorLeg.share_vectors), which would read them again.
            keep_vectors = whole_share and held <= collection.compare_all
            pages = Counted(collection.rows(where, keep_vectors=keep_vectors), ids=whole_share)
            copied = copy_all(index, pages, changed_only=not full)
            changed = copied > 0 or changed
            self._settle(started, persist=True)
            lagging = set(index.lagging)
            in_step = False
            if emptied and pages.whole and not lagging:
                # The emptied index took the collection's every record in one read: it
                # holds exactly what that read saw, as a reconcile would make it (whose
                # read of every id is another scan: most of creating a namespace).
                in_step = True
            elif full or reconcile or lagging or index.count() != collection.count():
                # Every record came in one read (see _Counted.whole): its ids are the
                # collection's as of that read, which is what a reconcile reads first.
                changed = (
                    self._reconcile(pages.ids if whole_share and pages.whole else None) or changed
                )
                if lagging:  # their rows were rewritten (or removed) by the reconcile
                    copy_all(index, collection.rows_by_id(sorted(lagging)))
                    index.lagging -= lagging
                in_step = not index.lagging  # ids compared: what the reads saw, exactly
            elif not changed:  # a check, as the periodic one (see _CHECK_SHARE)
                self.check_seconds = time.perf_counter() - clock
                self._in_step_marker = marker
                in_step = True
            self.in_step_write_count = mark if in_step else None
            if in_step:
                self._in_step_marker = marker
                self._keep_position(position)
            self.last_check = time.monotonic()
            if changed:  # another process's write may have added or removed tags
                self._tags.invalidate()

    def _since(self) -> float | None:
        """Where a catch-up starts reading (the rows stamped after it): the index's
        settled point (this process's, or the newer one another process sharing the
        index file stored); for an index file that holds none (written by an earlier
        version), its newest ``updated_at`` less the overlap; None: read everything."""
        stored = self._index.get_state(_SETTLED_KEY)
        if stored is not None:
            self.settled = max(float(stored), self.settled or -math.inf)
        if self.settled is not None:
            return self.settled
        watermark = self._index.watermark()
        return None if watermark is None else watermark - self._late_commits

    def _settle(self, read_started: float, *, persist: bool = False) -> None:
        """A read of the collection that started at ``read_started`` (this process's
        clock) found the index in step, or brought it there: every write stamped up to
        ``late_commits`` before it is in the index. ``persist``: under the write lock,
        also for the processes sharing the index file."""
        point = read_started - self._late_commits
        if self.settled is None or point > self.settled:
            self.settled = point
            if persist:
                self._index.set_state(_SETTLED_KEY, repr(point))

    def _unseen(self, since: float) -> dict[str, Any] | None:
        """Chroma's ``where`` for the records stamped after ``since`` at a version the
        index lacks: new ones, and writes that committed late (see the class). Their
        stamps differ from each stamp the index holds after ``since``, which Chroma is
        given (a ``$nin`` of floats, compared exactly), so that it answers with those
        rows only: at 30,000 memories with 1,000 in the window, 17 ms for the ids, where
        reading the window's stamps to compare them here took 90 ms. None when the index
        holds more than :data:`_STAMPS_NAMED` such stamps (the caller compares)."""
        after = {UPDATED_KEY: {"$gt": since}}
        stamps = self._index.stamps_after(since)
        if not stamps:
            return after
        if len(stamps) > _STAMPS_NAMED:
            return None
        return {"$and": [after, {UPDATED_KEY: {"$nin": stamps}}]}

    def _reconcile(self, in_collection: set[str] | None = None) -> bool:
        """Make the index hold exactly the collection's ids; True if it changed. Under
        the write lock. ``in_collection``: the collection's ids when read before.

        The collection's ids are read before the index's, and other processes write
        meanwhile (their memory goes to the collection, then to the index): an id the
        index holds and that read lacked may be newer than the read, or skipped by it
        (the read pages by offset, and a delete shifts the pages). So the collection is
        asked again about those, inside the index's delete, while no other write can
        commit to the index; only what it still lacks is stale. (A memory another agent
        wrote during a reconcile used to be dropped from the index all processes on the
        path share, and stayed out while nobody wrote: a store whose check found the
        index in step skips checks until the collection changes.)"""
        if in_collection is None:
            in_collection = self._collection.all_ids()
        indexed = self._index.ids()
        stale = indexed - in_collection
        removed = self._index.delete(stale, unless=self._collection.existing) if stale else 0
        missing = sorted(in_collection - indexed)
        copy_all(self._index, self._collection.rows_by_id(missing))
        return bool(removed or missing)

    # --- damage ----------------------------------------------------------------------------
