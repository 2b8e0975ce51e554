"""The stats page's figures: how many memories, how they grew, which tags, which
namespaces. Every figure is a count the store answers (filtered counts run in its
keyword index), so the page never reads every memory."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from hybrid_memory import HybridMemory

#: Bucket widths tried in order: the first giving at most _MAX_BUCKETS buckets is used.
_UNITS = (
    ("hour", timedelta(hours=1), "%d %b %H:00"),
    ("day", timedelta(days=1), "%d %b"),
    ("week", timedelta(weeks=1), "%d %b %Y"),
    ("month", timedelta(days=30), "%b %Y"),
    ("year", timedelta(days=365), "%Y"),
)
_MAX_BUCKETS = 36
#: Tags counted one by one; a store with more shows the first ones (alphabetically).
MAX_TAGS_COUNTED = 300
TOP_TAGS = 25


@dataclass(frozen=True)
class Timeline:
    unit: str
    labels: list[str]
    counts: list[int]

    @property
    def cumulative(self) -> list[int]:
        total, out = 0, []
        for c in self.counts:
            total += c
            out.append(total)
        return out


@dataclass(frozen=True)
class StoreFigures:
    count: int
    tags: int
    timeline: Timeline
    top_tags: list[tuple[str, int]]
    tags_counted: int
    #: The namespaces directly under the view: (page parameter, name, memories).
    namespaces: list[tuple[str, str, int]]
    embedding: str
    oldest: datetime | None
    newest: datetime | None


def _floor(moment: datetime, unit: str) -> datetime:
    if unit == "hour":
        return moment.replace(minute=0, second=0, microsecond=0)
    day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    if unit == "week":
        return day - timedelta(days=day.weekday())
    if unit == "month":
        return day.replace(day=1)
    if unit == "year":
        return day.replace(month=1, day=1)
    return day


def _next(moment: datetime, unit: str, step: timedelta) -> datetime:
    if unit == "month":
        year, month = divmod(moment.month, 12)
        return moment.replace(year=moment.year + year, month=month + 1)
    if unit == "year":
        return moment.replace(year=moment.year + 1)
    return moment + step


def timeline(view: HybridMemory, oldest: datetime, newest: datetime) -> Timeline:
    """Memories created in each hour, day, week, month or year from ``oldest`` to
    ``newest`` (the smallest unit that fits the span in a few dozen bars)."""
    span = newest - oldest
    unit, step, fmt = next((u for u in _UNITS if span / u[1] < _MAX_BUCKETS), _UNITS[-1])
    labels: list[str] = []
    counts: list[int] = []
    start = _floor(oldest, unit)
    while start <= newest:
        end = _next(start, unit, step)
        where = {"$and": [{"created_at": {"$gte": start}}, {"created_at": {"$lt": end}}]}
        labels.append(start.strftime(fmt))
        counts.append(view.count(where))
        start = end
    return Timeline(unit, labels, counts)


def tag_counts(view: HybridMemory, limit: int = MAX_TAGS_COUNTED) -> list[tuple[str, int]]:
    """The first ``limit`` tags (alphabetically) with how many memories carry each, the
    most used first."""
    counted = [(t, view.count({"tags": {"$contains": t}})) for t in view.tags()[:limit]]
    counted.sort(key=lambda pair: (-pair[1], pair[0]))
    return counted


def figures(view: HybridMemory, namespaces: list[tuple[str, str]]) -> StoreFigures:
    """The stats page's figures for ``view``; ``namespaces``: those directly under it,
    as ``(page parameter, name)``."""
    count = view.count()
    oldest = newest = None
    first = view.list_memories(limit=1)
    last = view.list_memories(limit=1, newest_first=True)
    if first and last:
        oldest, newest = first[0].created_at, last[0].created_at
    line = (
        timeline(view, oldest, newest)
        if oldest is not None and newest is not None
        else Timeline("day", [], [])
    )
    names = view.tags()
    counted = tag_counts(view)
    spaces = [(param, name, view.namespace(name).count()) for param, name in namespaces]
    return StoreFigures(
        count=count,
        tags=len(names),
        timeline=line,
        top_tags=counted[:TOP_TAGS],
        tags_counted=min(len(names), MAX_TAGS_COUNTED),
        namespaces=spaces,
        embedding=view.embedder.name,
        oldest=oldest,
        newest=newest,
    )
