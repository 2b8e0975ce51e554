"""A memory longer than the embedding model reads, through a real store (the default
model, real Chroma, real SQLite FTS5): a long chat turn whose opening is about something
near the question and whose tail repeats the question's words no longer outranks a short
memory that answers it; ``long_memory_window=0`` ranks as before."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hybrid_memory import HybridMemory

pytestmark = pytest.mark.slow

OPENING = (
    "We spent the afternoon on the login of the Flask app: the login form, password "
    "hashing with bcrypt, the remember-me checkbox, the users table and the logout button, "
    "and the tests that log a user in and out. "
)
TAIL = (
    "Later you asked again how to configure the session timeout, and the session timeout "
    "came up, session timeout again. "
)
LONG = (OPENING * 8)[:1250] + " " + TAIL * 12  # its matches all past 1,200 characters
SHORT = (
    "Set PERMANENT_SESSION_LIFETIME to a timedelta and mark the session permanent so "
    "logged-in users expire after thirty minutes."
)
OTHERS = [
    "The budget for March includes rent, groceries and the gym membership.",
    "The essay's second paragraph needs a clearer thesis about urban gardens.",
    "Deploy the Flask app with gunicorn behind nginx, four workers; configure the timeout "
    "of each worker.",
    "Configure Flask's logging to write to a rotating file.",
    "The invoice model has a due date and a status field.",
    "Flask blueprints keep the admin pages apart from the public ones.",
]
QUESTION = "How do I configure the session timeout in Flask?"


@pytest.fixture(scope="module")
def store() -> Iterator[HybridMemory]:
    with HybridMemory() as memory:
        memory.add(LONG, id="long")
        memory.add(SHORT, id="short")
        for number, text in enumerate(OTHERS):
            memory.add(text, id=f"other-{number}")
        yield memory


def order(memory: HybridMemory) -> list[str]:
    return [hit.id for hit in memory.search(QUESTION, k=8)]


def test_the_short_answer_outranks_the_long_turn_repeating_the_words(
    store: HybridMemory,
) -> None:
    ranked = order(store)
    assert ranked.index("short") < ranked.index("long")
    hits = {hit.id: hit for hit in store.search(QUESTION, k=8)}
    assert hits["long"].ranks["keyword"] == 1  # the keyword leg still ranks it first


def test_without_the_window_the_long_turn_outranks_it(store: HybridMemory) -> None:
    ranked = order(store.with_settings(long_memory_window=0))
    assert ranked.index("long") < ranked.index("short")


def test_a_window_longer_than_every_memory_changes_nothing(store: HybridMemory) -> None:
    off = store.with_settings(long_memory_window=0).search(QUESTION, k=8)
    wide = store.with_settings(long_memory_window=len(LONG)).search(QUESTION, k=8)
    assert [(h.id, h.fused_score) for h in wide] == [(h.id, h.fused_score) for h in off]
