"""The latest writes' vectors, compared exactly (``hybrid_memory._store.recent_vectors``),
by hand."""

from __future__ import annotations

import numpy as np
import pytest

from hybrid_memory._store.recent_vectors import RecentVectors


def unit(*values: float) -> np.ndarray:
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_nearest_gives_cosines_at_or_above_the_floor_best_first() -> None:
    recent = RecentVectors()
    recent.add(["a", "b", "c"], [[1, 0, 0], [3, 4, 0], [0, 0, 2]])  # any length
    got = recent.nearest([1, 0, 0], floor=0.5)
    assert list(got) == ["a", "b"]
    assert got["a"] == pytest.approx(1.0) and got["b"] == pytest.approx(0.6)
    assert list(recent.nearest([0, 0, 5], floor=-1.0)) == ["c", "a", "b"]
    assert recent.nearest([1, 0], floor=-1.0) == {}  # another width: nothing to compare
    assert recent.nearest([0, 0, 0], floor=-1.0) == {}  # no direction: no cosine


def test_the_oldest_make_room_and_a_memory_written_again_keeps_its_latest_vector() -> None:
    recent = RecentVectors(kept=3)
    recent.add(["a", "b"], [unit(1, 0), unit(0, 1)])
    recent.add(["a"], [unit(0, 1)])  # rewritten: one entry, the new vector
    assert len(recent) == 2
    assert recent.nearest(unit(0, 1), floor=0.99).keys() == {"a", "b"}
    recent.add(["c", "d"], [unit(1, 1), unit(1, 1)])  # full: "a" (oldest slot) goes
    assert len(recent) == 3
    assert set(recent.nearest(unit(1, 1), floor=-1.0)) == {"b", "c", "d"}
    many = [f"m{i}" for i in range(10)]
    recent.add(many, [unit(1, i) for i in range(10)])  # one batch larger than kept
    assert set(recent.nearest(unit(1, 0), floor=-1.0)) == {"m7", "m8", "m9"}


def test_forgotten_and_unusable_vectors_are_never_returned() -> None:
    recent = RecentVectors()
    recent.add(["a", "b", "c", "d"], [[1, 0], [0, 0], [np.nan, 1], [1, 1]])
    assert set(recent.nearest([1, 0], floor=-1.0)) == {"a", "d"}
    recent.forget(["a", "never-written"])
    assert set(recent.nearest([1, 0], floor=-1.0)) == {"d"}
    recent.add(["d"], [[0, 0]])  # rewritten with no direction: dropped, not kept stale
    assert recent.nearest([1, 0], floor=-1.0) == {}
    recent.add(["e"], [[1, 0, 0]])  # another width (a new model): the old ones go
    assert list(recent.nearest([1, 0, 0], floor=-1.0)) == ["e"]
    recent.clear()
    assert len(recent) == 0 and recent.nearest([1, 0, 0], floor=-1.0) == {}


def test_ids_and_vectors_must_pair_up() -> None:
    with pytest.raises(ValueError, match="2 ids"):
        RecentVectors().add(["a", "b"], [[1.0, 0.0]])
    RecentVectors(kept=0).add(["a"], [[1.0]])  # keeping none: nothing to check


def test_a_limit_gives_the_most_similar_of_those_above_the_floor() -> None:
    recent = RecentVectors()
    rng = np.random.default_rng(4)
    ids = [f"m{i}" for i in range(200)]
    recent.add(ids, rng.standard_normal((200, 8)))
    recent.forget(ids[::3])
    query = rng.standard_normal(8)
    every = recent.nearest(query, floor=-1.0)
    assert len(every) == len(ids) - len(ids[::3])
    for limit in (1, 5, 60, 500):
        assert recent.nearest(query, -1.0, limit) == dict(list(every.items())[:limit])
    above = recent.nearest(query, 0.2)
    assert recent.nearest(query, 0.2, 3) == dict(list(above.items())[:3])
    assert recent.count_of([*ids[:6], "never"]) == 4  # m0 and m3 forgotten
