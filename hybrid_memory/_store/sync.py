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

import contextlib
import logging
import math
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future
from typing import Any

from hybrid_memory._keyword.file import index_failure, is_damage, is_full
from hybrid_memory._keyword.index import KeywordIndex
from hybrid_memory._model.errors import StoreError
from hybrid_memory._model.records import UPDATED_KEY, IndexRow
from hybrid_memory._model.tags import TagCache
from hybrid_memory._model.times import now_timestamp
from hybrid_memory._store.collection import PAGE, ChromaCollection

log = logging.getLogger("hybrid_memory")

# Writes of other processes while a fill reads the collection are caught up from the
# fill's start on this process's clock, less this margin for clocks that disagree.
_CLOCK_SLACK = 300.0
# How far the clocks of the machines writing to one store may disagree, for the catch-up's
# overlap (see IndexSync.settled): NTP keeps them within milliseconds.
CLOCK_SKEW = 5.0
# The index file's state key of the settled point (IndexSync.settled).
_SETTLED_KEY = "settled_before"
# The most stamps of its own a check names to Chroma (IndexSync._unseen); Chroma's SQLite
# binds each as a variable (at most 32,766 per statement).
_STAMPS_NAMED = 5_000
# The periodic check asks Chroma for a count and a filtered read, which take time in
# proportion to the collection (40 ms at 100,000 memories, ~0.4 s at a million, on this
# project's 2-core machine): it is due no sooner than this many times its own last
# duration, so that it never takes more than 1/20 of the process's time.
_CHECK_SHARE = 20.0


