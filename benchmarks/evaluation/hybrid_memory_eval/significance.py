"""Whether two systems' per-query scores differ by more than chance: the paired
randomisation test (Fisher's permutation test on paired differences, as recommended for
IR evaluation by Smucker, Allan & Carterette, CIKM 2007).

Under the null hypothesis that the two systems are interchangeable, each query's pair of
scores could have come out either way round, so the sign of each per-query difference is
a coin flip. The p-value is the share of ``trials`` random sign assignments whose mean
difference is at least as far from zero as the observed one (two-sided), counting the
observed assignment itself so it is never 0. Pure numpy, seeded: the same inputs give
the same p-value on every run.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hybrid_memory import InvalidInputError

__all__ = ["DEFAULT_TRIALS", "paired_randomisation_test"]

#: Enough sign flips that a p-value near 0.05 is stable to about ±0.005.
DEFAULT_TRIALS = 10_000
#: Sign assignments are drawn in blocks of this many rows, so memory stays small at any
#: number of queries.
_BLOCK = 1_000


def paired_randomisation_test(
    a: Sequence[float], b: Sequence[float], *, trials: int = DEFAULT_TRIALS, seed: int = 0
) -> float:
    """Two-sided p-value that the mean of ``a - b`` (paired by position) is non-zero.

    1.0 when the two lists are equal everywhere (no evidence of any difference).
    """
    if len(a) != len(b):
        raise InvalidInputError("scores", f"paired lists differ in length: {len(a)} != {len(b)}")
    if not a:
        raise InvalidInputError("scores", "no paired scores to test")
    if trials < 1:
        raise InvalidInputError("trials", f"must be at least 1, got {trials}")
    differences = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if not differences.any():
        return 1.0
    observed = abs(differences.mean())
    # Means within rounding of the observed one count as "as extreme" (ties are common:
    # many queries score exactly 0 or 1 for both systems).
    threshold = observed - 1e-12
    rng = np.random.default_rng(seed)
    extreme = 0
    done = 0
    while done < trials:
        rows = min(_BLOCK, trials - done)
        signs = rng.integers(0, 2, size=(rows, differences.size), dtype=np.int8) * 2 - 1
        means = np.abs(signs @ differences) / differences.size
        extreme += int(np.count_nonzero(means >= threshold))
        done += rows
    return (extreme + 1) / (trials + 1)
