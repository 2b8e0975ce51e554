"""The relevance score: keyword coverage, evidence, and the monotone pass along the fused
order (hybrid_memory._search.relevance)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hybrid_memory._search.relevance import evidence, keyword_coverage, monotone_relevance


def test_coverage_is_the_share_of_query_words_found() -> None:
    text = {"alic", "prefer", "dark", "mode"}
    assert keyword_coverage([("alic",), ("dark",)], text) == 1.0
    assert keyword_coverage([("alic",), ("light",)], text) == 0.5
    assert keyword_coverage([("theme",)], text) == 0.0


def test_a_word_of_several_terms_counts_only_when_all_are_there() -> None:
    # A trigram tokenizer turns "dark" into "dar", "ark".
    assert keyword_coverage([("dar", "ark")], {"dar", "ark", "mod"}) == 1.0
    assert keyword_coverage([("dar", "ark")], {"dar"}) == 0.0


def test_a_query_without_words_covers_nothing() -> None:
    assert keyword_coverage([], {"a"}) == 0.0
    assert keyword_coverage([()], {"a"}) == 0.0  # a word the tokenizer drops entirely


@pytest.mark.parametrize(
    ("cosine", "coverage", "expected"),
    [
        (0.8, 0.0, 0.8),  # a paraphrase: no shared word
        (0.3, 1.0, 1.0),  # an exact name with a middling cosine
        (-0.2, 0.0, 0.0),  # opposite vectors are no evidence, not negative evidence
        (None, 0.5, 0.5),  # not returned by the vector leg
        (1.0000001, 0.0, 1.0),  # float noise above 1 is clamped
    ],
)
def test_evidence_is_the_stronger_leg(
    cosine: float | None, coverage: float, expected: float
) -> None:
    assert evidence(cosine, coverage) == pytest.approx(expected)


def test_relevance_is_the_running_minimum() -> None:
    assert monotone_relevance([0.9, 0.95, 0.4, 0.6, 0.1]) == [0.9, 0.9, 0.4, 0.4, 0.1]
    assert monotone_relevance([]) == []


_EVIDENCE = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@given(st.lists(_EVIDENCE, max_size=40))
def test_relevance_keeps_the_fused_order_and_stays_in_range(evidences: list[float]) -> None:
    scores = monotone_relevance(evidences)
    assert len(scores) == len(evidences)
    assert all(0.0 <= s <= 1.0 for s in scores)
    # Sorting by the score (stable) gives back the fused order exactly.
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    assert order == list(range(len(scores)))
    # Never more than the hit's own evidence, nor than any hit ranked above it.
    assert all(s <= e for s, e in zip(scores, evidences, strict=True))
    assert all(scores[i] == min(evidences[: i + 1]) for i in range(len(scores)))


@given(st.lists(_EVIDENCE, min_size=1, max_size=40), st.integers(min_value=1, max_value=40))
def test_a_hits_relevance_does_not_depend_on_k(evidences: list[float], k: int) -> None:
    assert monotone_relevance(evidences[:k]) == monotone_relevance(evidences)[:k]


@given(
    st.one_of(st.none(), st.floats(min_value=-1.0, max_value=1.0)),
    st.floats(min_value=0.0, max_value=1.0),
)
def test_evidence_is_in_range_and_at_least_each_leg(cosine: float | None, coverage: float) -> None:
    value = evidence(cosine, coverage)
    assert 0.0 <= value <= 1.0
    assert value >= coverage and value >= max(0.0, cosine or 0.0)
