"""Pure parsing of the time a query names, relative to the query's ``now``: no I/O, no LLM.

:func:`find_time_phrase` reads a query such as "what did I cook last week?" and returns
the first phrase it understands as a :class:`TimePhrase`:

- a **window** (``kind == "window"``): a calendar range of epoch seconds, ``start``
  inclusive, ``end`` exclusive, either end open (None):

  ========================================  =============================================
  phrase                                    window (``now`` = Wed 2024-05-15 10:00 UTC)
  ========================================  =============================================
  today, this morning/afternoon/evening     today, 00:00 to now
  yesterday, last night                     yesterday (last night: yesterday 12:00 to
                                            today 06:00)
  the day before yesterday                  that day
  this week / month / year                  the calendar week (Monday first), month or
                                            year so far
  last week / month / year                  the previous calendar week, month or year
  the past/last N days/weeks/months/years,  ``now`` − N units to ``now``
  in the past week, over the last month
  N days/weeks/months/years ago             the day N days ago; otherwise N units ago ±
                                            half a unit (people round: "two months
                                            ago" is six to ten weeks back)
  the other day                             2 to 10 days ago
  on/last/this past Monday ...              the latest such weekday before today (not
                                            "on Monday mornings": a habit)
  in March, last March, in March 2023       the latest March that has begun (this one
                                            in March itself), or the one named
  on May 3rd, May 3, 3 May, 3rd of May,     that day, the latest one not after today
  March 15th 2023, 2023-05-03               unless the year is named
  in 2023                                   that year
  ========================================  =============================================

- an **order** (``kind == "newest"`` or ``"oldest"``): words that ask for the latest or
  the earliest of several memories without naming a range ("recently", "lately",
  "currently", "these days", "the latest", "most recent", "now"; "the first time",
  "at first", "initially", "originally", "the earliest"). They carry no window: a search
  can only prefer newer or older memories for them.
- an **anchor** (``kind == "before"`` or ``"after"``): "before I moved", "after we
  got married": the time of another event, which only the store can tell (the event
  phrase is ``anchor``); the window is open on the other side.

Numbers may be digits or words up to twelve, "a"/"an"/"one", "a couple of" (2), "a few"
(3). Calendar arithmetic is done in UTC, like every stored time.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

#: The kinds that carry no window, only a preference for newer or older memories.
ORDER_KINDS = frozenset({"newest", "oldest"})


@dataclass(frozen=True, slots=True)
class TimePhrase:
    """What a time phrase in a query means (see the module docstring)."""

    phrase: str  # as written in the query
    kind: str  # "window", "newest", "oldest", "before", "after"
    start: float | None = None  # epoch seconds, inclusive
    end: float | None = None  # epoch seconds, exclusive
    anchor: str | None = None  # the event of "before"/"after", e.g. "I moved"

    def describe(self) -> str:
        """A one-line account, e.g. ``'last week' -> 2024-05-06..2024-05-13``."""
        if self.kind in ORDER_KINDS:
            return f"{self.phrase!r} -> {self.kind} first"
        if self.anchor is not None and self.start is None and self.end is None:
            return f"{self.phrase!r} -> {self.kind} the time of {self.anchor!r}"
        return f"{self.phrase!r} -> {_iso(self.start)}..{_iso(self.end)}"


def _iso(stamp: float | None) -> str:
    if stamp is None:
        return ""
    moment = datetime.fromtimestamp(stamp, tz=timezone.utc)
    if moment.hour == moment.minute == moment.second == 0:
        return moment.date().isoformat()
    return moment.isoformat(timespec="minutes").replace("+00:00", "Z")


# --- vocabulary ----------------------------------------------------------------------------

_NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "a couple of": 2,
    "a couple": 2,
    "couple of": 2,
    "a few": 3,
    "few": 3,
    "several": 3,
}
_NUMBER = (
    r"(?P<n>\d{1,3}|a couple of|a couple|couple of|a few|few|several|"
    + "|".join(w for w in _NUMBER_WORDS if " " not in w)
    + ")"
)
_UNIT = r"(?P<unit>day|week|month|year)s?"
_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS.pop("may", None)  # re-added below: only "May" in full, never an abbreviation
_MONTHS["may"] = 5
_MONTHS["sept"] = 9
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_MONTH_NAME = r"(?P<month>" + "|".join(n.lower() for n in calendar.month_name if n) + r")"
_WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
_WEEKDAY = r"(?P<weekday>" + "|".join(_WEEKDAYS) + r")"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"

_NEWEST = (
    r"recently|lately|currently|these days|nowadays|right now|at the moment|"
    r"(?:the |my )?(?:latest|most recent(?:ly)?|newest|current)|now"
)
_OLDEST = r"(?:for )?the (?:very )?first time|at first|initially|originally|(?:the )?earliest"


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w-])(?:" + pattern + r")(?![\w-])", re.IGNORECASE)


# --- calendar arithmetic ---------------------------------------------------------------------


def _day(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def _add_months(moment: datetime, months: int) -> datetime:
    """The first of the month ``months`` after (or before) ``moment``'s month."""
    index = moment.year * 12 + (moment.month - 1) + months
    return moment.replace(
        year=index // 12, month=index % 12 + 1, day=1, hour=0, minute=0, second=0, microsecond=0
    )


