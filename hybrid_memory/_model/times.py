"""Time values in and out: everything is stored as UTC epoch seconds.

Times must lie in years 1-9999 (what :class:`datetime.datetime` can represent), so
every stored time can be read back as a datetime on every platform: epoch seconds
from :data:`MIN_TIMESTAMP` (0001-01-01T00:00:00Z) to :data:`MAX_TIMESTAMP`
(9999-12-31T23:59:59Z).
"""

from __future__ import annotations

import math
import time
from datetime import datetime, timedelta, timezone

from hybrid_memory._model.errors import InvalidInputError

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
MIN_TIMESTAMP = -62_135_596_800.0  # 0001-01-01T00:00:00Z
MAX_TIMESTAMP = 253_402_300_799.0  # 9999-12-31T23:59:59Z
_RANGE = (
    "epoch seconds from -62135596800 to 253402300799 (0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z)"
)


def to_timestamp(value: datetime | str | float | int, *, field: str) -> float:
    """Epoch seconds from a datetime (naive means UTC), an ISO 8601 string or a number,
    within years 1-9999 (finite)."""
    if isinstance(value, bool):
        raise InvalidInputError(field, f"expected a time, got the boolean {value!r}")
    if isinstance(value, (int, float)):
        try:
            stamp = float(value)
        except OverflowError:
            raise InvalidInputError(field, f"expected {_RANGE}, got {value!r}") from None
        return _in_range(stamp, value, field)
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except (ValueError, UnicodeError):
            raise InvalidInputError(
                field, f"expected an ISO 8601 time like '2024-05-08T13:56:00+00:00', got {value!r}"
            ) from None
    if isinstance(value, datetime):
        original = value
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        try:
            stamp = (value - _EPOCH).total_seconds()
        except (OverflowError, ValueError):
            raise InvalidInputError(field, f"expected {_RANGE}, got {original!r}") from None
        return _in_range(stamp, original, field)
    raise InvalidInputError(
        field, f"expected a datetime, ISO 8601 string or epoch seconds, got {value!r}"
    )


def _in_range(stamp: float, original: object, field: str) -> float:
    if not math.isfinite(stamp) or not MIN_TIMESTAMP <= stamp <= MAX_TIMESTAMP:
        raise InvalidInputError(field, f"expected {_RANGE}, got {original!r}")
    return _whole_microseconds(stamp)


def _whole_microseconds(stamp: float) -> float:
    """``stamp`` rounded to whole microseconds, the precision of a datetime. Chroma
    keeps a float metadata value only to within a unit or two of its last binary digit
    (Chroma 1.5: 274 of 2,000 times came back one or two units off), which near a
    half microsecond flips the datetime read back; a whole microsecond stays itself."""
    return round(stamp, 6)


def to_datetime(timestamp: float) -> datetime:
    """The timezone-aware UTC datetime of epoch seconds (in the range above)."""
    return _EPOCH + timedelta(seconds=timestamp)


def stored_datetime(timestamp: object) -> datetime | None:
    """A stored time as a datetime; None when it is missing or not representable (a
    value outside years 1-9999 written by an older version, which accepted any number):
    one such memory must not break reads of the whole store."""
    if isinstance(timestamp, bool) or not isinstance(timestamp, (int, float)) or not timestamp:
        return None
    stamp = float(timestamp)
    if not math.isfinite(stamp) or not MIN_TIMESTAMP <= stamp <= MAX_TIMESTAMP:
        return None
    return to_datetime(stamp)


def now_timestamp() -> float:
    return _whole_microseconds(time.time())
