"""The one decision on an error of the keyword index: damage is repaired by a rebuild from
the collection (it is derived state), a write that found no room leaves the index lagging
on those ids until a reconcile, anything else is raised. A part of
:class:`~hybrid_memory._store.sync.IndexSync`."""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from hybrid_memory._keyword.damage import index_failure, is_damage, is_full
from hybrid_memory._model.errors import StoreError
from hybrid_memory._store.sync_state import SyncState

log = logging.getLogger("hybrid_memory")


class Repair(SyncState):
    """The error handling of :class:`~hybrid_memory._store.sync.IndexSync`."""

    # Steps of IndexSync (sync.py and its other parts), used here.

    if TYPE_CHECKING:  # steps of IndexSync defined elsewhere

        def sync(self, *, full: bool = False, reconcile: bool = False) -> None: ...
        def _settle(self, read_started: float, *, persist: bool = False) -> None: ...
        def _reconcile(self, in_collection: set[str] | None = None) -> bool: ...
        def wait_warm(self) -> None: ...
        def _position(self) -> str | None: ...

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
        self._in_step_marker = None
        self.in_step_write_count = None
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