def _unit_start(moment: datetime, unit: str) -> datetime:
    day = _day(moment)
    if unit == "day":
        return day
    if unit == "week":
        return day - timedelta(days=day.weekday())
    if unit == "month":
        return day.replace(day=1)
    return day.replace(month=1, day=1)


def _shift(moment: datetime, unit: str, count: float) -> datetime:
    """``moment`` moved by ``count`` units (months and years by their mean length when
    ``count`` is fractional)."""
    if unit == "day":
        return moment + timedelta(days=count)
    if unit == "week":
        return moment + timedelta(weeks=count)
    months = count * (12 if unit == "year" else 1)
    if months == int(months):
        start = _add_months(moment, int(months))
        last = calendar.monthrange(start.year, start.month)[1]
        return start.replace(
            day=min(moment.day, last),
            hour=moment.hour,
            minute=moment.minute,
            second=moment.second,
            microsecond=moment.microsecond,
        )
    return moment + timedelta(days=months * 30.44)


def _number(text: str) -> int:
    text = text.lower()
    return int(text) if text.isdigit() else _NUMBER_WORDS[text]


def _safe_date(year: int, month: int, day: int) -> datetime | None:
    try:
        return datetime(year, month, day, tzinfo=timezone.utc)
    except ValueError:
        return None


# --- the phrases, most specific first ------------------------------------------------------------

Window = tuple[datetime | None, datetime | None]


def _today(m: re.Match[str], now: datetime) -> Window:
    return _day(now), now


def _yesterday(m: re.Match[str], now: datetime) -> Window:
    today = _day(now)
    if m.group(0).lower().startswith("the day before"):
        return today - timedelta(days=2), today - timedelta(days=1)
    return today - timedelta(days=1), today


def _last_night(m: re.Match[str], now: datetime) -> Window:
    today = _day(now)
    return today - timedelta(hours=12), today + timedelta(hours=6)


def _this_unit(m: re.Match[str], now: datetime) -> Window:
    return _unit_start(now, m.group("unit").lower()), now


def _last_unit(m: re.Match[str], now: datetime) -> Window:
    unit = m.group("unit").lower()
    current = _unit_start(now, unit)
    return _shift(current, unit, -1), current


def _past_n(m: re.Match[str], now: datetime) -> Window:
    count = _number(m.group("n")) if m.groupdict().get("n") else 1
    return _shift(now, m.group("unit").lower(), -count), now


def _ago(m: re.Match[str], now: datetime) -> Window:
    unit, count = m.group("unit").lower(), _number(m.group("n"))
    if unit == "day":
        start = _day(now) - timedelta(days=count)
        return start, start + timedelta(days=1)
    return _shift(now, unit, -count - 0.5), _shift(now, unit, -count + 0.5)


def _other_day(m: re.Match[str], now: datetime) -> Window:
    today = _day(now)
    return today - timedelta(days=10), today - timedelta(days=1)


def _weekday(m: re.Match[str], now: datetime) -> Window:
    today = _day(now)
    back = (today.weekday() - _WEEKDAYS[m.group("weekday").lower()]) % 7 or 7
    start = today - timedelta(days=back)
    return start, start + timedelta(days=1)


def _latest_month(month: int, year: int | None, now: datetime) -> datetime:
    if year is not None:
        return datetime(year, month, 1, tzinfo=timezone.utc)
    year = now.year if month <= now.month else now.year - 1
    return datetime(year, month, 1, tzinfo=timezone.utc)


def _month(m: re.Match[str], now: datetime) -> Window | None:
    month = _MONTHS[m.group("month").lower()]
    year = int(m.group("year")) if m.group("year") else None
    if year is None and m.group("prefix") is None:
        return None  # a bare month name: "May" is also a verb, "August" a name
    if year is None and m.group(0).lower().startswith("last") and month >= now.month:
        year = now.year - 1  # "last March" in March or before it: a year ago
    start = _latest_month(month, year, now)
    return start, _add_months(start, 1)


