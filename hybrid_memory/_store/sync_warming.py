"""Filling a keyword index from scratch in the background ("warming"), so that a store
opens at once: until it is warm, searches answer from the vector leg and the calls that
read the index wait for it. A part of :class:`~hybrid_memory._store.sync.IndexSync`."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from hybrid_memory._model.records import UPDATED_KEY
from hybrid_memory._model.times import now_timestamp
from hybrid_memory._store.sync_copy import copy_all
from hybrid_memory._store.sync_state import SyncState

log = logging.getLogger("hybrid_memory")

# Writes of other processes while a fill reads the collection are caught up from the
# fill's start on this process's clock, less this margin for clocks that disagree.
_CLOCK_SLACK = 300.0


class Warming(SyncState):
    """The background fill of :class:`~hybrid_memory._store.sync.IndexSync`."""

    # Steps of IndexSync (sync.py and its other parts), used here.

    if TYPE_CHECKING:  # steps of IndexSync defined elsewhere

        def sync(self, *, full: bool = False, reconcile: bool = False) -> None: ...
        def _settle(self, read_started: float, *, persist: bool = False) -> None: ...
        def _reconcile(self, in_collection: set[str] | None = None) -> bool: ...
        def rebuilding_on_damage(self, work: Callable[[], object]) -> None: ...
        def _position(self) -> str | None: ...

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
            self.in_step_write_count = None
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
            copy_all(index, collection.rows({UPDATED_KEY: {"$gt": started}}))
            self._reconcile()
            index.set_state("collection_id", collection.id)
            self._settle(read_started, persist=True)
            self.last_check = time.monotonic()
            self._tags.invalidate()
