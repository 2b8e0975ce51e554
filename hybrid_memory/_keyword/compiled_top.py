"""The keyword leg's ranking through the compiled loops
(:mod:`~hybrid_memory._keyword._scoring_loops`, when :mod:`~hybrid_memory._keyword.scoring_kernel`
loaded them): the same rows and floats as the numpy path of
:class:`~hybrid_memory._keyword.postings.Postings`, in one pass over the postings instead
of ~12.

Each part of a term's postings (mapped from a file, added since) goes to the loops as a
list of its own, with the term's factors: a row is in one part only, so every row's
total adds its terms' scores in the query's order, as the numpy path does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from types import ModuleType

import numpy as np
import numpy.typing as npt

from hybrid_memory._keyword import postings_file
from hybrid_memory._keyword.bm25_scores import (
    FloatArray,
    IntArray,
    best_first,
    bm25_factors,
    bm25_idf,
)
from hybrid_memory._keyword.postings_file import TermLists
from hybrid_memory._keyword.ranked_postings import RankedPostings

# The compiled top totals a query's rows this many at a time (64 KB of totals, which
# stay in the processor's cache).
_BLOCK = 8_192


def _address(values: np.ndarray) -> int:
    """Where ``values``' data starts in memory (for the compiled loops)."""
    address: int = values.__array_interface__["data"][0]
    return address


def _scored(
    postings: RankedPostings, loops: ModuleType, terms: Sequence[str]
) -> Iterator[tuple[TermLists, tuple[float, float, float]]]:
    """Each part of the postings of each of ``terms`` (in order, repeats kept) that some
    live row holds, with its term's BM25 factors
    (:func:`~hybrid_memory._keyword.bm25_scores.bm25_factors`)."""
    avgdl = postings.avgdl()
    live, only_live = postings.live, bool(postings.dead)
    for term in terms:
        parts = postings.parts(term)
        matching = sum(
            int(loops.count_live(p.rows, live)) if only_live else len(p.rows) for p in parts
        )
        if matching:
            factors = bm25_factors(avgdl, bm25_idf(matching, len(postings)))
            for part in parts:
                yield part, factors


def top(
    postings: RankedPostings,
    loops: ModuleType,
    terms: Sequence[str],
    limit: int,
    within: IntArray | None,
) -> tuple[IntArray, FloatArray]:
    """:meth:`Postings.top`: a block of rows at a time, or, ``within`` given, those rows'
    totals read off the kept array of totals (which :func:`scores` uses too)."""
    empty = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    if within is None:
        return _best_rows(postings, loops, terms, limit)
    lists = _totals(postings, loops, terms) if limit > 0 else []
    if not lists:
        return empty
    totals = postings.scratch.totals
    candidates = np.unique(np.asarray(within, dtype=np.int64))
    candidates = candidates[(candidates >= 0) & (candidates < len(totals))]
    scores = totals[candidates]
    keep = scores > 0.0
    _clear(postings, loops, lists)
    return best_first(candidates[keep], scores[keep], limit)


def scores(
    postings: RankedPostings, loops: ModuleType, terms: Sequence[str]
) -> tuple[IntArray, FloatArray]:
    """:meth:`Postings.scores`."""
    lists = _totals(postings, loops, terms)
    if not lists:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    totals = postings.scratch.totals
    matched_rows = np.flatnonzero(totals[: postings.high + 1])
    found = totals[matched_rows]
    _clear(postings, loops, lists)
    return matched_rows, found


def _best_rows(
    postings: RankedPostings, loops: ModuleType, terms: Sequence[str], limit: int
) -> tuple[IntArray, FloatArray]:
    """:meth:`Postings.top` without ``within``
    (:func:`~hybrid_memory._keyword._scoring_loops.best_rows`): the same rows and floats,
    without a store-long array of totals."""
    empty = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    if not len(postings) or not terms or limit <= 0:
        return empty
    scored = list(_scored(postings, loops, terms))
    if not scored:
        return empty
    sizes = np.array([len(part.rows) for part, _ in scored], dtype=np.int64)
    out_rows = np.empty(min(limit, int(sizes.sum())), dtype=np.int64)
    out_scores = np.empty(len(out_rows), dtype=np.float64)
    scratch = postings.scratch
    if len(scratch.block) != _BLOCK:
        scratch.block = np.zeros(_BLOCK, dtype=np.float64)
    per_length, constant, _ = scored[0][1]  # the same for every term (avgdl)
    # The loops read the postings where they are (``scored`` keeps them alive, and the
    # index's lock unchanged, until they return).
    size = loops.best_rows(
        np.array([_address(part.rows) for part, _ in scored], dtype=np.int64),
        np.array([_address(part.tfs) for part, _ in scored], dtype=np.int64),
        np.array([_address(part.lengths) for part, _ in scored], dtype=np.int64),
        postings_file.LENGTH_CAP,
        sizes,
        np.array([weight for _, (_, _, weight) in scored]),
        postings.length,
        postings.live,
        bool(postings.dead),
        per_length,
        constant,
        scratch.block,
        out_rows,
        out_scores,
    )
    rows_found, scores_found = out_rows[:size], out_scores[:size]
    order = np.lexsort((rows_found, -scores_found))
    return rows_found[order], scores_found[order]


def _totals(
    postings: RankedPostings, loops: ModuleType, terms: Sequence[str]
) -> list[npt.NDArray[np.int32]]:
    """Score the live postings of ``terms`` into the kept totals, in the numpy path's
    order (term by term, each term's rows ascending); returns the lists scored (row ids,
    removed ones included), which the caller clears again."""
    if not len(postings) or not terms:
        return []
    scratch = postings.scratch
    if len(scratch.totals) <= postings.high:
        scratch.totals = np.zeros(len(postings.live), dtype=np.float64)
    elif scratch.dirty:  # a search was interrupted between scoring and clearing
        scratch.totals.fill(0.0)
    live, only_live = postings.live, bool(postings.dead)
    lists: list[npt.NDArray[np.int32]] = []
    scratch.dirty = True
    for part, (per_length, constant, weight) in _scored(postings, loops, terms):
        loops.add_term_scores(
            scratch.totals,
            part.rows,
            part.tfs,
            postings.length,
            live,
            only_live,
            per_length,
            constant,
            weight,
        )
        lists.append(part.rows)
    if not lists:
        scratch.dirty = False
    return lists


def _clear(postings: RankedPostings, loops: ModuleType, lists: list[npt.NDArray[np.int32]]) -> None:
    for rows in lists:
        loops.clear(postings.scratch.totals, rows)
    postings.scratch.dirty = False
