"""What counts as two memories saying nearly the same thing
(hybrid_memory._model.near_duplicates): the rule shared by the write report and the
search collapse."""

from __future__ import annotations

import pytest

from hybrid_memory._keyword.bm25 import STOPWORDS, query_words
from hybrid_memory._model.near_duplicates import NearDuplicateRule, comparable_words
from hybrid_memory._model.settings import HybridMemorySettings

RULE = NearDuplicateRule(cosine=0.94, words_cosine=0.6, extra_words=5)


def words(text: str) -> frozenset[str]:
    return comparable_words(query_words(text, drop_stopwords=False), STOPWORDS)


def test_the_rule_comes_from_the_settings() -> None:
    rule = NearDuplicateRule.of(
        HybridMemorySettings(similar_cosine=0.9, similar_words_cosine=0.7, similar_extra_words=2)
    )
    assert rule == NearDuplicateRule(0.9, 0.7, 2)
    assert rule.floor == 0.7


def test_a_close_enough_cosine_is_enough_whatever_the_words() -> None:
    assert RULE.holds(0.95, words("Alice loves tea"), words("tea is what Alice adores"))
    assert not RULE.holds(0.93, words("Alice loves tea"), words("tea is what Alice adores"))


@pytest.mark.parametrize(
    "restated",
    [
        "2026-10-13: Alice is allergic to peanuts",
        "Alice is allergic to peanuts (confirmed again)",
        "Alice is allergic to peanuts, per the chat on 2026-10-13.",
        "to peanuts Alice is allergic",
    ],
)
def test_a_restatement_keeps_every_word_and_adds_few(restated: str) -> None:
    original = words("Alice is allergic to peanuts")
    assert RULE.holds(0.61, original, words(restated))
    assert RULE.holds(0.61, words(restated), original)  # either one stored first
    assert not RULE.holds(0.59, original, words(restated))  # too far apart still


def test_a_longer_memory_saying_more_is_not_a_restatement() -> None:
    short = words("Alice likes hiking")
    longer = words("Alice likes hiking with her two dogs in the Alps every summer holiday")
    assert not RULE.holds(0.8, short, longer)
    assert not RULE.holds(0.8, words("Alice likes hiking"), words("Alice likes sailing"))


def test_a_negation_is_never_a_near_duplicate() -> None:
    said = words("Alice is allergic to peanuts")
    for denied in ("Alice is not allergic to peanuts", "Alice isn't allergic to peanuts"):
        assert not RULE.holds(0.99, said, words(denied))
    both = words("Alice is not allergic to peanuts (confirmed again)")
    assert RULE.holds(0.7, words("Alice is not allergic to peanuts"), both)


def test_memories_without_content_words_only_match_by_cosine() -> None:
    assert words("Me too!") == frozenset()
    assert not RULE.holds(0.9, words("Me too!"), words("Me too, me too!"))
    assert RULE.holds(0.97, words("Me too!"), words("Me too, me too!"))


def test_comparable_words_fold_case_and_keep_negations() -> None:
    assert words("Alice is NOT in Paris") == {"alice", "not", "paris"}


def test_two_memories_naming_different_numbers_are_two_facts() -> None:
    assert not RULE.holds(0.99, words("note 07 about coffee"), words("note 09 about coffee"))
    assert not RULE.holds(
        0.98, words("The limit is 600 a minute"), words("The limit is 500 a minute")
    )
    # A number only one of them has is a date put in front, or a detail added.
    assert RULE.holds(
        0.7,
        words("Alice is allergic to peanuts"),
        words("2026-10-13: Alice is allergic to peanuts"),
    )
