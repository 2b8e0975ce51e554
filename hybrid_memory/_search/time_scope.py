"""What time a search is limited to or favours: the caller's ``after``/``before``, else
the time its query names (:mod:`hybrid_memory._search.time_phrases`), as one :class:`TimePlan`.

- ``after``/``before`` (the caller knows the window) always filter: every leg sees only
  memories created in ``[after, before)``, before its cut, through the filter grammar's
  ``created_at`` conditions. A phrase in the query is then not read.
- A window phrase ("last week") filters with ``time_phrases="narrow"`` and, with
  ``"boost"``, marks the memories inside it for a higher score. Boost beats narrow: on
  LoCoMo and LongMemEval a fifth to a third of the memories that answer a query naming
  a time were written outside the window it names ("which shoes did I clean last
  month?" answered by a turn a month after), and a filter loses them. Neither is the
  default (``"off"``): boost gains on LoCoMo but not on LongMemEval
  (docs/quality-study.md).
- "before/after <event>" is resolved by ``anchor_time``: the store's best keyword match
  for the event gives its time, which bounds the window on one side. No match: nothing
  is applied.
- "recently", "the first time": an order preference, applied by the search as a
  ranking by creation time fused with weight ``time_order_weight``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hybrid_memory._model.errors import InvalidInputError
from hybrid_memory._model.filters import Logical, Node, parse_filter
from hybrid_memory._model.results import TimeWindow
from hybrid_memory._model.times import to_datetime, to_timestamp
from hybrid_memory._search.time_phrases import ORDER_KINDS, find_time_phrase

#: Finds the memory that best matches an event phrase: ``(id, created_at)`` or None.
AnchorLookup = Callable[[str], "tuple[str, float] | None"]


@dataclass(frozen=True, slots=True)
class TimePlan:
    """``node``: the search filter with any time filter joined to it; ``boost``: the
    window (epoch seconds, open ends None) whose memories score higher; ``order``:
    ``"newest"``/``"oldest"`` or None; ``shown``: what the result reports."""

    node: Node | None
    boost: tuple[float | None, float | None] | None = None
    order: str | None = None
    shown: TimeWindow | None = None


def _stamp(value: datetime | str | float | None, field: str) -> float | None:
    return None if value is None else to_timestamp(value, field=field)


def _datetime(stamp: float | None) -> datetime | None:
    return None if stamp is None else to_datetime(stamp)


def _time_node(start: float | None, end: float | None) -> Node | None:
    conditions: list[dict[str, Any]] = []
    if start is not None:
        conditions.append({"created_at": {"$gte": start}})
    if end is not None:
        conditions.append({"created_at": {"$lt": end}})
    if not conditions:
        return None
    return parse_filter(conditions[0] if len(conditions) == 1 else {"$and": conditions})


def _joined(node: Node | None, extra: Node | None) -> Node | None:
    if extra is None:
        return node
    if node is None:
        return extra
    return Logical("$and", (node, extra))


def plan_time(
    text: str | None,
    now: float,
    node: Node | None,
    *,
    after: datetime | str | float | None,
    before: datetime | str | float | None,
    mode: str,
    anchor_time: AnchorLookup,
    order_weight: float = 0.0,
    to_now: bool = False,
) -> TimePlan:
    """The plan for one search. ``text`` is None for searches that read no phrase
    (``related``); ``mode`` is the ``time_phrases`` setting; ``order_weight`` the
    ``time_order_weight`` setting (0: an order word is reported, not applied);
    ``to_now`` the ``time_window_to_now`` setting."""
    start, end = _stamp(after, "after"), _stamp(before, "before")
    if start is not None or end is not None:
        if start is not None and end is not None and start >= end:
            raise InvalidInputError("after", "must be earlier than before")
        shown = TimeWindow(None, "window", _datetime(start), _datetime(end), "filter")
        return TimePlan(_joined(node, _time_node(start, end)), shown=shown)
    if text is None or mode == "off":
        return TimePlan(node)
    phrase = find_time_phrase(text, now)
    if phrase is None:
        return TimePlan(node)
    if phrase.kind in ORDER_KINDS:
        if order_weight <= 0:
            return TimePlan(node, shown=TimeWindow(phrase.phrase, phrase.kind, applied="none"))
        shown = TimeWindow(phrase.phrase, phrase.kind, applied="order")
        return TimePlan(node, order=phrase.kind, shown=shown)
    anchor_id = None
    low, high = phrase.start, phrase.end
    if phrase.anchor is not None:
        found = anchor_time(phrase.anchor)
        if found is None:
            shown = TimeWindow(phrase.phrase, "window", applied="none", anchor=phrase.anchor)
            return TimePlan(node, shown=shown)
        anchor_id, moment = found
        low, high = (moment, None) if phrase.kind == "after" else (None, moment)
    elif to_now and high is not None:
        high = max(high, now)
    applied = "filter" if mode == "narrow" else "boost"
    shown = TimeWindow(
        phrase.phrase,
        "window",
        _datetime(low),
        _datetime(high),
        applied,
        anchor=phrase.anchor,
        anchor_id=anchor_id,
    )
    if applied == "filter":
        return TimePlan(_joined(node, _time_node(low, high)), shown=shown)
    return TimePlan(node, boost=(low, high), shown=shown)


def favour_times(
    fused: dict[str, float],
    created: Mapping[str, float],
    boost_window: tuple[float | None, float | None] | None,
    order: str | None,
    *,
    boost: float,
    order_weight: float,
    rrf_k: float,
) -> None:
    """Raise the fused scores of memories created in the query's named window
    ``boost_window`` (times 1 + ``boost``), and fuse in the candidates ranked by creation
    time (``order``: newest or oldest first, weight ``order_weight``) when the query asks
    for an order."""
    if boost_window is not None and boost > 0:
        low, high = boost_window
        factor = 1.0 + boost
        for memory_id, when in created.items():
            if (
                memory_id in fused
                and (low is None or when >= low)
                and (high is None or when < high)
            ):
                fused[memory_id] *= factor
    if order is not None and order_weight > 0:
        sign = -1.0 if order == "newest" else 1.0
        by_time = sorted((i for i in fused if i in created), key=lambda i: (sign * created[i], i))
        for rank, memory_id in enumerate(by_time, start=1):
            fused[memory_id] += order_weight / (rrf_k + rank)
