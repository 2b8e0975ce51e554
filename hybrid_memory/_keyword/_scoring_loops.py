"""The keyword leg's per-posting loops, compiled by numba (imported only through
:mod:`~hybrid_memory._keyword.scoring_kernel`, which loads this module when a store is
large enough to need it, and falls back to numpy when numba cannot be imported).

Each loop does in one pass over a term's postings what the numpy path does in several
(live filter, length gather, BM25, scatter-add): a posting is then touched once instead
of ~12 times. The floating-point operations are the numpy path's, in its order and
dtypes (:func:`~hybrid_memory._keyword.postings.bm25_term_scores`, then ``np.bincount``
adding each row's scores in the order of the query's terms), so the totals are the same
to the bit: numba does not reassociate or fuse (no ``fastmath``; LLVM contracts a
multiply and an add into an FMA only when asked to).

The signatures are explicit, so everything compiles (or loads from numba's on-disk cache)
when this module is imported, in :mod:`~hybrid_memory._keyword.scoring_kernel`'s
background thread, never on a search.
"""

from __future__ import annotations

import numpy as np
from numba import boolean, carray, float32, float64, int32, int64, njit, types, uint16, void
from numba.core import cgutils
from numba.extending import intrinsic

from hybrid_memory._keyword.scoring_kernel import caching

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


@njit(void(_TOTALS, _ROWS), cache=_CACHE, nogil=True)
def clear(totals, rows):
    """Zero the totals of ``rows`` (what the scoring loop touched)."""
    for i in range(rows.shape[0]):
        totals[rows[i]] = 0.0


# --- a query's best rows, a block of rows at a time --------------------------------------
#
# A query's postings reach the loop as their arrays' addresses: numba typed lists of them
# cost 110-160 us to build and hand over for a five-term question (p50; the addresses
# 18-42 us), and a concatenation copies them. The caller keeps the arrays alive and
# unchanged (under the index's lock) while the loop reads them.


@intrinsic
def _address(typingctx, value):
    """The int64 ``value`` as a pointer (LLVM ``inttoptr``)."""

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], cgutils.voidptr_t)

    return types.voidptr(types.int64), codegen


@njit(cache=_CACHE, nogil=True)
def _int32s(address, length):
    """The ``length`` int32 values at ``address``, as an array (no copy)."""
    return carray(_address(address), (length,), np.int32)  # type: ignore[call-arg]


@njit(cache=_CACHE, nogil=True)
def _float32s(address, length):
    """The ``length`` float32 values at ``address``, as an array (no copy)."""
    return carray(_address(address), (length,), np.float32)  # type: ignore[call-arg]


@njit(cache=_CACHE, nogil=True)
def _uint16s(address, length):
    """The ``length`` uint16 values at ``address``, as an array (no copy)."""
    return carray(_address(address), (length,), np.uint16)  # type: ignore[call-arg]


@njit(
    int64(
        _TOTALS,
        int64,
        _ROWS,
        float32[::1],
        uint16[::1],
        int64,
        int64,
        int64,
        float32[::1],
        boolean[::1],
        boolean,
        float64,
        float64,
        float64,
    ),
    cache=_CACHE,
    nogil=True,
)
def _score_block(
    block,
    base,
    rows,
    tfs,
    row_lengths,
    cap,
    at,
    end,
    length,
    live,
    only_live,
    per_length,
    constant,
    weight,
):
    """:func:`add_term_scores` for the postings from ``at`` on whose rows are below
    ``end``, into ``block`` (the totals of rows ``base`` on). Returns where it stopped.
    Each posting's row length is ``row_lengths[at]``, or, where that is ``cap``,
    ``length[row]`` (the same float either way: a count below ``cap`` is exact in both)."""
    stop = rows.shape[0]
    while at < stop:
        row = rows[at]
        if row >= end:
            break
        if not only_live or live[row]:
            tf = np.float64(tfs[at])
            kept = row_lengths[at]
            if kept == cap:
                denominator = np.float64(length[row]) * per_length
            else:
                denominator = np.float64(kept) * per_length
            denominator += constant
            denominator += tf
            block[row - base] += tf / denominator * weight
        at += 1
    return at


@njit(boolean(float64[::1], int64[::1], int64, int64), cache=_CACHE, nogil=True)
def _worse(scores, rows, a, b):
    """Whether heap entry ``a`` ranks after ``b`` (score descending, then row ascending)."""
    return scores[a] < scores[b] or (scores[a] == scores[b] and rows[a] > rows[b])


@njit(void(float64[::1], int64[::1], int64, int64), cache=_CACHE, nogil=True)
def _sift_down(scores, rows, at, size):
    """Restore the heap (its worst entry first) below ``at``."""
    while True:
        child = 2 * at + 1
        if child >= size:
            return
        if child + 1 < size and _worse(scores, rows, child + 1, child):
            child += 1
        if not _worse(scores, rows, child, at):
            return
        scores[at], scores[child] = scores[child], scores[at]
        rows[at], rows[child] = rows[child], rows[at]
        at = child


