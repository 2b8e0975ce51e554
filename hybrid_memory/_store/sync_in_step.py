"""Whether the keyword index is known to hold exactly what the collection holds, told
three ways, each cheap to read again: the embedded path's write marker, the path owner's
count of the writes that can touch the collection, and the collection's log position
(:mod:`hybrid_memory._store.chroma_log`, stored in the index file for the next open). Kept
through this process's own writes, which go to both; a part of
:class:`~hybrid_memory._store.sync.IndexSync`."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from hybrid_memory._model.times import now_timestamp
from hybrid_memory._store.sync_state import SyncState

log = logging.getLogger("hybrid_memory")

# The index file's state key of the collection's log position at which the index was
# last known to hold exactly what the collection holds (hybrid_memory._store.chroma_log).
_POSITION_KEY = "in_step_at_position"


class InStepTracking(SyncState):
    """What :class:`~hybrid_memory._store.sync.IndexSync` knows of being in step."""

    # Steps of IndexSync (sync.py and its other parts), used here.

    if TYPE_CHECKING:  # steps of IndexSync defined elsewhere

        def sync(self, *, full: bool = False, reconcile: bool = False) -> None: ...
        def _settle(self, read_started: float, *, persist: bool = False) -> None: ...
        def _reconcile(self, in_collection: set[str] | None = None) -> bool: ...
        def rebuilding_on_damage(self, work: Callable[[], object]) -> None: ...
        def wait_warm(self) -> None: ...

    def _resume_at_position(self) -> bool:
        """Take the index as in step, reading nothing of the collection, when the
        collection's log position (:func:`~hybrid_memory._store.chroma_log.log_position`)
        is the one the index stored when it was last known in step: nobody wrote to the
        collection since. Under the write lock."""
        stored = self._index.get_state(_POSITION_KEY)
        if stored is None or self._index.lagging:
            return False
        marker = self._collection.writes.file_version()
        mark = self._collection.writes.begun_on_share()
        position = self._position()
        if position is None or stored != f"{position}|{self._index.rows_mark()}":
            self._restored = _went_back(stored, position)
            return False
        if self._collection.writes.file_version() == marker:
            self._in_step_marker = marker
        if self._collection.writes.begun_on_share() == mark:
            self.in_step_write_count = mark
        self._in_step_position = position
        self.last_check = time.monotonic()
        self._settle(now_timestamp())
        return True

    def _position(self) -> str | None:
        """The collection's log position, when its store is an embedded path."""
        return None if self._log is None else self._log.read()

    def _keep_position(self, position: str | None) -> None:
        """The index holds what the collection held at ``position`` (read before the reads
        that found it so): stored for the next open. Under the write lock."""
        self._in_step_position = position
        if position is None:
            return
        proof = f"{position}|{self._index.rows_mark()}"
        if self._index.get_state(_POSITION_KEY) != proof:
            self._index.set_state(_POSITION_KEY, proof)

    def _keep_position_if_unchanged(self) -> None:
        """Store the log position read now when it is the one at which the index was
        last known in step (nobody wrote since, or only this process, whose writes went
        to both)."""
        with self._lock:
            position = self._position()
            in_step = position is not None and position == self._in_step_position
            if in_step and not self._index.lagging:
                self._keep_position(position)
            if self._log is not None:
                self._log.close()

    def _nothing_written(self) -> bool:
        """Whether nobody (this process included) wrote to the collection since a check
        last found the index in step with it, as the path owner's count of writes or the
        write marker tells (which only an embedded store has)."""
        mark = self.in_step_write_count
        if mark is not None and self._collection.writes.begun_on_share() == mark:
            return True
        marker = self._in_step_marker
        return marker is not None and self._collection.writes.file_version() == marker

    def resume(self, mark: int) -> bool:
        """Take the index as in step, without reading the collection, if it was at
        ``mark`` (:attr:`in_step_write_count`, when the namespace closed) and no write that can
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
            self.in_step_write_count = mark
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
        in_step, position = self._in_step_marker, self._in_step_position
        known = in_step is not None or position is not None
        others = self._collection.writes.begun_by_others() if known else None
        unchanged = (
            others is not None
            and in_step is not None
            and self._collection.writes.file_version() == in_step
        )
        mark = self.in_step_write_count
        counted = mark is not None and self._collection.writes.begun_on_share() == mark
        own = self._collection.writes.own_record_writes
        if others is None:
            position = None
        carried = position is not None and self._position() == position
        began = now_timestamp()
        self._writes += 1
        try:
            yield
            # In step after it too if every write begun meanwhile that can touch the
            # collection was this one's (a namespace's: on its share).
            after = self._collection.writes.begun_on_share() if counted else None
            if mark is not None and self.in_step_write_count == mark:
                if (
                    after is not None
                    and after - mark == self._collection.writes.own_record_writes - own
                ):
                    self.in_step_write_count = after
                else:
                    self.in_step_write_count = None
            if unchanged:
                marker = self._collection.writes.file_version()
                # Counted after the marker is read: another's write counted later than
                # this commits later too, and moves the marker again.
                if (
                    self._collection.writes.begun_by_others() == others
                    and self._in_step_marker == in_step
                ):
                    self._in_step_marker = marker
                    self._settle(began)
            if carried:
                after_position = self._position()
                if (
                    self._collection.writes.begun_by_others() == others
                    and self._in_step_position == position
                ):
                    self._in_step_position = after_position
                else:
                    self._in_step_position = None
            elif position is not None or self._in_step_position is not None:
                self._in_step_position = None
        finally:
            self._writes += 1


def _went_back(stored: str, position: str | None) -> bool:
    """Whether the collection's log ``position`` is behind the one ``stored`` with the
    index (same collection, a lower sequence number): a backup of the collection was put
    back, and memories may hold older versions than the index's, at older stamps that a
    catch-up does not read."""
    if position is None:
        return False
    before, now = stored.split("|")[0].split(":"), position.split(":")
    try:
        return before[0] == now[0] and int(now[1]) < int(before[1])
    except (IndexError, ValueError):  # a damaged proof: compared as any other
        return False
