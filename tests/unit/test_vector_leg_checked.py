"""``with_checked``: the vector leg's hits with the checked memories that reach its cut,
by their exact cosine (pure: no store)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_memory._search.legs import with_checked


def unit(*values: float) -> list[float]:
    vector = np.asarray(values, dtype=np.float64)
    return (vector / np.linalg.norm(vector)).tolist()


QUERY = unit(1, 0, 0)


def test_a_missed_memory_nearer_than_the_cut_comes_in_at_its_place() -> None:
    hits = {"a": 0.9, "b": 0.5, "c": 0.2}
    got = with_checked(hits, QUERY, {"x": unit(1, 1, 0)}, depth=3)  # cosine 0.707
    assert list(got) == ["a", "x", "b"]
    assert got["x"] == pytest.approx(math.sqrt(0.5))


def test_one_farther_than_a_full_legs_cut_stays_out() -> None:
    hits = {"a": 0.9, "b": 0.8}
    assert with_checked(hits, QUERY, {"x": unit(1, 2, 0)}, depth=2) == hits  # cosine 0.447


def test_a_leg_short_of_its_depth_takes_any_checked_memory() -> None:
    got = with_checked({"a": 0.9}, QUERY, {"x": unit(-1, 0.1, 0)}, depth=5)
    assert list(got) == ["a", "x"]
    assert got["x"] < 0


def test_a_memory_already_a_hit_keeps_chromas_cosine() -> None:
    hits = {"a": 0.9, "b": 0.5}
    assert with_checked(hits, QUERY, {"b": unit(1, 0, 0)}, depth=2) == hits


def test_no_checked_memories_and_a_zero_vector() -> None:
    hits = {"a": 0.9}
    assert with_checked(hits, QUERY, {}, depth=1) is hits
    assert with_checked(hits, QUERY, {"z": [0.0, 0.0, 0.0]}, depth=1) == hits


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(-1, 1), min_size=0, max_size=8),
    st.lists(
        st.lists(st.floats(-1, 1, allow_subnormal=False), min_size=3, max_size=3),
        min_size=0,
        max_size=4,
    ),
    st.integers(1, 10),
)
def test_the_result_is_the_best_of_both_within_depth(
    cosines: list[float], vectors: list[list[float]], depth: int
) -> None:
    hits = dict(sorted(((f"h{i}", c) for i, c in enumerate(cosines)), key=lambda p: -p[1]))
    hits = dict(list(hits.items())[:depth])
    checked = {f"c{i}": v for i, v in enumerate(vectors)}
    got = with_checked(hits, QUERY, checked, depth)
    assert len(got) <= depth
    assert list(got.values()) == sorted(got.values(), reverse=True)
    assert set(hits) - set(got) == set() or len(got) == depth  # a hit leaves only for room
    for memory_id, cosine in got.items():
        if memory_id in hits:
            assert cosine == hits[memory_id]
        else:
            norm = np.linalg.norm(checked[memory_id])
            assert norm > 0
            assert cosine == pytest.approx(float(np.dot(checked[memory_id], QUERY) / norm))
            assert len(hits) < depth or cosine >= min(hits.values())
