"""Pure maximal marginal relevance: a reordering of candidates that trades relevance for
variety (Carbonell & Goldstein, SIGIR 1998).

Each next pick is the candidate that maximises

    (1 - diversity) × relevance(d) - diversity × max_{s picked} cosine(d, s)

where ``relevance`` is the candidate's fused score divided by the best one's (so the
first pick is always the best fused hit, and ``diversity`` 0 keeps the fused order),
and ``diversity`` is the weight of variety in [0, 1]. LangChain's ``lambda_mult`` and
LlamaIndex's ``mmr_threshold`` are the weight of relevance, ``1 - diversity``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt


def mmr_order(
    relevance: Sequence[float], unit_vectors: npt.ArrayLike, k: int, diversity: float
) -> list[int]:
    """The positions of the ``k`` candidates maximal marginal relevance picks, in pick
    order. ``relevance``: each candidate's score, best first or not (scaled here by the
    largest); ``unit_vectors``: one row per candidate, of length 1 (a zero row is like
    no other). Ties go to the earlier candidate."""
    if not 0.0 <= diversity <= 1.0:
        raise ValueError(f"diversity must be in [0, 1], got {diversity}")
    count = len(relevance)
    if count == 0 or k <= 0:
        return []
    scores = np.asarray(relevance, dtype=np.float64)
    top = float(scores.max())
    scaled = scores / top if top > 0 else np.zeros(count)
    matrix = np.asarray(unit_vectors, dtype=np.float64).reshape(count, -1)
    nearest_picked = np.full(count, -np.inf)  # each candidate's largest cosine with a pick
    picked: list[int] = []
    free = np.ones(count, dtype=bool)
    while len(picked) < min(k, count):
        penalty = np.where(np.isfinite(nearest_picked), nearest_picked, 0.0)
        value = (1.0 - diversity) * scaled - diversity * penalty
        value[~free] = -np.inf
        choice = int(np.argmax(value))  # the first of equal values
        picked.append(choice)
        free[choice] = False
        nearest_picked = np.maximum(nearest_picked, matrix @ matrix[choice])
    return picked
