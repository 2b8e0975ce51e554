"""Pure recency math: exponential decay of a score with a memory's age.

    decayed = score × exp(−decay × age_in_days)

so ``decay`` is the per-day rate: 0 disables decay, 0.01 halves a score after
ln 2 / 0.01 ≈ 69 days. Memories dated after ``now`` count as age 0.
"""

from __future__ import annotations

import math
from datetime import datetime

SECONDS_PER_DAY = 86_400.0


def age_in_days(created_at: datetime | float, now: datetime | float) -> float:
    """Days from ``created_at`` to ``now`` (datetimes or epoch seconds), never negative."""
    start = created_at.timestamp() if isinstance(created_at, datetime) else created_at
    end = now.timestamp() if isinstance(now, datetime) else now
    return max(end - start, 0.0) / SECONDS_PER_DAY


def decay_factor(age_days: float, decay: float) -> float:
    """The multiplier exp(−decay × age) in (0, 1]."""
    if decay < 0:
        raise ValueError(f"decay must be non-negative, got {decay}")
    return math.exp(-decay * max(age_days, 0.0))


def half_life_days(decay: float) -> float:
    """Days until a score halves under ``decay`` (infinite when decay is 0)."""
    return math.inf if decay == 0 else math.log(2) / decay
