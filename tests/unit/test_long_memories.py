"""Memories longer than the embedding model reads: the share of a keyword hit's evidence
in the part the model read, and how much a feedback memory's vector counts. Words are
tokenized by a real SQLite FTS5 table with the index's default tokenizer."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import pytest

from hybrid_memory._model.settings import HybridMemorySettings
from hybrid_memory._search.feedback import rocchio
from hybrid_memory._search.long_memories import (
    QueryWordCounter,
    evidence,
    feedback_weight,
    read_share,
    window_share,
    window_shares,
)

WINDOW = 1200
FILLER = "The weather was mild and we walked along the river for an hour. "  # 65 characters


def fts5_terms(words: Sequence[str]) -> list[tuple[str, ...]]:
    """Each word's terms as the keyword index's default tokenizer makes them."""
    tokenizer = HybridMemorySettings.model_fields["keyword_tokenizer"].default
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(w, tokenize='{tokenizer}')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    conn.executemany("INSERT INTO t(rowid, w) VALUES (?, ?)", list(enumerate(words)))
    terms: list[list[str]] = [[] for _ in words]
    for term, doc in conn.execute("SELECT term, doc FROM v ORDER BY doc, offset"):
        terms[doc].append(term)
    conn.close()
    return [tuple(t) for t in terms]


def counter(*words: str) -> QueryWordCounter:
    return QueryWordCounter(list(words), fts5_terms)


def test_counts_each_query_word_as_the_index_stems_it_in_the_window_and_in_all() -> None:
    text = "Deploying the app. " + FILLER * 20 + "We deployed it; the deployment failed."
    in_window, in_whole = counter("deploy", "app").counts(text, WINDOW)
    # "deploying" and "deployed" stem to "deploy"; "deployment" does not
    assert in_window == [1, 1]
    assert in_whole == [2, 1]


def test_a_hit_whose_matches_lie_past_the_window_loses_its_share() -> None:
    long_text = FILLER * 20 + "session timeout " * 10  # 1,300 characters of filler first
    texts = {"long": long_text, "short": "set the session timeout"}
    mean = sum(len(t) for t in texts.values()) / len(texts)
    shares = window_shares(texts, counter("session", "timeout"), WINDOW, mean)
    assert shares == {"long": 0.0}  # the short one fits the window: left out, share 1


def test_a_long_hit_whose_matches_lie_in_its_opening_keeps_its_whole_share() -> None:
    text = "session timeout " * 3 + FILLER * 30
    shares = window_shares({"m": text}, counter("session", "timeout"), WINDOW, len(text))
    assert shares == {"m": 1.0}


def test_matches_on_both_sides_of_the_window_give_the_share_of_bm25_evidence_inside() -> None:
    text = "session " + FILLER * 20 + "session session timeout"
    mean = 800.0
    shares = window_shares({"m": text}, counter("session", "timeout"), WINDOW, mean)
    inside = evidence([1, 0], WINDOW, mean)
    whole = evidence([3, 1], len(text), mean)
    assert shares["m"] == pytest.approx(inside / whole)
    assert 0.0 < shares["m"] < 1.0


def test_window_share_is_one_within_the_window_or_without_matches() -> None:
    assert window_share([0], [3], WINDOW, WINDOW, 500.0) == 1.0  # fits the window
    assert window_share([0], [0], WINDOW, 5000, 500.0) == 1.0  # no query word at all
    assert window_share([2], [2], WINDOW, 5000, 500.0) == 1.0  # capped at 1


def test_a_zero_window_turns_the_shares_off() -> None:
    text = FILLER * 20 + "session timeout"
    assert window_shares({"m": text}, counter("session"), 0, len(text)) == {}


def test_feedback_weight_is_the_read_share_itself() -> None:
    assert feedback_weight(800, WINDOW) == 1.0
    assert feedback_weight(WINDOW, WINDOW) == 1.0
    assert feedback_weight(2400, WINDOW) == pytest.approx(0.5)
    assert feedback_weight(4800, WINDOW) == pytest.approx(0.25)
    assert feedback_weight(4800, 0) == 1.0  # window 0: off
    assert read_share(3600, WINDOW) == pytest.approx(1 / 3)


def test_a_feedback_vector_counting_less_pulls_the_query_less() -> None:
    query, near, far = [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]
    whole = rocchio(query, [near, far], 0.5)
    halved = rocchio(query, [near, far], 0.5, [1.0, 0.5])
    # centroid (0, 0.5, 0.25), still divided by two vectors: query + 0.5 x centroid
    expected = [1.0, 0.25, 0.125]
    norm = sum(x * x for x in expected) ** 0.5
    assert halved == pytest.approx([x / norm for x in expected])
    assert halved[2] < whole[2]
    assert rocchio(query, [near, far], 0.5, [1.0, 1.0]) == pytest.approx(whole)


def test_feedback_counts_must_be_one_share_per_vector() -> None:
    with pytest.raises(ValueError, match="counts"):
        rocchio([1.0, 0.0], [[0.0, 1.0]], 0.5, [1.0, 1.0])
    with pytest.raises(ValueError, match="counts"):
        rocchio([1.0, 0.0], [[0.0, 1.0]], 0.5, [1.5])
