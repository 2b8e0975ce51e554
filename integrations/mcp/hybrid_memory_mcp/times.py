"""The ``after``/``before`` bounds of the tools, read as people and LLMs write them.

Accepted: an ISO 8601 date or time (``2026-05-01``, ``2026-05-01T09:30:00Z``; no zone
means UTC), epoch seconds, ``N unit(s) ago`` or ``Nunit`` (``3 days ago``, ``2w``,
``12h``; units minutes, hours, days, weeks, months of 30 days, years of 365 days), and
``now``, ``today``, ``yesterday``, ``last week``, ``last month``, ``last year``
(``last week``: the last 7 days, and so on). Each becomes a UTC time the store's
``created_at`` filter compares with.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any

from hybrid_memory import InvalidInputError

__all__ = ["time_bound"]

UTC = timezone.utc

_UNITS = {
    "m": 60,
    "min": 60,
    "minute": 60,
    "h": 3600,
    "hour": 3600,
    "d": 86_400,
    "day": 86_400,
    "w": 7 * 86_400,
    "week": 7 * 86_400,
    "month": 30 * 86_400,
    "y": 365 * 86_400,
    "year": 365 * 86_400,
}
_AGO = re.compile(r"^(\d+(?:\.\d+)?)\s*([a-z]+?)s?(?:\s+ago)?$")
_LAST = {"week": "1 week", "month": "1 month", "year": "1 year", "day": "1 day", "hour": "1 hour"}
ACCEPTED = (
    "an ISO 8601 date or time (2026-05-01, 2026-05-01T09:30:00Z), epoch seconds, "
    "'N days ago' / '2w' / '12h', or now, today, yesterday, last week, last month, last year"
)


def time_bound(value: Any, field: str, now: datetime | None = None) -> datetime:
    """``value`` as a timezone-aware UTC time; InvalidInputError naming ``field``."""
    now = now or datetime.now(UTC)
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise InvalidInputError(field, f"expected {ACCEPTED}; got {value!r}")
    if isinstance(value, (int, float)):
        try:
            return datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError):
            raise InvalidInputError(field, f"epoch seconds out of range: {value!r}") from None
    text = " ".join(value.strip().lower().split())
    if text == "now":
        return now
    if text in ("today", "yesterday"):
        midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
        return midnight if text == "today" else midnight - timedelta(days=1)
    if text.startswith(("last ", "past ")) and text[5:] in _LAST:
        text = _LAST[text[5:]]
    relative = _AGO.match(text)
    if relative and relative.group(2) in _UNITS:
        return now - timedelta(seconds=float(relative.group(1)) * _UNITS[relative.group(2)])
    stripped = value.strip()
    if stripped.endswith(("Z", "z")):  # Python 3.10's fromisoformat does not read "Z"
        stripped = stripped[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(stripped)
    except ValueError:
        raise InvalidInputError(field, f"expected {ACCEPTED}; got {value!r}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