class IndexSync:
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
    ) -> None:
        self._collection = collection
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
        self._in_step_at: int | None = None
        # The same, as the path owner's count of the writes that can touch the collection
        # (:meth:`WriteCounts.begun_on_share`): unlike the marker, writes elsewhere on the
        # path (other namespaces) leave it alone; kept when a namespace closes, so that
        # opening it again needs no read of the collection while it is unchanged.
        self.in_step_mark: int | None = None
        self._checking = threading.Lock()  # at most one background check in flight
        self._writes = 0
        self.closed = False
        self._warm_thread: threading.Thread | None = None
        self._warmed = 0  # memories the warming fill has read so far
        self._to_warm = 0  # memories in the collection when it started

    # --- opening ---------------------------------------------------------------------------

    def open(self, *, reconcile: bool, warm_above: int) -> None:
        """The check a store makes when it opens. An index that must be filled from
        scratch with many memories warms in the background; otherwise the index catches
        up what changed since its watermark, at once. ``reconcile``: compare ids at once
        (else in the background, when the index was kept from an earlier open: deletes
        made meanwhile by others are then reconciled within a moment). ``warm_above``:
        the setting ``warm_in_background``."""
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
        self.rebuilding_on_damage(lambda: self.sync(reconcile=reconcile or fresh))
        if not (reconcile or fresh):
            self._reconcile_in_background()

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
        future.add_done_callback(_log_failure)

    # --- warming: a fill from scratch in the background --------------------------------

    def warming(self) -> str | None:
        """Why the keyword and tag legs cannot answer yet (None: they can)."""
        thread = self._warm_thread
        if thread is None or not thread.is_alive():
            return None
        return (
            f"the keyword index is warming ({self._warmed} of about {self._to_warm} memories "
            "read): answered from the vector leg only"
        )

    def wait_warm(self) -> None:
        """Return once the index is warm (at once when it is, or on the warming thread).
        Not waited for under the write lock, which the fill takes for each page."""
        thread = self._warm_thread
        if thread is None or thread is threading.current_thread():
            return
        if getattr(self._lock, "_is_owned", lambda: False)():
            # A write that met a damaged index, under the write lock: waiting would never
            # end (the fill takes the lock for each page); its repair runs beside the fill.
            return
        thread.join()

    def stop(self) -> None:
        """On close: stop a fill in progress (the next open starts it again)."""
        self.closed = True
        self.wait_warm()

    def wait_checks(self) -> None:
        """After :meth:`stop`: return once no background check of this index is queued
        or running (one queued finds it closed and returns at once)."""
        with self._checking:
            pass

    def _warm(self) -> None:
        try:
            with self._index.file.filling(lambda: self.closed):
                if not self.closed:
                    self.rebuilding_on_damage(self._fill)
        except Exception as exc:
            # The next call checks first (and fills in the foreground) and raises.
            log.warning("keyword index warming failed: %s", exc)
            self.last_check = -math.inf

    def _fill(self) -> None:
        """Fill the index from scratch, a page at a time, each page read and written under
        the write lock (so that this process's writes and the fill never cross); pages
        read by offset may skip or repeat memories that others add or delete meanwhile:
        what changed since the fill began is caught up, and ids reconciled, at the end."""
        index, collection = self._index, self._collection
        if index.get_state("collection_id") == collection.id:  # filled by another process
            self.sync(reconcile=True)
            return
        started = now_timestamp() - _CLOCK_SLACK
        with self._lock:
            index.clear()
            self.settled = None
            self.in_step_mark = None
        pages = collection.rows(None)
        while not self.closed:
            # Each page is read outside the index's write transaction (unlike other
            # copies, :func:`_copy_all`): searches answer from the vector leg meanwhile and
            # read memories from the index, which a page read of a large collection would
            # hold up. A page that an update or delete overtook is put right below.
            with self._lock:
                page = next(pages, None)
                if page is None:
                    break
                index.upsert(page)
            self._warmed += len(page)
        if self.closed:
            return
        with self._lock:
            read_started = now_timestamp()
            _copy_all(index, collection.rows({UPDATED_KEY: {"$gt": started}}))
            self._reconcile()
            index.set_state("collection_id", collection.id)
            self._settle(read_started, persist=True)
            self.last_check = time.monotonic()
            self._tags.invalidate()

    # --- catching up --------------------------------------------------------------------

    def sync(self, *, full: bool = False, reconcile: bool = False) -> None:
        """See :meth:`HybridMemory.sync`."""
        self.wait_warm()
        with self._lock:
            clock = time.perf_counter()
            started = now_timestamp()  # before the reads (see the class's docstring)
            index, collection = self._index, self._collection
            marker = collection.writes.file_version()  # before the reads: a write after it shows
            mark = collection.writes.begun_on_share()  # the same, counted (see in_step_mark)
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
            pages = _Counted(collection.rows(where, keep_vectors=keep_vectors), ids=whole_share)
            copied = _copy_all(index, pages, changed_only=not full)
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
                    _copy_all(index, collection.rows_by_id(sorted(lagging)))
                    index.lagging -= lagging
                in_step = not index.lagging  # ids compared: what the reads saw, exactly
            elif not changed:  # a check, as the periodic one (see _CHECK_SHARE)
                self.check_seconds = time.perf_counter() - clock
                self._in_step_at = marker
                in_step = True
            self.in_step_mark = mark if in_step else None
            self.last_check = time.monotonic()
            if changed:  # another process's write may have added or removed tags
                self._tags.invalidate()

    def maybe_sync(self, interval: float) -> None:
        """The periodic check: due every ``interval`` seconds (or 20 times as long as the
        last check took, if longer), run in the background unless the index may be far
        behind (no check started for two of those) or the interval is 0."""
        now = time.monotonic()
        since = now - self.last_check
        if interval:
            interval = max(interval, _CHECK_SHARE * self.check_seconds)
        if since < interval or self.warming():
            return
        if interval and self._nothing_written():
            self.last_check = now
            self._settle(now_timestamp())  # nobody wrote since the index was in step
            return
        if interval == 0 or since >= 2 * interval:
            self._sync_unless_full()
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
            marker = self._collection.writes.file_version()  # before: a write after it shows
            read_started = now_timestamp()
            clock = time.perf_counter()
            behind = writes % 2 == 0 and self._behind()
            if writes % 2 == 0:
                self.check_seconds = time.perf_counter() - clock
            if writes % 2 or self._writes != writes:
                # This process wrote meanwhile, between the collection and the index:
                # the answer may be wrong either way. Ask again at the next call.
                if self.last_check == started:
                    self.last_check = previous
            elif behind:
                self.rebuilding_on_damage(self.sync)
            else:
                self._in_step_at = marker
                self._settle(read_started)
        except Exception:
            # Chroma unreachable, say: the next call starts another check, and once no
            # check succeeded for two intervals, calls check themselves and raise.
            if self.last_check == started:
                self.last_check = previous
        finally:
            self._checking.release()

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

    def _nothing_written(self) -> bool:
        """Whether nobody (this process included) wrote to the collection since a check
        last found the index in step with it, as the path owner's count of writes or the
        write marker tells (which only an embedded store has)."""
        mark = self.in_step_mark
        if mark is not None and self._collection.writes.begun_on_share() == mark:
            return True
        marker = self._in_step_at
        return marker is not None and self._collection.writes.file_version() == marker

    def resume(self, mark: int) -> bool:
        """Take the index as in step, without reading the collection, if it was at
        ``mark`` (:attr:`in_step_mark`, when the namespace closed) and no write that can
        touch the collection began since (the mark reads the same), and the index file is
        still this collection's; False (nothing done) otherwise, or when the file cannot
        be read: the caller syncs (which repairs a damaged file)."""
        try:
            return self._resume(mark)
        except sqlite3.DatabaseError:
            return False

    def _resume(self, mark: int) -> bool:
        with self._lock:
            index, collection = self._index, self._collection
            if (
                collection.writes.begun_on_share() != mark
                or index.lagging
                or index.get_state("collection_id") != collection.id
            ):
                return False
            self.in_step_mark = mark
            self.last_check = time.monotonic()
            self._settle(now_timestamp())
            return True

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Marks a write of this process to the collection and then the index (under the
        write lock), for the background check.

        The write also keeps a check's finding that the index is in step, when the store
        was in step before it and nobody else wrote meanwhile: this process owns the
        embedded path, and neither its other stores nor other processes (whose writes
        it runs) wrote, so every commit to the path since was this write's, both halves
        of which are done here. Without this, each write of a store's own made the next
        check due, and a check (a Chroma count and filtered read: ~0.4 s at a million
        memories) slowed the searches and writes beside it."""
        in_step = self._in_step_at
        others = None if in_step is None else self._collection.writes.begun_by_others()
        unchanged = others is not None and self._collection.writes.file_version() == in_step
        mark = self.in_step_mark
        counted = mark is not None and self._collection.writes.begun_on_share() == mark
        own = self._collection.writes.own_record_writes
        began = now_timestamp()
        self._writes += 1
        try:
            yield
            # In step after it too if every write begun meanwhile that can touch the
            # collection was this one's (a namespace's: on its share).
            after = self._collection.writes.begun_on_share() if counted else None
            if mark is not None and self.in_step_mark == mark:
                if (
                    after is not None
                    and after - mark == self._collection.writes.own_record_writes - own
                ):
                    self.in_step_mark = after
                else:
                    self.in_step_mark = None
            if unchanged:
                marker = self._collection.writes.file_version()
                # Counted after the marker is read: another's write counted later than
                # this commits later too, and moves the marker again.
                if (
                    self._collection.writes.begun_by_others() == others
                    and self._in_step_at == in_step
                ):
                    self._in_step_at = marker
                    self._settle(began)
        finally:
            self._writes += 1

    def _behind(self) -> bool:
        """Whether :meth:`sync` would find anything to do, asked without the write lock,
        so that a check finding nothing (the usual answer) never holds up a write. The
        answer holds only if this process wrote nothing meanwhile (see :meth:`writing`)."""
        index, collection = self._index, self._collection
        if index.lagging or index.get_state("collection_id") != collection.id:
            return True
        since = self._since()
        if since is not None:
            where = self._unseen(since)
            if where is not None:
                if collection.any_passing(where):  # one id read, at most
                    return True
            else:
                stamps = collection.updated_at_after(since, UPDATED_KEY)
                if index.updated_at(list(stamps)) != stamps:
                    return True
        return index.count() != collection.count()

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
        _copy_all(self._index, self._collection.rows_by_id(missing))
        return bool(removed or missing)

    # --- damage ----------------------------------------------------------------------------

    def recover(self, error: sqlite3.DatabaseError) -> None:
        """The one decision on an error of the keyword index: damage (:func:`is_damage`)
        is repaired (the index reopened and refilled from the collection: it is derived
        state) and the caller may carry on; any other error is raised as StoreError."""
        if not is_damage(error):
            raise index_failure(self._index.path, error) from error
        self.wait_warm()  # before the write lock, which the warming fill takes
        with self._lock:
            self._index.reset(error)
            self.sync(reconcile=True)
            self._tags.invalidate()

    def _sync_unless_full(self) -> None:
        """A catch-up before a call, which does not fail the call when the index finds no
        room on disk: a search then answers from the index as it is (the collection
        answers for the memories it lags on, see :meth:`index_lags`); the next check
        tries again."""
        try:
            self.rebuilding_on_damage(self.sync)
        except StoreError as exc:
            if not is_full(exc.__cause__ or exc):
                raise
            log.warning("the keyword index could not catch up: %s", exc)
            self.last_check = time.monotonic()

    def after_collection_write(self, ids: Iterable[str], work: Callable[[], object]) -> None:
        """``work``, the index half of a write the collection took (so the write stands,
        whatever happens here): on damage, a rebuild stands in for it; when the index
        finds no room on disk, the ids are noted as lagging (:meth:`index_lags`)."""
        try:
            self.rebuilding_on_damage(work)
        except StoreError as exc:
            if not is_full(exc.__cause__ or exc):
                raise
            self.index_lags(ids, exc)

    def index_lags(self, ids: Iterable[str], error: BaseException) -> None:
        """The collection took a write of ``ids`` whose index half found no room on disk.
        The write stands (the collection is the one source of truth, and the caller is
        told it succeeded); the index answers for these ids from the collection until a
        reconcile rewrote them, which every check runs while any are lagging."""
        first = not self._index.lagging
        self._index.lagging.update(ids)
        self._in_step_at = None
        self.in_step_mark = None
        if first:  # once per spell, not per write
            log.warning(
                "stored in the collection, but the keyword index lags until it has room: %s",
                error if isinstance(error, StoreError) else index_failure(self._index.path, error),
            )

    def rebuilding_on_damage(self, work: Callable[[], object]) -> None:
        """Index work whose result a rebuild from the collection gives too (a sync, or an
        index write after the collection took the write): on damage, the rebuild stands
        in for it."""
        try:
            work()
        except sqlite3.DatabaseError as exc:
            self.recover(exc)


class _Counted:
    """Pages of the collection's records, counted as they are read: :attr:`whole` when
    they came in one page that was not full (one read saw them all, at one moment)."""

    def __init__(self, pages: Iterator[list[IndexRow]], *, ids: bool = False) -> None:
        self._pages = pages
        self.read = 0
        self.last = 0
        self._keep_ids = ids
        self.ids: set[str] = set()  # of every record read, when ``ids``

    def __iter__(self) -> Iterator[list[IndexRow]]:
        return self

    def __next__(self) -> list[IndexRow]:
        page = next(self._pages)
        self.read += 1
        self.last = len(page)
        if self._keep_ids:
            self.ids.update(row.id for row in page)
        return page

    @property
    def whole(self) -> bool:
        return self.read <= 1 and self.last < PAGE


def _copy_all(
    index: KeywordIndex, pages: Iterator[list[IndexRow]], *, changed_only: bool = False
) -> int:
    """Copy the collection's records into the index a page at a time, each page read
    inside the index's write transaction (:meth:`KeywordIndex.copy_in`): how many.
    ``changed_only``: only those whose ``updated_at`` differs from the index's (or that
    it lacks)."""
    copied = 0
    read = lambda: next(pages, None)  # noqa: E731
    while (page_copied := index.copy_in(read, changed_only=changed_only)) is not None:
        copied += page_copied
    return copied


def _log_failure(future: Future[None]) -> None:
    """A background reconcile that failed (the server unreachable, say): the periodic
    check tries again; nothing to raise to."""
    if not future.cancelled() and future.exception() is not None:
        log.debug("background reconcile failed: %s", future.exception())
