"""The paired randomisation test, on cases whose answer is known without it."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hybrid_memory_eval.significance import paired_randomisation_test

from hybrid_memory import InvalidInputError


def _exact_p(a: list[float], b: list[float]) -> float:
    """The exact two-sided p over all 2^n sign assignments (small n only)."""
    d = np.asarray(a) - np.asarray(b)
    observed = abs(d.mean())
    flips = list(itertools.product((-1, 1), repeat=len(d)))
    extreme = sum(abs((np.asarray(s) * d).mean()) >= observed - 1e-12 for s in flips)
    return extreme / len(flips)


def test_identical_systems_give_p_one() -> None:
    scores = [0.1, 0.5, 1.0, 0.0]
    assert paired_randomisation_test(scores, scores) == 1.0


def test_a_consistent_large_gain_is_significant() -> None:
    rng = np.random.default_rng(1)
    base = rng.uniform(0, 0.5, size=60)
    better = base + 0.3
    assert paired_randomisation_test(list(better), list(base)) < 0.001


def test_noise_around_zero_is_not_significant() -> None:
    rng = np.random.default_rng(2)
    a = rng.uniform(0, 1, size=80)
    b = a + rng.normal(0, 0.2, size=80) * np.where(np.arange(80) % 2, 1, -1)
    b = b - (b - a).mean()  # mean difference exactly 0 up to rounding
    assert paired_randomisation_test(list(a), list(b)) > 0.5


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2], [0.1, 0.2, 0.3, 0.4, 0.5, 0.5, 0.4, 0.1]),
        (
            [1.0, 0.0, 0.5, 0.5, 0.2, 0.9, 0.3, 0.6, 0.1],
            [0.8, 0.1, 0.5, 0.3, 0.2, 0.7, 0.2, 0.1, 0.0],
        ),
    ],
)
def test_matches_the_exact_permutation_p_value(a: list[float], b: list[float]) -> None:
    exact = _exact_p(a, b)
    estimate = paired_randomisation_test(a, b, trials=20_000)
    # Monte Carlo error at 20,000 trials is about sqrt(p(1-p)/20000) <= 0.0036.
    assert abs(estimate - exact) < 0.015, (estimate, exact)


def test_seeded_and_symmetric() -> None:
    a, b = [0.2, 0.9, 0.4, 0.7, 0.6], [0.1, 0.5, 0.5, 0.3, 0.6]
    assert paired_randomisation_test(a, b, seed=7) == paired_randomisation_test(a, b, seed=7)
    assert paired_randomisation_test(a, b, seed=7) == paired_randomisation_test(b, a, seed=7)


def test_never_zero() -> None:
    assert paired_randomisation_test([1.0] * 30, [0.0] * 30, trials=100) == pytest.approx(1 / 101)


@pytest.mark.parametrize(
    ("a", "b", "trials", "field"),
    [([0.1], [0.1, 0.2], 10, "scores"), ([], [], 10, "scores"), ([0.1], [0.2], 0, "trials")],
)
def test_bad_input_names_the_field(a: list[float], b: list[float], trials: int, field: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        paired_randomisation_test(a, b, trials=trials)
    assert caught.value.field == field
