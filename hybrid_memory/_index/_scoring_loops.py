"""The keyword leg's per-posting loops, compiled by numba (imported only through
:mod:`~hybrid_memory._index.scoring_kernel`, which loads this module when a store is
large enough to need it, and falls back to numpy when numba cannot be imported).

Each loop does in one pass over a term's postings what the numpy path does in several
(live filter, length gather, BM25, scatter-add): a posting is then touched once instead
of ~12 times. The floating-point operations are the numpy path's, in its order and
dtypes (:func:`~hybrid_memory._index.postings.bm25_term_scores`, then ``np.bincount``
adding each row's scores in the order of the query's terms), so the totals are the same
to the bit: numba does not reassociate or fuse (no ``fastmath``; LLVM contracts a
multiply and an add into an FMA only when asked to).

The signatures are explicit, so everything compiles (or loads from numba's on-disk cache)
when this module is imported, in :mod:`~hybrid_memory._index.scoring_kernel`'s
background thread, never on a search.
"""

from __future__ import annotations

import numpy as np
from numba import boolean, float32, float64, int32, int64, njit, void

from hybrid_memory._index.scoring_kernel import caching

_CACHE = caching()
_ROWS = int32[::1]
_TOTALS = float64[::1]


@njit(int64(_ROWS, boolean[::1]), cache=_CACHE, nogil=True)
def count_live(rows, live):
    """How many of ``rows`` are live (a term's document frequency, for its idf)."""
    count = 0
    for i in range(rows.shape[0]):
        if live[rows[i]]:
            count += 1
    return count


@njit(
    void(
        _TOTALS, _ROWS, float32[::1], float32[::1], boolean[::1], boolean, float64, float64, float64
    ),
    cache=_CACHE,
    nogil=True,
)
def add_term_scores(totals, rows, tfs, length, live, only_live, per_length, constant, weight):
    """``totals[row] += weight · tf / (|d| · per_length + constant + tf)`` for each of a
    term's postings (live ones only when ``only_live``): ``bm25_term_scores`` and the
    ``bincount`` of the numpy path, operation for operation."""
    for i in range(rows.shape[0]):
        row = rows[i]
        if only_live and not live[row]:
            continue
        tf = np.float64(tfs[i])
        denominator = np.float64(length[row]) * per_length
        denominator += constant
        denominator += tf
        totals[row] += tf / denominator * weight


@njit(
    int64(_TOTALS, _ROWS, float64, int64[::1], float64[::1], int64),
    cache=_CACHE,
    nogil=True,
)
def take_at_least(totals, rows, floor, out_rows, out_scores, taken):
    """Move the rows of a term's postings whose total is at least ``floor`` (and above
    0) into ``out_rows``/``out_scores`` from position ``taken`` on, and clear the total
    of every row the postings name, so that each row is taken once and ``totals`` is all
    zeros again once every term of the query went through. Returns the new ``taken``."""
    for i in range(rows.shape[0]):
        row = rows[i]
        total = totals[row]
        if total > 0.0 and total >= floor:
            out_rows[taken] = row
            out_scores[taken] = total
            taken += 1
        totals[row] = 0.0
    return taken


@njit(void(_TOTALS, _ROWS), cache=_CACHE, nogil=True)
def clear(totals, rows):
    """Zero the totals of ``rows`` (what the scoring loop touched)."""
    for i in range(rows.shape[0]):
        totals[rows[i]] = 0.0


@njit(int64(_TOTALS, int64, int64, float64, int64[::1], float64[::1]), cache=_CACHE, nogil=True)
def take_at_least_in(totals, first, end, floor, out_rows, out_scores):
    """:func:`take_at_least` by a pass over the totals of rows ``first`` to ``end``
    (exclusive) instead of over the postings: cheaper when the postings name a large
    share of those rows (a sequential read against one access per posting). The rows
    come out ascending. Returns how many were taken.

    Every total is cleared, zero or not: a branch on "was this row matched" goes either
    way about as often as not over a large share of the rows, and its mispredictions cost
    5x the stores (10 questions of 590,000-810,000 postings at 1,000,000: 7.8-8.7 ms with
    the branch, 1.4-1.9 without)."""
    taken = 0
    for row in range(first, end):
        total = totals[row]
        if total >= floor and total > 0.0:
            out_rows[taken] = row
            out_scores[taken] = total
            taken += 1
        totals[row] = 0.0
    return taken
