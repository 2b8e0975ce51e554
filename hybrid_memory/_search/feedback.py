"""Pure pseudo-relevance feedback math for the vector leg (Rocchio, 1971).

    refined = normalise(query + weight × mean(the keyword leg's top memories' vectors))

The keyword leg's ranking is already good at its top. Moving the query
vector towards those memories before the vector query finds their neighbours that the
bare query missed. Measured on both shared collections (nDCG@10, all-MiniLM-L6-v2):
Cranfield 0.399 → 0.412, LoCoMo 0.547 → 0.556.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt


def rocchio(
    query: Sequence[float],
    feedback: Sequence[npt.ArrayLike],
    weight: float,
    counts: Sequence[float] | None = None,
) -> list[float]:
    """The query moved towards the centroid of ``feedback`` vectors, unit length.

    ``counts`` (one per feedback vector, in [0, 1]; all 1 without it) says how much each
    vector counts in the centroid, which is still divided by the number of vectors: a
    vector counting less pulls the query less, rather than giving its pull to the rest.
    With no feedback vectors or ``weight == 0`` the query comes back unchanged.
    """
    if weight < 0:
        raise ValueError(f"weight must be non-negative, got {weight}")
    if len(feedback) == 0 or weight == 0:
        return list(query)
    vectors = np.asarray(feedback, dtype=np.float64)
    if counts is not None:
        if len(counts) != len(vectors) or any(not 0.0 <= c <= 1.0 for c in counts):
            raise ValueError(f"counts must be one value in [0, 1] per vector, got {counts}")
        vectors = vectors * np.asarray(counts, dtype=np.float64)[:, None]
    refined = np.asarray(query, dtype=np.float64) + weight * vectors.mean(axis=0)
    norm = float(np.linalg.norm(refined))
    moved: list[float] = (refined if norm == 0 else refined / norm).tolist()
    return moved


def length_scaled_weight(weight: float, content_words: int, full_words: int) -> float:
    """The feedback weight for a query of ``content_words`` (stopwords left out).

    Up to ``full_words`` the weight stays whole; a longer query gets
    ``weight × full_words / content_words``: a long query's own vector already carries
    its content, and its many OR-ed keyword terms make the keyword leg's top (the
    feedback memories) less precise. ``full_words == 0`` turns the scaling off.
    Measured (benchmarks/fusion_study.py): no change on LoCoMo (short questions),
    Cranfield nDCG@10 0.4119 → 0.4117 and Recall@10 0.464 → 0.466.
    """
    if weight < 0 or content_words < 0 or full_words < 0:
        raise ValueError("weight, content_words and full_words must be non-negative")
    if full_words == 0 or content_words <= full_words:
        return weight
    return weight * full_words / content_words
