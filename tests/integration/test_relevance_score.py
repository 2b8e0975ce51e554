"""Hit.score is a relevance in [0, 1] users can threshold, in the fused order; the RRF
value stays as Hit.fused_score. With the real default model (all-MiniLM-L6-v2)."""

from __future__ import annotations

import pytest

from hybrid_memory import HybridMemory

pytestmark = pytest.mark.slow

FACTS = [
    "Alice prefers dark mode in every editor",
    "The cat sleeps on the warm windowsill",
    "Quarterly revenue grew by twelve percent",
    "The standup meeting moved to Thursday at 10",
    "Bob is allergic to peanuts",
]


@pytest.fixture(scope="module")
def store() -> HybridMemory:
    memory = HybridMemory()
    memory.add_many(FACTS)
    return memory


def test_a_near_exact_match_scores_close_to_one(store: HybridMemory) -> None:
    hits = store.search("Alice prefers dark mode in every editor")
    assert hits[0].text == FACTS[0]
    assert hits[0].score > 0.9
    hits = store.search("does alice like dark mode?")
    assert hits[0].text == FACTS[0] and hits[0].score > 0.5


def test_a_paraphrase_without_shared_words_scores_its_cosine(store: HybridMemory) -> None:
    hits = store.search("earnings went up", alpha=1.0)
    assert hits[0].text == FACTS[2]
    assert hits[0].score == pytest.approx(max(0.0, hits[0].scores["vector"]))
    assert hits[0].score > 0.3


def test_unrelated_memories_score_low(store: HybridMemory) -> None:
    hits = store.search("the orbit of Jupiter's moons")
    assert hits and all(h.score < 0.3 for h in hits)


def test_an_unrelated_memory_scores_low_even_alone() -> None:
    # Ranked first by the vector leg (it is all there is): rank-based fusion alone
    # cannot say it is unrelated; its relevance does.
    with HybridMemory() as memory:
        memory.add("Bob is allergic to peanuts")
        hit = memory.search("the orbit of Jupiter's moons")[0]
        assert hit.ranks == {"vector": 1}
        assert hit.score < 0.3
        exact = memory.search("Bob is allergic to peanuts")[0]
        assert exact.score > 0.9


def test_scores_keep_the_fused_order(store: HybridMemory) -> None:
    for query in ["what does alice like", "meeting time", "peanut allergy", "cat", "money"]:
        hits = store.search(query, k=5)
        fused = [h.fused_score for h in hits]
        assert fused == sorted(fused, reverse=True)
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
        assert all(0.0 <= s <= 1.0 for s in scores)
        # The first hit's relevance is its own evidence: its cosine or its coverage.
        assert hits[0].score >= max(0.0, hits[0].scores.get("vector", 0.0)) - 1e-9


def test_coverage_compares_words_as_the_keyword_index_stems_them(store: HybridMemory) -> None:
    # "sleeping cats" shares no exact word with "The cat sleeps ...", but the Porter
    # stems (cat, sleep) match: full coverage, as the keyword leg itself matches it.
    hits = store.search("sleeping cats", alpha=0.0)
    assert hits[0].text == FACTS[1]
    assert hits[0].score == 1.0


def test_fallback_without_the_vector_leg_scores_by_coverage() -> None:
    class Failing:
        def __call__(self, texts: list[str]) -> list[list[float]]:
            if texts == ["Bob peanuts"]:
                raise RuntimeError("embedding service down")
            return [[1.0, float(len(t))] for t in texts]

    # Its vectors all point nearly one way: collapsed, the two would be one hit.
    with HybridMemory(embedding=Failing(), collapse_similar=False) as memory:
        memory.add_many(["Bob is allergic to peanuts", "Bob likes tea"])
        result = memory.search("Bob peanuts")
        assert result.fallback_mode
        assert result[0].text == "Bob is allergic to peanuts" and result[0].score == 1.0
        assert result[1].score == 0.5


def test_coverage_comes_from_the_keyword_index_and_agrees_with_tokenising_the_hits(
    store: HybridMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Which query words a hit holds is read from the keyword index's postings: only the
    query's words are tokenised, not every hit's. Tokenising the hits instead (what a
    search does for hits the postings cannot tell about) gives the same scores."""
    from hybrid_memory._keyword.index import KeywordIndex

    asked: list[list[str]] = []
    terms = KeywordIndex.terms

    def recorded(self: KeywordIndex, words: list[str]) -> list[tuple[str, ...]]:
        asked.append(list(words))
        return terms(self, words)

    monkeypatch.setattr(KeywordIndex, "terms", recorded)
    queries = ["sleeping cats on windowsills", "Alice dark editor", "revenue twelve"]
    from_postings = [store.search(q, k=5) for q in queries]
    assert all(len(hits) == 5 for hits in from_postings)
    assert all(len(words) <= 4 for words in asked)  # the query's words only
    assert any(0.0 < h.score < 1.0 for hits in from_postings for h in hits)

    monkeypatch.setattr(KeywordIndex, "terms_held", lambda self, terms, ids: {})
    tokenised = [store.search(q, k=5) for q in queries]
    assert any(len(words) > 4 for words in asked[-3:])  # the hits' words were asked
    for a, b in zip(from_postings, tokenised, strict=True):
        assert [(h.id, h.score) for h in a] == [(h.id, h.score) for h in b]