@njit(void(float64[::1], int64[::1], int64), cache=_CACHE, nogil=True)
def _sift_up(scores, rows, at):
    """Restore the heap (its worst entry first) above ``at``."""
    while at > 0:
        parent = (at - 1) // 2
        if not _worse(scores, rows, at, parent):
            return
        scores[at], scores[parent] = scores[parent], scores[at]
        rows[at], rows[parent] = rows[parent], rows[at]
        at = parent


@njit(
    int64(_TOTALS, int64, _ROWS, int64, int64, int64[::1], float64[::1], int64),
    cache=_CACHE,
    nogil=True,
)
def _take_block(block, base, rows, first, stop, out_rows, out_scores, size):
    """Offer the rows of postings ``first`` to ``stop`` with their totals in ``block`` to
    the heap ``out_rows``/``out_scores`` of ``size`` entries (at most its length), each
    row once: its total is cleared as it is offered. Returns the heap's new size."""
    limit = out_rows.shape[0]
    for at in range(first, stop):
        row = rows[at]
        total = block[row - base]
        # Cleared whatever it holds, and a total of 0 (offered already, or a removed row,
        # not scored) never beats the heap's worst: no branch on "offered already", which
        # goes either way on the rows several terms share and was mispredicted often
        # enough to cost ~0.6 ms of ~1.6 (200 questions at 1,000,000 memories).
        block[row - base] = 0.0
        if size < limit:
            if total > 0.0:
                out_scores[size] = total
                out_rows[size] = row
                _sift_up(out_scores, out_rows, size)
                size += 1
        elif total >= out_scores[0] and (total > out_scores[0] or row < out_rows[0]):
            out_scores[0] = total
            out_rows[0] = row
            _sift_down(out_scores, out_rows, 0, size)
    return size


@njit(
    int64(
        int64[::1],
        int64[::1],
        int64[::1],
        int64,
        int64[::1],
        float64[::1],
        float32[::1],
        boolean[::1],
        boolean,
        float64,
        float64,
        _TOTALS,
        int64[::1],
        float64[::1],
    ),
    cache=_CACHE,
    nogil=True,
)
def best_rows(
    rows_at,
    tfs_at,
    row_lengths_at,
    cap,
    lengths,
    weights,
    length,
    live,
    only_live,
    per_length,
    constant,
    block,
    out_rows,
    out_scores,
):
    """The ``len(out_rows)`` best rows of a query whose terms (in the query's order)
    have ``lengths[t]`` postings, their rows (int32, ascending) at the address
    ``rows_at[t]``, their tfs (float32) at ``tfs_at[t]`` and their rows' lengths (uint16,
    ``cap`` where ``length`` must be read) at ``row_lengths_at[t]``, with their BM25 totals,
    into ``out_rows``/``out_scores`` as a heap (the caller orders them); returns how
    many there are.

    The totals are added up a block of ``len(block)`` rows at a time, every term's
    postings in that block in the query's order, so each total is the full scoring's
    to the bit, in ``block`` (all zeros before and after), which stays in the
    processor's cache. Totalled in one store-long array instead, a question's postings
    read and wrote it all over (8 MB at 1,000,000 memories), and once another search's
    Chroma query had emptied the cache, that was most of the keyword leg's time (200
    benchmark questions at 1,000,000, cache emptied first: p50 ~2.9 -> ~1.65 ms).
    Each block's rows are then offered once to a heap of the best so far, which ranks
    equal totals by row, as :func:`~hybrid_memory._keyword.bm25_scores.best_first` does."""
    terms = lengths.shape[0]
    width = block.shape[0]
    if out_rows.shape[0] == 0:
        return 0
    at = np.zeros(terms, dtype=np.int64)
    began = np.zeros(terms, dtype=np.int64)
    size = 0
    while True:
        lowest = -1
        for t in range(terms):
            rows = _int32s(rows_at[t], lengths[t])
            if at[t] < lengths[t] and (lowest < 0 or rows[at[t]] < lowest):
                lowest = rows[at[t]]
        if lowest < 0:
            return size
        base = lowest - lowest % width
        for t in range(terms):
            began[t] = at[t]
            at[t] = _score_block(
                block,
                base,
                _int32s(rows_at[t], lengths[t]),
                _float32s(tfs_at[t], lengths[t]),
                _uint16s(row_lengths_at[t], lengths[t]),
                cap,
                at[t],
                base + width,
                length,
                live,
                only_live,
                per_length,
                constant,
                weights[t],
            )
        for t in range(terms):
            size = _take_block(
                block,
                base,
                _int32s(rows_at[t], lengths[t]),
                began[t],
                at[t],
                out_rows,
                out_scores,
                size,
            )