def _date(m: re.Match[str], now: datetime) -> Window | None:
    month = _MONTHS[m.group("month").lower()]
    day = int(m.group("day"))
    if m.group("year"):
        start = _safe_date(int(m.group("year")), month, day)
    else:
        start = _safe_date(now.year, month, day)
        if start is not None and start > _day(now):
            start = _safe_date(now.year - 1, month, day)
    if start is None:
        return None
    return start, start + timedelta(days=1)


def _iso_date(m: re.Match[str], now: datetime) -> Window | None:
    start = _safe_date(int(m.group("year")), int(m.group("mm")), int(m.group("dd")))
    return None if start is None else (start, start + timedelta(days=1))


def _year(m: re.Match[str], now: datetime) -> Window:
    start = datetime(int(m.group("year")), 1, 1, tzinfo=timezone.utc)
    return start, start.replace(year=start.year + 1)


def _last_or_previous(m: re.Match[str], now: datetime) -> Window:
    unit = (m.group("unit") or m.group("unit2")).lower()
    current = _unit_start(now, unit)
    return _shift(current, unit, -1), current


_WINDOWS: list[tuple[re.Pattern[str], Callable[[re.Match[str], datetime], Window | None]]] = [
    (_rx(r"(?P<year>\d{4})-(?P<mm>\d\d)-(?P<dd>\d\d)"), _iso_date),
    (_rx(r"(?:on )?" + _MONTH + r" " + _DAY + r"(?:,? " + _YEAR + r")?"), _date),
    (_rx(r"(?:on )?(?:the )?" + _DAY + r"(?: of)? " + _MONTH + r"(?:,? " + _YEAR + r")?"), _date),
    (_rx(r"(?:the )?day before yesterday|yesterday"), _yesterday),
    (_rx(r"last night"), _last_night),
    # Not "tonight": queries name it for what is to come ("a film to watch tonight").
    (_rx(r"today|this (?:morning|afternoon|evening)|earlier today"), _today),
    (_rx(r"the other day"), _other_day),
    (_rx(_NUMBER + r" " + _UNIT + r" ago"), _ago),
    (
        _rx(r"(?:(?:in|over|during|within) )?the (?:past|last) (?:" + _NUMBER + r" )?" + _UNIT),
        _past_n,
    ),
    (_rx(r"(?:in the )?past (?P<unit>week|month|year)"), _past_n),
    (_rx(r"this (?P<unit>week|month|year)"), _this_unit),
    (
        _rx(r"last (?P<unit>week|month|year)|(?:the )?previous (?P<unit2>week|month|year)"),
        _last_or_previous,
    ),
    # A weekday needs "last", "this past" or "on", and not a habit ("on Saturday
    # mornings", "Sunday mass" name no single day).
    (
        _rx(
            r"(?:last|this past|on) "
            + _WEEKDAY
            + r"(?! ?(?:s|mornings|afternoons|evenings|nights)\b)"
        ),
        _weekday,
    ),
    # A month alone needs a word before it or a year after it: "May" is also a verb,
    # "Jan" a name.
    (
        _rx(
            r"(?:(?P<prefix>in|during|last|this|since|early|late) )?"
            + _MONTH_NAME
            + r"(?: (?:of )?"
            + _YEAR
            + r")?"
        ),
        _month,
    ),
    (_rx(r"in " + _YEAR), _year),
]

_ANCHOR = re.compile(
    r"(?<![\w-])(?P<kind>before|after|since) (?P<anchor>(?:i|we|my|our|he|she|they)\b[^,.;?!]*)",
    re.IGNORECASE,
)
_ORDER = [(_rx(_OLDEST), "oldest"), (_rx(_NEWEST), "newest")]


def _stamp(moment: datetime | None) -> float | None:
    return None if moment is None else moment.timestamp()


def find_time_phrase(query: str, now: float) -> TimePhrase | None:
    """The first time phrase of ``query`` (a window before an anchor before an order
    word), resolved against ``now`` (epoch seconds); None when it names no time."""
    moment = datetime.fromtimestamp(now, tz=timezone.utc)
    best: tuple[int, TimePhrase] | None = None
    for pattern, resolve in _WINDOWS:
        for match in pattern.finditer(query):
            if best is not None and match.start() >= best[0]:
                break
            window = resolve(match, moment)
            if window is None:
                continue
            start, end = window
            phrase = TimePhrase(match.group(0), "window", _stamp(start), _stamp(end))
            best = (match.start(), phrase)
            break
    if best is not None:
        return best[1]
    anchored = _ANCHOR.search(query)
    if anchored:
        kind = "after" if anchored.group("kind").lower() in {"after", "since"} else "before"
        return TimePhrase(anchored.group(0), kind, anchor=anchored.group("anchor").strip())
    for pattern, kind in _ORDER:
        found = pattern.search(query)
        if found:
            return TimePhrase(found.group(0), kind)
    return None
