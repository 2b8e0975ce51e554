"""Vectors as the engine holds them: a caller's vectors checked into one float32 matrix,
and exact nearest neighbours by cosine."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from hybrid_memory._model.errors import EmbeddingError

Vector = list[float]
Matrix = npt.NDArray[np.float32]


def checked_matrix(vectors: Any, expected: int, source: str) -> Matrix:
    """The vectors as one float32 matrix, or EmbeddingError saying what is wrong (checked
    with numpy, not float by float: a large add would spend longer here than in Chroma)."""
    try:
        matrix = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise EmbeddingError(
            f"{source} returned something that is not a list of equal-length vectors"
        ) from exc
    if matrix.ndim != 2 or matrix.shape[0] != expected:
        raise EmbeddingError(
            f"{source} returned an array of shape {matrix.shape} for {expected} texts"
        )
    if matrix.shape[1] == 0:
        raise EmbeddingError(f"{source} returned empty vectors")
    if not np.isfinite(matrix).all():
        raise EmbeddingError(f"{source} returned a vector with NaN or infinite values")
    return matrix


def nearest_by_cosine(vectors: Matrix, query: Vector, limit: int) -> list[tuple[int, float]]:
    """Exact nearest neighbours: ``[(row, cosine similarity)]`` of the ``limit`` rows
    of ``vectors`` most similar to ``query``, best first (ties by row)."""
    if limit <= 0 or not len(vectors):
        return []
    matrix = np.asarray(vectors, dtype=np.float64)
    q = np.asarray(query, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1) * np.linalg.norm(q)
    similarity = np.divide(matrix @ q, norms, out=np.zeros(len(matrix)), where=norms > 0)
    order = np.lexsort((np.arange(len(matrix)), -similarity))[:limit]
    return [(int(i), float(similarity[i])) for i in order]
