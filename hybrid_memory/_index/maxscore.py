"""MaxScore for the keyword leg: the top k of BM25 without scoring every posting.

Turtle & Flood, "Query evaluation: strategies and optimizations", Information Processing
& Management 31(6), 1995 (MaxScore); the per-term bounds as in Ding & Suel, "Faster
top-k document retrieval using block-max indexes", SIGIR 2011, one block per term.

A row's BM25 total is the sum of its terms' contributions, and each term's contribution
is at most that term's bound (its best posting's score). Given a ``floor`` that the
``k``-th best total is known to reach, the terms whose bounds, smallest first, add up
to less than the floor are *non-essential*: a row holding none but them totals less
than the floor and cannot be among the best ``k``, even in a tie. The candidates are
then the rows of the other (*essential*) terms only; the common words of a question,
whose lists are the longest and whose idf is the lowest, are mostly non-essential.

Nothing here does I/O or keeps state: the postings give the lists, their bounds and
the floor (:meth:`~hybrid_memory._index.postings.Postings.top`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from hybrid_memory._index.scoring import bm25_term_scores

# A bound and a sum of bounds are rounded as the scores themselves are, in other orders:
# a margin far above those few ulps keeps every comparison on the safe side.
SLACK = 1e-9


class TermList(NamedTuple):
    """One query term's live postings: row ids ascending, term frequencies, its idf and
    the bound on its contribution to any row's total. A query word said twice is two
    lists, as it counts twice in the totals."""

    rows: npt.NDArray[np.int32]
    tfs: npt.NDArray[np.float32]
    idf: float
    bound: float


def essential(lists: Sequence[TermList], floor: float) -> list[int]:
    """Indexes of the ``lists`` a row must hold to total ``floor`` or more: all but the
    longest run of smallest bounds whose sum (with :data:`SLACK`) stays below it."""
    order = sorted(range(len(lists)), key=lambda i: (lists[i].bound, -len(lists[i].rows)))
    spent = 0.0
    for position, i in enumerate(order):
        spent += lists[i].bound
        if spent * (1.0 + SLACK) >= floor:
            return sorted(order[position:])
    return []


def held(rows: npt.NDArray[np.int64], having: npt.NDArray[np.int32]) -> npt.NDArray[np.int64]:
    """For each of ``rows``, its position in the ascending ``having``, or -1 if absent."""
    if not len(having):
        return np.full(len(rows), -1, dtype=np.int64)
    at = np.minimum(np.searchsorted(having, rows.astype(having.dtype)), len(having) - 1)
    return np.where(having[at] == rows, at, -1).astype(np.int64)


def best_factor(
    tfs: npt.NDArray[np.float32], lengths: npt.NDArray[np.floating], avgdl: float
) -> float:
    """The largest BM25 contribution of these postings per unit of idf (0.0 for none):
    a term's bound is its idf times this."""
    if not len(tfs):
        return 0.0
    return float(bm25_term_scores(tfs, lengths, avgdl, 1.0).max())


def widened(factor: float, at_avgdl: float, avgdl: float) -> float:
    """A ``factor`` that :func:`best_factor` gave at the mean length ``at_avgdl``, made a
    bound at ``avgdl``: a longer mean shrinks every length's part of the denominator
    ``tf + k1·(1 − b) + k1·b·|d| / avgdl`` by at most ``at_avgdl / avgdl``, so no
    contribution grows by more than its inverse; a shorter one only lowers them."""
    return factor * max(1.0, avgdl / at_avgdl)


def contributions(
    rows: npt.NDArray[np.int64],
    term: TermList,
    length: npt.NDArray[np.float32],
    avgdl: float,
) -> npt.NDArray[np.float64]:
    """``term``'s contribution to each of ``rows`` (0.0 where a row lacks it)."""
    out = np.zeros(len(rows), dtype=np.float64)
    at = held(rows, term.rows)
    hit = at >= 0
    if hit.any():
        out[hit] = bm25_term_scores(term.tfs[at[hit]], length[rows[hit]], avgdl, term.idf)
    return out


def totals(
    rows: npt.NDArray[np.int64],
    lists: Sequence[TermList],
    length: npt.NDArray[np.float32],
    avgdl: float,
    known: dict[int, npt.NDArray[np.float64]] | None = None,
) -> npt.NDArray[np.float64]:
    """The BM25 total of each of ``rows``, added up term by term in the ``lists``'
    order, as a ``bincount`` over their concatenated postings adds them: the same
    floats to the bit (adding 0.0 for a term a row lacks changes nothing).
    ``known``: contributions already computed, by the list's index."""
    out = np.zeros(len(rows), dtype=np.float64)
    for i, term in enumerate(lists):
        found = known.get(i) if known is not None else None
        out += contributions(rows, term, length, avgdl) if found is None else found
    return out


def best_rows(
    lists: Sequence[TermList],
    limit: int,
    length: npt.NDArray[np.float32],
    avgdl: float,
    share: float,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]] | None:
    """The rows that may be among the ``limit`` best of ``lists``' totals, with their
    exact totals: every row of the best ``limit`` and all their ties are among them.
    None when this would look at more than ``share`` of the postings, or no list has
    ``limit`` rows to set a floor with: every posting is then better scored at once.

    The floor: one term's rows are distinct, so the ``limit``-th best total among
    the rows of a term matching at least ``limit`` is at most the ``limit``-th best of
    all (the shortest such list gives it cheapest). The candidates are the rows of
    the :func:`essential` lists; of those, the ones whose essential contributions and
    the other lists' bounds cannot reach the floor are dropped before the other
    lists are looked up."""
    sizes = [len(t.rows) for t in lists]
    reaching = [i for i, size in enumerate(sizes) if size >= limit]
    if not reaching:
        return None
    first = min(reaching, key=lambda i: sizes[i])
    rows = lists[first].rows.astype(np.int64)
    found = totals(rows, lists, length, avgdl)
    floor = float(np.partition(found, len(found) - limit)[len(found) - limit])
    needed = essential(lists, floor)
    if not needed or sum(sizes[i] for i in needed) > share * sum(sizes):
        return None
    if all(lists[i].rows is lists[first].rows for i in needed):
        keep = found >= floor  # every row the floor's list lacks totals less
        return rows[keep], found[keep]
    rows = np.unique(np.concatenate([lists[i].rows for i in needed])).astype(np.int64)
    known = {i: contributions(rows, lists[i], length, avgdl) for i in needed}
    rest = sum(t.bound for i, t in enumerate(lists) if i not in known)
    reach = np.sum(list(known.values()), axis=0) + rest
    keep = np.asarray(reach * (1.0 + SLACK) >= floor)
    rows = rows[keep]
    found = totals(rows, lists, length, avgdl, {i: c[keep] for i, c in known.items()})
    keep = found >= floor
    return rows[keep], found[keep]
