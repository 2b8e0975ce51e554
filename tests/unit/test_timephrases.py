"""The time phrases a query may name, read against its ``now`` (pure: no store)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from hybrid_memory._search.time_phrases import find_time_phrase

# Wednesday 15 May 2024, 10:00 UTC.
NOW = datetime(2024, 5, 15, 10, 0, tzinfo=timezone.utc).timestamp()


def _day(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()


# query, the phrase found, the window's start and end (ISO, UTC).
WINDOWS = [
    ("what did I cook last week?", "last week", "2024-05-06", "2024-05-13"),
    ("what did I say yesterday", "yesterday", "2024-05-14", "2024-05-15"),
    ("the day before yesterday we met", "the day before yesterday", "2024-05-13", "2024-05-14"),
    ("what did I eat this morning", "this morning", "2024-05-15", "2024-05-15T10:00"),
    ("any plans today?", "today", "2024-05-15", "2024-05-15T10:00"),
    ("where was I last night", "last night", "2024-05-14T12:00", "2024-05-15T06:00"),
    ("what did I read this week", "this week", "2024-05-13", "2024-05-15T10:00"),
    ("books I read this month", "this month", "2024-05-01", "2024-05-15T10:00"),
    ("what happened last month", "last month", "2024-04-01", "2024-05-01"),
    ("the trips I took last year", "last year", "2023-01-01", "2024-01-01"),
    ("what did we plan this year", "this year", "2024-01-01", "2024-05-15T10:00"),
    ("what I bought 3 days ago", "3 days ago", "2024-05-12", "2024-05-13"),
    ("a film I saw five days ago", "five days ago", "2024-05-10", "2024-05-11"),
    ("what did I buy a week ago", "a week ago", "2024-05-04T22:00", "2024-05-11T22:00"),
    ("a couple of weeks ago", "a couple of weeks ago", "2024-04-27T22:00", "2024-05-04T22:00"),
    ("in the past two weeks", "in the past two weeks", "2024-05-01T10:00", "2024-05-15T10:00"),
    ("over the last 3 days", "over the last 3 days", "2024-05-12T10:00", "2024-05-15T10:00"),
    ("the past month", "the past month", "2024-04-15T10:00", "2024-05-15T10:00"),
    ("in the past year", "in the past year", "2023-05-15T10:00", "2024-05-15T10:00"),
    ("the other day you said", "the other day", "2024-05-05", "2024-05-14"),
    ("what did I do on Sunday?", "on Sunday", "2024-05-12", "2024-05-13"),
    ("last Friday's dinner", "last Friday", "2024-05-10", "2024-05-11"),
    ("last Wednesday", "last Wednesday", "2024-05-08", "2024-05-09"),  # not today
    ("what did I do in March", "in March", "2024-03-01", "2024-04-01"),
    ("gigs in May", "in May", "2024-05-01", "2024-06-01"),  # this month: it has begun
    ("trips in June", "in June", "2023-06-01", "2023-07-01"),  # the latest June begun
    ("last March", "last March", "2024-03-01", "2024-04-01"),
    ("last May", "last May", "2023-05-01", "2023-06-01"),
    ("in March 2022", "in March 2022", "2022-03-01", "2022-04-01"),
    ("September 2022 was busy", "September 2022", "2022-09-01", "2022-10-01"),
    ("on May 3rd", "on May 3rd", "2024-05-03", "2024-05-04"),
    ("March 15th", "March 15th", "2024-03-15", "2024-03-16"),
    ("on 1 February, 2023", "on 1 February, 2023", "2023-02-01", "2023-02-02"),
    ("the 3rd of June", "the 3rd of June", "2023-06-03", "2023-06-04"),  # not yet this year
    ("on Dec 24", "on Dec 24", "2023-12-24", "2023-12-25"),
    ("what happened on 2023-05-03", "2023-05-03", "2023-05-03", "2023-05-04"),
    ("races I ran in 2022", "in 2022", "2022-01-01", "2023-01-01"),
]


@pytest.mark.parametrize(("query", "phrase", "start", "end"), WINDOWS)
def test_window_phrases(query: str, phrase: str, start: str, end: str) -> None:
    found = find_time_phrase(query, NOW)
    assert found is not None, query
    assert (found.phrase, found.kind) == (phrase, "window")
    assert found.start == pytest.approx(_day(start)), found.describe()
    assert found.end == pytest.approx(_day(end)), found.describe()


def test_months_ago_is_a_window_of_one_month_around_the_point() -> None:
    found = find_time_phrase("the concert two months ago", NOW)
    assert found is not None and found.phrase == "two months ago"
    assert found.start is not None and found.end is not None
    middle = (found.start + found.end) / 2
    assert middle == pytest.approx(_day("2024-03-15T10:00"), abs=86_400)
    assert found.end - found.start == pytest.approx(30.44 * 86_400, rel=0.01)


@pytest.mark.parametrize(
    ("query", "phrase", "kind"),
    [
        ("what have I been reading recently?", "recently", "newest"),
        ("where do I live now?", "now", "newest"),
        ("what is my current job?", "my current", "newest"),
        ("the latest phone I bought", "the latest", "newest"),
        ("these days I mostly cycle", "these days", "newest"),
        ("when did I go skiing for the first time?", "for the first time", "oldest"),
        ("what did I think of it at first", "at first", "oldest"),
        ("which city did I originally come from", "originally", "oldest"),
    ],
)
def test_order_phrases_carry_no_window(query: str, phrase: str, kind: str) -> None:
    found = find_time_phrase(query, NOW)
    assert found is not None
    assert (found.phrase, found.kind) == (phrase, kind)
    assert found.start is None and found.end is None


@pytest.mark.parametrize(
    ("query", "kind", "anchor"),
    [
        ("where did I work before I moved to Berlin?", "before", "I moved to Berlin"),
        ("what did we buy after we got married", "after", "we got married"),
        ("books I read since my surgery", "after", "my surgery"),
    ],
)
def test_anchor_phrases_name_the_event(query: str, kind: str, anchor: str) -> None:
    found = find_time_phrase(query, NOW)
    assert found is not None
    assert (found.kind, found.anchor) == (kind, anchor)
    assert found.start is None and found.end is None


@pytest.mark.parametrize(
    "query",
    [
        "what does alice like?",
        "I may go to the gym",  # "may" the verb
        "Jan said hello",  # a name, not January
        "what time do I wake up on Saturday mornings?",  # a habit, not a day
        "the Sunday mass at St. Mary's",
        "a film to watch tonight",  # what is to come
        "which came before, the bike or the car?",  # no event after "before"
        "the 1990s",
    ],
)
def test_no_time_named(query: str) -> None:
    assert find_time_phrase(query, NOW) is None


def test_the_earliest_phrase_wins_and_a_window_beats_an_order_word() -> None:
    found = find_time_phrase("recently, what did I do last week and in March?", NOW)
    assert found is not None and found.phrase == "last week"


def test_an_impossible_date_is_no_window() -> None:
    assert find_time_phrase("on February 30", NOW) is None


def test_describe_shows_the_reading() -> None:
    found = find_time_phrase("last week", NOW)
    assert found is not None
    assert found.describe() == "'last week' -> 2024-05-06..2024-05-13"
