"""BM25 scores as SQLite FTS5 computes them, over numpy arrays, and the best-first cut.

Scores are Okapi BM25 exactly as FTS5 computes them (``fts5_aux.c``; Robertson &
Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009):

    idf(t)      = ln((N − df(t) + 0.5) / (df(t) + 0.5)),  1e-6 where that is ≤ 0
    score(d, q) = Σ_{t ∈ q} idf(t) · tf · (k1 + 1) / (tf + k1 · (1 − b + b · |d| / avgdl))

with tf = tf(t, d), k1 = 1.2, b = 0.75, N the live memories, |d| a memory's token count and avgdl
the mean over live memories. A term repeated in the query counts once per repeat,
as in FTS5, where each quoted query word is a phrase of its own.

The numpy path of :class:`~hybrid_memory._keyword.postings.Postings` computes them here; its
compiled loops (:mod:`~hybrid_memory._keyword._scoring_loops`) take their scalars from
:func:`bm25_factors` and repeat :func:`bm25_term_scores`' operations in its order.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

K1 = 1.2
B = 0.75
MIN_IDF = 1e-6  # FTS5's floor for terms in half or more of the rows

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def bm25_idf(df: int, n: int) -> float:
    """FTS5's idf: ``ln((n − df + 0.5) / (df + 0.5))``, floored at 1e-6."""
    idf = float(np.log((n - df + 0.5) / (df + 0.5)))
    return idf if idf > 0.0 else MIN_IDF


def bm25_factors(avgdl: float, idf: float) -> tuple[float, float, float]:
    """The scalars of one term's BM25 contribution, folded once: ``(k1·b/avgdl,
    k1·(1−b), idf·(k1+1))``. The numpy path and the compiled loops
    (:mod:`~hybrid_memory._keyword._scoring_loops`) both take them from here, so that
    both compute with the same floats."""
    return K1 * B / avgdl, K1 * (1.0 - B), idf * (K1 + 1.0)


def bm25_term_scores(
    tf: npt.NDArray[np.floating],
    length: npt.NDArray[np.floating],
    avgdl: float,
    idf: float | FloatArray,
) -> FloatArray:
    """A term's BM25 contribution for each (tf, document length) pair; ``idf`` one for
    all, or one per pair (the postings of several terms scored in one pass: the same
    floats as term by term, in far fewer numpy calls for a long question).

    Computed as ``idf·(k1+1) · tf / (tf + k1·(1−b) + (k1·b/avgdl)·|d|)``, the scalars
    folded first and the arrays updated in place: a common term has postings in a
    large share of the store, and each pass over them is a search's time."""
    per_length, constant, per_idf = bm25_factors(avgdl, 1.0)
    weight = idf * per_idf  # idf·(k1+1): bm25_factors' float, for one idf or many
    tf = tf.astype(np.float64)  # a copy: ``out`` below must not alias the caller's arrays
    out = length.astype(np.float64)
    out *= per_length
    out += constant
    out += tf
    np.divide(tf, out, out=out)
    out *= weight
    return out


def best_first(rows: IntArray, scores: FloatArray, limit: int) -> tuple[IntArray, FloatArray]:
    """The ``limit`` highest scores, best first, ties by row id ascending."""
    if limit <= 0 or not len(rows):
        return rows[:0], scores[:0]
    if len(rows) > limit:
        cut = np.argpartition(-scores, limit - 1)[:limit]
        # Rows tied with the cut's lowest score may sit outside it: take them all,
        # so the tie order below decides, not argpartition's.
        floor = scores[cut].min()
        chosen = np.flatnonzero(scores >= floor)
        rows, scores = rows[chosen], scores[chosen]
    order = np.lexsort((rows, -scores))[:limit]
    return rows[order], scores[order]
