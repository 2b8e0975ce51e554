"""Exponential recency decay."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest

from hybrid_memory._search.recency import SECONDS_PER_DAY, age_in_days, decay_factor, half_life_days

NOW = datetime(2024, 5, 8, 12, 0, tzinfo=timezone.utc)


def test_age_from_datetimes() -> None:
    assert age_in_days(NOW - timedelta(days=3, hours=12), NOW) == pytest.approx(3.5)


def test_age_from_epoch_seconds_and_mixed_inputs() -> None:
    now = NOW.timestamp()
    assert age_in_days(now - 2 * SECONDS_PER_DAY, now) == pytest.approx(2.0)
    assert age_in_days(NOW - timedelta(days=1), now) == pytest.approx(1.0)
    assert age_in_days(now - 6 * 3600, NOW) == pytest.approx(0.25)


def test_age_respects_time_zones() -> None:
    # 12:00 UTC and 14:00 at UTC+2 are the same instant.
    plus_two = datetime(2024, 5, 8, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    assert age_in_days(plus_two, NOW) == 0.0


def test_future_memories_have_age_zero() -> None:
    assert age_in_days(NOW + timedelta(days=10), NOW) == 0.0


def test_decay_factor_values() -> None:
    assert decay_factor(0.0, 0.5) == 1.0
    assert decay_factor(10.0, 0.0) == 1.0  # decay 0 disables recency
    assert decay_factor(10.0, 0.1) == pytest.approx(math.exp(-1.0))
    assert decay_factor(2.0, 0.25) == pytest.approx(0.6065306597126334)  # e^-0.5


def test_decay_factor_at_half_life_is_one_half() -> None:
    decay = 0.01
    assert half_life_days(decay) == pytest.approx(69.31471805599453)
    assert decay_factor(half_life_days(decay), decay) == pytest.approx(0.5)
    assert decay_factor(2 * half_life_days(decay), decay) == pytest.approx(0.25)


def test_decay_factor_is_monotone_and_in_unit_interval() -> None:
    factors = [decay_factor(age, 0.05) for age in (0, 1, 7, 30, 365, 10_000)]
    assert factors == sorted(factors, reverse=True)
    assert all(0.0 < f <= 1.0 for f in factors[:-1])
    assert 0.0 <= factors[-1] < 1e-200


def test_negative_age_counts_as_zero() -> None:
    assert decay_factor(-5.0, 0.3) == 1.0


def test_negative_decay_is_rejected() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        decay_factor(1.0, -0.01)


def test_half_life_of_no_decay_is_infinite() -> None:
    assert half_life_days(0.0) == math.inf
