"""Time values in and out: everything is stored as UTC epoch seconds."""

from __future__ import annotations

import time
from datetime import datetime, timezone

from hybrid_memory.errors import InvalidInputError


def to_timestamp(value: datetime | str | float | int, *, field: str) -> float:
    """Epoch seconds from a datetime (naive means UTC), an ISO 8601 string or a number."""
    if isinstance(value, bool):
        raise InvalidInputError(field, f"expected a time, got the boolean {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InvalidInputError(
                field, f"expected an ISO 8601 time like '2024-05-08T13:56:00+00:00', got {value!r}"
            ) from None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value.timestamp()
    raise InvalidInputError(
        field, f"expected a datetime, ISO 8601 string or epoch seconds, got {value!r}"
    )


def to_datetime(timestamp: float) -> datetime:
    """The timezone-aware UTC datetime of epoch seconds."""
    return datetime.fromtimestamp(timestamp, tz=timezone.utc)


def now_timestamp() -> float:
    return time.time()
