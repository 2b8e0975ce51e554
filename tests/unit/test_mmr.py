"""Maximal marginal relevance (hybrid_memory._search.mmr): relevance traded for variety."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hybrid_memory._search.mmr import mmr_order

# Two near-identical candidates first, then a different one a little less relevant.
UNITS = np.array([[1.0, 0.0], [0.995, 0.0998749], [0.0, 1.0]])
RELEVANCE = [1.0, 0.95, 0.8]


def test_no_diversity_keeps_the_relevance_order() -> None:
    assert mmr_order(RELEVANCE, UNITS, 3, 0.0) == [0, 1, 2]


def test_diversity_brings_the_different_candidate_up() -> None:
    assert mmr_order(RELEVANCE, UNITS, 2, 0.5) == [0, 2]
    assert mmr_order(RELEVANCE, UNITS, 3, 0.5) == [0, 2, 1]


def test_the_first_pick_is_the_most_relevant_below_full_diversity() -> None:
    assert mmr_order([0.2, 0.9, 0.5], np.eye(3), 1, 0.99) == [1]


def test_k_and_empty_inputs() -> None:
    assert mmr_order([], np.zeros((0, 2)), 3, 0.5) == []
    assert mmr_order(RELEVANCE, UNITS, 0, 0.5) == []
    assert mmr_order(RELEVANCE, UNITS, 10, 0.5) == [0, 2, 1]


def test_a_diversity_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="diversity"):
        mmr_order(RELEVANCE, UNITS, 2, 1.5)


@given(
    st.lists(st.floats(0.0, 1.0), min_size=1, max_size=12),
    st.floats(0.0, 1.0),
    st.integers(1, 12),
    st.integers(0, 2**31),
)
def test_every_pick_is_a_distinct_candidate(
    relevance: list[float], diversity: float, k: int, seed: int
) -> None:
    vectors = np.random.default_rng(seed).standard_normal((len(relevance), 4))
    units = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    picked = mmr_order(relevance, units, k, diversity)
    assert len(picked) == min(k, len(relevance)) == len(set(picked))
    assert all(0 <= i < len(relevance) for i in picked)
