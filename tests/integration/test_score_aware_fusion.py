"""Score-aware fusion through a real store (real SQLite FTS5, real Chroma):
``keyword_score_lift`` / ``vector_score_lift`` raise each hit's RRF share by its leg
score min-max normalised over the leg's candidates, and 0 (the default) is plain RRF."""

from __future__ import annotations

from typing import Any

import pytest

from hybrid_memory import HybridMemory, InvalidInputError
from tests.conftest import HashEmbedding

TEXTS = {
    "strong": "zebra zebra zebra: the zebra herd crossed the zebra plains",
    "weak": "a long note about many animals of the savanna, lions, giraffes, one zebra, "
    "elephants, buffalo, hyenas, wild dogs and the birds that follow them",
    "other1": "the weather in the mountains was cold and clear",
    "other2": "a recipe for bread with rye flour and caraway",
    "other3": "notes from the meeting about the budget for next year",
}


def store(**settings: Any) -> HybridMemory:
    memory = HybridMemory(embedding=HashEmbedding(), embedding_name="test-hash-64", **settings)
    for memory_id, text in TEXTS.items():
        memory.add(text, id=memory_id)
    return memory


def by_id(memory: HybridMemory, query: str) -> dict[str, Any]:
    return {hit.id: hit for hit in memory.search(query, k=5)}


def test_the_default_is_plain_rrf() -> None:
    with store() as memory:
        plain = by_id(memory, "zebra")
        same = by_id(memory.with_settings(keyword_score_lift=0.0, vector_score_lift=0.0), "zebra")
        assert {i: h.fused_score for i, h in plain.items()} == {
            i: h.fused_score for i, h in same.items()
        }


def test_keyword_lift_adds_its_formula_to_the_keyword_leader_only() -> None:
    with store() as memory:
        plain = by_id(memory, "zebra")
        lifted = by_id(memory.with_settings(keyword_score_lift=1.0), "zebra")
        # two keyword hits: the leader normalises to 1, the last to 0
        assert plain["strong"].ranks["keyword"] == 1 and plain["weak"].ranks["keyword"] == 2
        assert plain["strong"].scores["keyword"] > plain["weak"].scores["keyword"]
        # alpha 0.5 at this size, no tag matched: the keyword leg's weight is 0.5, k 60
        expected = plain["strong"].fused_score + 0.5 * 1.0 / (60 + 1)
        assert lifted["strong"].fused_score == pytest.approx(expected)
        assert lifted["weak"].fused_score == pytest.approx(plain["weak"].fused_score)
        for memory_id in ("other1", "other2", "other3"):
            if memory_id in plain:
                assert lifted[memory_id].fused_score == pytest.approx(plain[memory_id].fused_score)


def test_vector_lift_raises_the_vector_leader_most_and_the_vector_tail_not_at_all() -> None:
    with store() as memory:
        plain = memory.search("zebra", k=5)
        lifted = by_id(memory.with_settings(vector_score_lift=2.0), "zebra")
        vector_order = sorted(
            (h for h in plain if "vector" in h.ranks), key=lambda h: h.ranks["vector"]
        )
        leader, tail = vector_order[0], vector_order[-1]
        assert lifted[leader.id].fused_score == pytest.approx(
            leader.fused_score + 0.5 * 2.0 / (60 + leader.ranks["vector"])
        )
        assert lifted[tail.id].fused_score == pytest.approx(tail.fused_score)


def test_the_lifts_come_from_the_environment_and_refuse_negative_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HYBRID_MEMORY_KEYWORD_SCORE_LIFT", "0.5")
    with store() as memory:
        assert memory.settings.keyword_score_lift == 0.5
    monkeypatch.setenv("HYBRID_MEMORY_KEYWORD_SCORE_LIFT", "-1")
    with pytest.raises(InvalidInputError, match="HYBRID_MEMORY_KEYWORD_SCORE_LIFT"):
        store()
