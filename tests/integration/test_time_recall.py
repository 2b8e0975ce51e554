"""Time-aware recall on a real store: ``after``/``before`` windows, and the times a query
names ("last week", "before I moved") read against its ``now``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest

from hybrid_memory import HybridMemory, InvalidInputError, TimeWindow
from tests.conftest import HashEmbedding

# Wednesday 15 May 2024, 10:00 UTC.
NOW = datetime(2024, 5, 15, 10, 0, tzinfo=timezone.utc)
LAST_WEEK = NOW - timedelta(days=6)  # Thursday 9 May: in "last week" (6-12 May)
MARCH = datetime(2024, 3, 20, 12, 0, tzinfo=timezone.utc)
JANUARY = datetime(2024, 1, 10, 9, 0, tzinfo=timezone.utc)

# Two near-identical memories about cooking, months apart, and a move between them.
MEMORIES = [
    {"id": "cook-jan", "text": "I cooked a lasagna for dinner with friends", "created_at": JANUARY},
    {"id": "move", "text": "I moved to Berlin for the new job", "created_at": MARCH},
    {
        "id": "cook-may",
        "text": "I cooked a lasagna for dinner with family",
        "created_at": LAST_WEEK,
    },
    {"id": "run", "text": "I ran ten kilometres along the river", "created_at": LAST_WEEK},
]


def _store(**settings: object) -> HybridMemory:
    """A store that reads time phrases (``time_phrases`` is off by default)."""
    settings = {"time_phrases": "boost", **settings}
    store = HybridMemory(embedding=HashEmbedding(), embedding_name="test-hash-64", **settings)
    store.add_many(MEMORIES)
    return store


@pytest.fixture
def store() -> Iterator[HybridMemory]:
    with _store() as opened:
        yield opened


def _ids(result: list) -> list[str]:
    return [hit.id for hit in result]


# --- after / before: the caller knows the window -----------------------------------------


def test_after_and_before_limit_every_leg(store: HybridMemory) -> None:
    result = store.search("cooked lasagna dinner", k=4, after="2024-05-01", before=NOW)
    assert _ids(result)[0] == "cook-may"
    assert "cook-jan" not in _ids(result) and "move" not in _ids(result)
    assert result.time_window == TimeWindow(
        None, "window", datetime(2024, 5, 1, tzinfo=timezone.utc), NOW, "filter"
    )
    only_before = store.search("cooked lasagna dinner", k=4, before=MARCH)
    assert _ids(only_before) == ["cook-jan"]
    # The window also holds against a phrase in the query: the caller's word wins.
    stated = store.search("lasagna last week", k=4, now=NOW, before=MARCH)
    assert _ids(stated) == ["cook-jan"] and stated.time_window is not None
    assert stated.time_window.phrase is None


def test_related_takes_a_window(store: HybridMemory) -> None:
    assert "cook-may" in _ids(store.related("cook-jan", k=3))
    later = store.related("cook-jan", k=3, after=MARCH)
    assert _ids(later)[0] == "cook-may" and set(_ids(later)) <= {"move", "cook-may", "run"}
    assert later.time_window is not None and later.time_window.start == MARCH
    assert "cook-may" not in _ids(store.related("cook-jan", k=3, before=MARCH))


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"after": NOW, "before": MARCH}, "after"),
        ({"after": NOW, "before": NOW}, "after"),
        ({"after": "last tuesday"}, "after"),
        ({"before": True}, "before"),
    ],
)
def test_a_bad_window_names_its_field(store: HybridMemory, kwargs: dict, field: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        store.search("lasagna", **kwargs)
    assert caught.value.field == field
    assert store.count() == len(MEMORIES)


# --- a time the query names -----------------------------------------------------------------


def test_a_time_phrase_boosts_the_memories_of_its_window(store: HybridMemory) -> None:
    # "friends" matches January's dinner better; "last week" is May's.
    query = "what did I cook with friends last week"
    plain = store.with_settings(time_phrases="off").search(query, k=4, now=NOW)
    assert plain.time_window is None
    assert _ids(plain)[0] == "cook-jan"
    boosted = store.search(query, k=4, now=NOW)
    assert boosted.time_window == TimeWindow(
        "last week",
        "window",
        datetime(2024, 5, 6, tzinfo=timezone.utc),
        datetime(2024, 5, 13, tzinfo=timezone.utc),
        "boost",
    )
    order = _ids(boosted)
    assert order[0] == "cook-may"
    # A boost, not a filter: the January dinner is still recalled.
    assert "cook-jan" in order
    # The same query a month later names another week: May's dinner is no longer in it.
    later = store.search(query, k=4, now=NOW + timedelta(days=30))
    assert later.time_window is not None and later.time_window.start is not None
    assert later.time_window.start > LAST_WEEK
    assert _ids(later)[0] == "cook-jan"


def test_a_time_phrase_narrows_recall_when_asked(store: HybridMemory) -> None:
    narrow = store.with_settings(time_phrases="narrow")
    result = narrow.search("what did I cook in January", k=4, now=NOW)
    assert _ids(result) == ["cook-jan"]
    assert result.time_window is not None and result.time_window.applied == "filter"
    assert result.time_window.phrase == "in January"
    march = narrow.search("what happened in March", k=4, now=NOW)
    assert _ids(march) == ["move"]


def test_before_an_event_is_read_from_the_store(store: HybridMemory) -> None:
    narrow = store.with_settings(time_phrases="narrow")
    result = narrow.search("what did I cook before I moved to Berlin", k=4, now=NOW)
    assert _ids(result) == ["cook-jan"]
    shown = result.time_window
    assert shown is not None
    assert (shown.anchor, shown.anchor_id, shown.end) == ("I moved to Berlin", "move", MARCH)
    after = narrow.search("what did I cook after I moved to Berlin", k=4, now=NOW)
    assert "cook-jan" not in _ids(after) and "cook-may" in _ids(after)
    # An event no memory mentions: nothing applied, and the result says so.
    unknown = narrow.search("what did I cook before I visited Zanzibar", k=4, now=NOW)
    assert unknown.time_window is not None and unknown.time_window.applied == "none"
    assert {"cook-jan", "cook-may"} <= set(_ids(unknown))


def test_order_words_prefer_newer_or_older_memories() -> None:
    with _store(time_order_weight=1.0) as store:
        newest = store.search("the lasagna I cooked recently", k=4, now=NOW)
        assert newest.time_window == TimeWindow("recently", "newest", applied="order")
        assert _ids(newest).index("cook-may") < _ids(newest).index("cook-jan")
        oldest = store.search("the lasagna I cooked for the first time", k=4, now=NOW)
        assert oldest.time_window is not None and oldest.time_window.kind == "oldest"
        assert _ids(oldest).index("cook-jan") < _ids(oldest).index("cook-may")


def test_time_phrases_are_off_by_default() -> None:
    with HybridMemory(embedding=HashEmbedding(), embedding_name="test-hash-64") as store:
        store.add_many(MEMORIES)
        assert store.search("what did I cook last week", k=4, now=NOW).time_window is None


def test_related_reads_no_phrase_from_the_memory_text(store: HybridMemory) -> None:
    store.add("I went hiking last week in the hills", id="hike", created_at=LAST_WEEK)
    assert store.related("hike", k=2).time_window is None


def test_the_retriever_passes_the_window() -> None:
    from hybrid_memory import HybridRetriever

    with _store() as store:
        retriever = HybridRetriever(memory=store, k=4, after=MARCH)
        assert "cook-jan" not in [d.id for d in retriever.invoke("cooked lasagna dinner")]
        docs = retriever.invoke("cooked lasagna dinner", after=None, before=MARCH)
        assert [d.id for d in docs] == ["cook-jan"]
