"""Rocchio pseudo-relevance feedback: hand-computed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hybrid_memory._search.feedback import rocchio


def test_moves_the_query_towards_the_centroid_and_normalises() -> None:
    # query (1, 0); centroid of (0, 1) and (0, 3) is (0, 2); weight 0.5 -> (1, 1) / sqrt 2
    refined = rocchio([1.0, 0.0], [[0.0, 1.0], [0.0, 3.0]], 0.5)
    assert refined == pytest.approx([1 / math.sqrt(2), 1 / math.sqrt(2)])


def test_accepts_numpy_vectors_as_chroma_returns_them() -> None:
    feedback = np.array([[0.0, 1.0], [0.0, 3.0]], dtype=np.float32)
    assert rocchio(np.array([1.0, 0.0]), feedback, 0.5) == pytest.approx(
        rocchio([1.0, 0.0], [[0.0, 1.0], [0.0, 3.0]], 0.5)
    )
    assert all(type(x) is float for x in rocchio([1.0, 0.0], feedback, 0.5))


@pytest.mark.parametrize(("feedback", "weight"), [([], 0.5), ([[0.0, 1.0]], 0.0)])
def test_no_feedback_or_no_weight_returns_the_query(feedback: list, weight: float) -> None:
    assert rocchio([3.0, 4.0], feedback, weight) == [3.0, 4.0]


def test_a_zero_result_is_returned_as_is() -> None:
    assert rocchio([1.0, 0.0], [[-2.0, 0.0]], 0.5) == [0.0, 0.0]


def test_negative_weight_is_refused() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        rocchio([1.0], [[1.0]], -0.1)


def test_length_scaled_weight_keeps_short_queries_whole_and_fades_long_ones() -> None:
    from hybrid_memory._search.feedback import length_scaled_weight

    assert length_scaled_weight(0.5, 3, 10) == 0.5
    assert length_scaled_weight(0.5, 10, 10) == 0.5
    assert length_scaled_weight(0.5, 20, 10) == pytest.approx(0.25)
    assert length_scaled_weight(0.5, 50, 10) == pytest.approx(0.1)
    assert length_scaled_weight(0.5, 50, 0) == 0.5  # 0 turns the scaling off
    with pytest.raises(ValueError):
        length_scaled_weight(-0.1, 5, 10)
