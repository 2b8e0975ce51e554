"""Clean exits: the stores a process left open, and the background threads they run, are
closed and joined when the interpreter exits, before it finalizes.

Why: CPython (3.13 and older) ends a daemon thread still running at finalization by
calling ``pthread_exit`` in it the moment it asks for the GIL back. When that thread is
inside C++ code at that moment (numpy's ``np.unique``, which the keyword index's postings
build runs on a daemon thread; Chroma's bindings), the forced unwinding meets a frame that
cannot be unwound and the C++ runtime calls ``std::terminate``: "terminate called without
an active exception", SIGABRT, after the process had done its work. Short processes that
exit while a store still builds or serves in the background meet it
(``benchmarks/clean_exits.py`` counts them).

How: a store registers its parts here (:func:`close_at_exit`), a background thread
registers itself (:func:`join_at_exit`). An :mod:`atexit` handler, which runs before the
interpreter finalizes (while daemon threads still run normally), closes the parts still
open (their own threads stop: the warming fill, the owner's listener and its peers, the
worker pools) and then joins the registered threads, each within :data:`JOIN_PATIENCE`.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import threading
import time
import weakref
from typing import Protocol

log = logging.getLogger("hybrid_memory")

# Seconds the exit waits, in all, for the registered threads to finish (a postings build
# of a very large store takes a few seconds); one still running after it is left to the
# interpreter.
JOIN_PATIENCE = 60.0


class _Closable(Protocol):
    def close(self) -> None: ...


_to_close: weakref.WeakSet[_Closable] = weakref.WeakSet()
_to_join: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
_lock = threading.Lock()


def close_at_exit(parts: _Closable) -> None:
    """Close ``parts`` at interpreter exit unless it was closed (or collected) before."""
    with _lock:
        _to_close.add(parts)


def closed(parts: _Closable) -> None:
    """``parts`` was closed: nothing to do for it at exit."""
    with _lock:
        _to_close.discard(parts)


def join_at_exit(thread: threading.Thread) -> None:
    """Join ``thread`` (a daemon thread of the library) at interpreter exit."""
    with _lock:
        _to_join.add(thread)


def _at_exit() -> None:
    with _lock:
        parts, threads = list(_to_close), list(_to_join)
    for part in parts:
        try:
            part.close()
        except Exception as exc:  # the process is ending: say so, never raise
            log.debug("closing a store at exit failed: %s", exc)
    deadline = time.monotonic() + JOIN_PATIENCE
    for thread in threads:
        if thread is threading.current_thread():
            continue
        with contextlib.suppress(RuntimeError):  # never started
            thread.join(max(0.0, deadline - time.monotonic()))


atexit.register(_at_exit)
