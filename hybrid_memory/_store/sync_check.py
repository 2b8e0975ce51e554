"""The periodic check for other processes' writes to the collection: due every
``sync_interval`` (or 20 times as long as the last check took), run in the background so
that no call waits for it, skipped while nobody wrote. A part of
:class:`~hybrid_memory._store.sync.IndexSync`."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any

from hybrid_memory._model.records import UPDATED_KEY
from hybrid_memory._model.times import now_timestamp
from hybrid_memory._store.sync_state import SyncState

log = logging.getLogger("hybrid_memory")


# The periodic check asks Chroma for a count and a filtered read, which take time in
# proportion to the collection (40 ms at 100,000 memories, ~0.4 s at a million, on this
# project's 2-core machine): it is due no sooner than this many times its own last
# duration, so that it never takes more than 1/20 of the process's time.
_CHECK_SHARE = 20.0


class PeriodicCheck(SyncState):
    """The periodic check of :class:`~hybrid_memory._store.sync.IndexSync`."""

    # Steps of IndexSync (sync.py and its other parts), used here.

    if TYPE_CHECKING:  # steps of IndexSync defined elsewhere

        def sync(self, *, full: bool = False, reconcile: bool = False) -> None: ...
        def _since(self) -> float | None: ...
        def _unseen(self, since: float) -> dict[str, Any] | None: ...
        def warming(self) -> str | None: ...
        def comparing(self) -> bool: ...
        def _nothing_written(self) -> bool: ...
        def _sync_unless_full(self) -> None: ...
        def rebuilding_on_damage(self, work: Callable[[], object]) -> None: ...
        def _settle(self, read_started: float, *, persist: bool = False) -> None: ...
        def _reconcile(self, in_collection: set[str] | None = None) -> bool: ...
        def wait_warm(self) -> None: ...
        def _position(self) -> str | None: ...
        def _keep_position(self, position: str | None) -> None: ...

    _pool: Executor
    _checking: threading.Lock
    check_seconds: float

    def maybe_sync(self, interval: float) -> None:
        """The periodic check: due every ``interval`` seconds (or 20 times as long as the
        last check took, if longer), run in the background unless the index may be far
        behind (no check started for two of those) or the interval is 0."""
        now = time.monotonic()
        since = now - self.last_check
        if interval:
            interval = max(interval, _CHECK_SHARE * self.check_seconds)
        if since < interval or self.warming() or self.comparing():
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
            position = self._position()
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
                self._in_step_marker = marker
                self._settle(read_started)
                self._keep_position(position)
        except Exception:
            # Chroma unreachable, say: the next call starts another check, and once no
            # check succeeded for two intervals, calls check themselves and raise.
            if self.last_check == started:
                self.last_check = previous
        finally:
            self._checking.release()

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
