"""BM25 as SQLite FTS5 scores it: pure functions over numbers and arrays.

Scores are Okapi BM25 exactly as FTS5 computes them (``fts5_aux.c``; Robertson &
Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009):

    idf(t)      = ln((N − df(t) + 0.5) / (df(t) + 0.5)),  1e-6 where that is ≤ 0
    score(d, q) = Σ_{t ∈ q} idf(t) · tf · (k1 + 1) / (tf + k1 · (1 − b + b · |d| / avgdl))

with tf = tf(t, d), k1 = 1.2, b = 0.75, N the live memories, |d| a memory's token count and avgdl
the mean over live memories. A term repeated in the query counts once per repeat,
as in FTS5, where each quoted query word is a phrase of its own.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

K1 = 1.2
B = 0.75
MIN_IDF = 1e-6  # FTS5's floor for terms in half or more of the rows

FloatArray = npt.NDArray[np.float64]


def bm25_idf(df: int, n: int) -> float:
    """FTS5's idf: ``ln((n − df + 0.5) / (df + 0.5))``, floored at 1e-6."""
    idf = float(np.log((n - df + 0.5) / (df + 0.5)))
    return idf if idf > 0.0 else MIN_IDF


def bm25_term_scores(
    tf: npt.NDArray[np.floating], length: npt.NDArray[np.floating], avgdl: float, idf: float
) -> FloatArray:
    """One term's BM25 contribution for each (tf, document length) pair.

    Computed as ``idf·(k1+1) · tf / (tf + k1·(1−b) + (k1·b/avgdl)·|d|)``, the scalars
    folded first and the arrays updated in place: a common term has postings in a
    large share of the store, and each pass over them is a search's time."""
    tf = tf.astype(np.float64)  # a copy: ``out`` below must not alias the caller's arrays
    out = length.astype(np.float64)
    out *= K1 * B / avgdl
    out += K1 * (1.0 - B)
    out += tf
    np.divide(tf, out, out=out)
    out *= idf * (K1 + 1.0)
    return out
