"""Handing the C heap's free pages back to the OS after a bulk write.

A bulk add churns through large short-lived allocations in C (Chroma's request and log
records, SQLite's JSON and FTS5 work on the index thread, numpy's per-batch arrays):
glibc keeps what they free inside its heaps (one per thread that allocated), where a
page stays resident until something reuses it, and the free heap grows with the store as
the heaps fragment around the allocations that live on (the measurements:
docs/performance-history.md, "Where the peak came from"). ``malloc_trim(0)`` returns
every whole free page of every heap (madvise); the next batch gets fresh zeroed pages.

Only glibc has ``malloc_trim``: elsewhere (macOS, Windows, musl) this does nothing.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable

# A write of at least this many memories is followed by a trim: what a batch of this size
# frees is megabytes, while a trim walks every heap (tens of ms on a large store), so
# single adds and small batches never pay for one.
TRIM_FROM_MEMORIES = 1_000


def _find_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        # The process's own symbols, libc's among them: no library search at import
        # (ctypes.util.find_library runs ldconfig in a subprocess).
        trim = ctypes.CDLL(None).malloc_trim  # glibc only (AttributeError on musl)
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_trim = _find_trim()


def available() -> bool:
    """Whether this process's C library can hand free heap pages back (glibc)."""
    return _trim is not None


def release_after_write(memories: int) -> bool:
    """After a write of ``memories`` memories: return the heaps' free pages to the OS when
    the write was large enough (:data:`TRIM_FROM_MEMORIES`). True when a trim ran. The
    call releases the GIL (ctypes), so other threads go on meanwhile."""
    if _trim is None or memories < TRIM_FROM_MEMORIES:
        return False
    _trim(0)
    return True
