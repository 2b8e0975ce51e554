"""The keyword leg's ranking over :class:`~hybrid_memory._keyword.postings.Postings` with
numpy: every matched row's BM25 total in a handful of numpy calls, the best rows without
sorting every match, and which rows hold which terms (a binary search per term). The compiled loops
(:mod:`~hybrid_memory._keyword.compiled_top`) give the same rows and floats.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from hybrid_memory._keyword.bm25_scores import (
    FloatArray,
    IntArray,
    best_first,
    bm25_idf,
    bm25_term_scores,
)
from hybrid_memory._keyword.ranked_postings import RankedPostings


def scores(postings: RankedPostings, terms: Sequence[str]) -> tuple[IntArray, FloatArray]:
    """:meth:`Postings.scores`."""
    matched = _matched(postings, terms)
    if matched is None:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    rows, totals = matched
    # The matched rows, found through a boolean mask: scanning it is faster than
    # scanning the float totals for non-zeros (every score is positive anyway).
    mask = np.zeros(len(totals), dtype=bool)
    mask[rows] = True
    matched_rows = np.flatnonzero(mask)
    return matched_rows, totals[matched_rows]


def top(
    postings: RankedPostings, terms: Sequence[str], limit: int, within: IntArray | None
) -> tuple[IntArray, FloatArray]:
    """:meth:`Postings.top`: only candidates are ranked.

    The cut: one term's rows are distinct, so when a term matches at least ``limit``
    rows, the ``limit``-th best total among them is at most the ``limit``-th best of
    all; every row totalling at least that is a candidate (the best rows and their ties
    among them). The shortest such list gives it cheapest, and the rarest term's rows
    mostly total the most. The candidates are read off the totals in one pass."""
    matched = _matched(postings, terms)
    if matched is None or limit <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    rows, totals = matched
    if within is not None:
        candidates = np.unique(np.asarray(within, dtype=np.int64))
        candidates = candidates[(candidates >= 0) & (candidates < len(totals))]
        candidates = candidates[totals[candidates] > 0.0]
    else:
        shortest = _shortest_list(postings, terms, limit)
        if shortest is None:  # every term matches fewer rows: few candidates
            candidates = np.unique(rows).astype(np.int64)
        else:
            among = totals[shortest]
            floor = np.partition(among, len(among) - limit)[len(among) - limit]
            candidates = np.flatnonzero(totals >= floor)  # floor > 0: matched rows
    return best_first(candidates, totals[candidates], limit)


def _shortest_list(
    postings: RankedPostings, terms: Sequence[str], at_least: int
) -> npt.NDArray[np.int32] | None:
    """The live row ids of the term of ``terms`` matching the fewest rows, of those
    matching at least ``at_least`` (None when no term does)."""
    best: str | None = None
    best_size = 0
    for term in terms:
        size = sum(len(p.rows) for p in postings.parts(term))
        if size >= at_least and (best is None or size < best_size):
            best, best_size = term, size
    if best is None:
        return None
    shortest = postings.live_rows(best)
    return None if len(shortest) < at_least else shortest


def _matched(
    postings: RankedPostings, terms: Sequence[str]
) -> tuple[npt.NDArray[np.int32], FloatArray] | None:
    """The live postings of ``terms``: their row ids (one per posting) and the BM25
    total of every row id up to the highest matched (0.0 where none matched); None
    when nothing matches. Every term's postings are scored in one pass, each with its
    term's idf: the floats of scoring them term by term, in a handful of numpy calls."""
    if not len(postings) or not terms:
        return None
    live, dead = postings.live, postings.dead
    parts_rows: list[npt.NDArray[np.int32]] = []
    parts_tfs: list[npt.NDArray[np.float32]] = []
    idfs: list[float] = []
    for term in terms:
        matching = 0
        for part in postings.parts(term):
            rows, tfs = part.rows, part.tfs
            if dead:
                keep = live[rows]
                rows, tfs = rows[keep], tfs[keep]
            if len(rows):
                parts_rows.append(rows)
                parts_tfs.append(tfs)
                matching += len(rows)
        if matching:
            term_idf = bm25_idf(matching, len(postings))
            idfs.extend([term_idf] * (len(parts_rows) - len(idfs)))
    if not parts_rows:
        return None
    rows = np.concatenate(parts_rows)
    idf = np.repeat(np.array(idfs), [len(part) for part in parts_rows])
    found = bm25_term_scores(
        np.concatenate(parts_tfs), postings.length[rows], postings.avgdl(), idf
    )
    totals = np.bincount(rows, weights=found).astype(np.float64, copy=False)
    return rows, totals


def holding_each(
    postings: RankedPostings, terms: Sequence[str], rows: IntArray
) -> npt.NDArray[np.bool_]:
    """Whether each of ``rows`` (live) holds each of ``terms``: a boolean array of
    ``len(terms)`` by ``len(rows)`` (a row not live holds none)."""
    rows = np.asarray(rows, dtype=np.int64)
    held = np.zeros((len(terms), len(rows)), dtype=bool)
    live = _live_among(postings, rows)
    asked = rows[live]
    if len(asked):
        for position, term in enumerate(terms):
            held[position, live] = _holds(postings, term, asked)
    return held


def holding_all(postings: RankedPostings, terms: Sequence[str], rows: IntArray) -> IntArray:
    """Those of ``rows`` (live) that hold every one of ``terms``: a binary search per
    term (each term's rows are ascending), whatever the size of the store."""
    rows = np.asarray(rows, dtype=np.int64)
    rows = rows[_live_among(postings, rows)]
    for term in terms:
        if not len(rows):
            break
        rows = rows[_holds(postings, term, rows)]
    return rows


def _live_among(postings: RankedPostings, rows: IntArray) -> npt.NDArray[np.bool_]:
    """Whether each of ``rows`` is a live row (one out of range is not)."""
    live = (rows >= 0) & (rows < len(postings.live))
    live[live] = postings.live[rows[live]]
    return live


def _holds(postings: RankedPostings, term: str, rows: IntArray) -> npt.NDArray[np.bool_]:
    """Whether each of ``rows`` (in range) is among ``term``'s row ids. Searched at
    the postings' width (given wider rows, searchsorted copies the list first)."""
    held = np.zeros(len(rows), dtype=bool)
    asked = rows.astype(np.int32)
    for part in postings.parts(term):
        having = part.rows
        at = np.minimum(np.searchsorted(having, asked), len(having) - 1)
        held |= having[at] == asked
    return held
