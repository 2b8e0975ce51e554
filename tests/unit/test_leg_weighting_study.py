"""The pure parts of ``benchmarks/leg_weighting_study.py`` do what docs/quality-study.md
says they measured: score-aware RRF, leg confidence, the advice word list, session
neighbours and session diversity."""

from __future__ import annotations

import pytest

from benchmarks.leg_weighting_study import (
    ASKING_ADVICE,
    Legs,
    Sessions,
    convex,
    gap_confidence,
    order,
    rrf,
    session_diverse,
    with_neighbours,
)
from hybrid_memory._search.fusion import reciprocal_rank_fusion, score_lifts


def legs() -> Legs:
    vector = [("a", 0.9), ("b", 0.5), ("c", 0.1)]
    keyword = [("b", 12.0), ("d", 3.0), ("a", 2.0)]
    return Legs(vector=vector, keyword=keyword, tag=[], alpha=0.4, tags=0)


def test_the_studys_score_aware_rrf_is_the_engines() -> None:
    found = legs()
    study = rrf(found, 0.4, 0.5, ("keyword",))
    engine = reciprocal_rank_fusion(
        {"vector": ["a", "b", "c"], "keyword": ["b", "d", "a"]},
        {"vector": 0.4, "keyword": 0.6},
        60,
        {"keyword": score_lifts([12.0, 3.0, 2.0], 0.5)},
    )
    assert study == pytest.approx(engine)
    assert rrf(found, 0.4) == pytest.approx(
        reciprocal_rank_fusion(
            {"vector": ["a", "b", "c"], "keyword": ["b", "d", "a"]},
            {"vector": 0.4, "keyword": 0.6},
        )
    )


def test_the_studys_convex_fusion_weighs_min_max_normalised_scores() -> None:
    fused = convex(legs(), 0.4)
    # vector: a 1, b 0.5, c 0; keyword: b 1, d 0.1, a 0
    assert fused == pytest.approx({"a": 0.4, "b": 0.4 * 0.5 + 0.6, "c": 0.0, "d": 0.06})
    flat = Legs(vector=[("a", 0.3), ("b", 0.3)], keyword=[], tag=[], alpha=0.4, tags=0)
    assert convex(flat, 0.4) == pytest.approx({"a": 0.4, "b": 0.4})  # no spread: full weight


def test_gap_confidence_is_the_share_of_the_spread_within_the_head() -> None:
    hits = [(str(i), float(20 - i)) for i in range(20)]  # 20, 19, ..., 1
    assert gap_confidence(hits, head=10) == pytest.approx(9 / 19)
    assert gap_confidence(hits[:5], head=10) == 0.0


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        ("Can you recommend some resources for video editing?", True),
        ("Could you suggest a hotel for my trip to Miami?", True),
        ("My kitchen is a mess again. Any tips for keeping it clean?", True),
        ("What should I cook tonight?", True),
        ("What did you recommend for my sore back last time?", False),
        ("Remind me of the hotel you suggested in Miami.", False),
        ("How many books did I read in March?", False),
    ],
)
def test_the_advice_words_catch_asking_now_not_advice_given_before(
    question: str, asks: bool
) -> None:
    assert bool(ASKING_ADVICE.search(question)) is asks


def sessions() -> Sessions:
    # session s1: t0 t1 t2 t3; session s2: u0 u1
    of = {"t0": ("s1", 0), "t1": ("s1", 1), "t2": ("s1", 2), "t3": ("s1", 3)}
    of |= {"u0": ("s2", 0), "u1": ("s2", 1)}
    return Sessions(of, {"s1": ["t0", "t1", "t2", "t3"], "s2": ["u0", "u1"]})


def test_neighbours_within_the_window_are_lifted_by_a_share_of_the_hit() -> None:
    fused = {"t1": 1.0, "u1": 0.5}
    lifted = with_neighbours(fused, sessions(), 0.1, 1)
    assert lifted["t0"] == pytest.approx(0.1) and lifted["t2"] == pytest.approx(0.1)
    assert "t3" not in lifted  # two turns away
    assert lifted["u0"] == pytest.approx(0.05)
    assert lifted["t1"] == 1.0 and lifted["u1"] == 0.5  # hits themselves unchanged


def test_session_diversity_lowers_a_sessions_later_hits() -> None:
    fused = {"t0": 1.0, "t1": 0.95, "u0": 0.9}
    assert order(fused) == ["t0", "t1", "u0"]
    assert session_diverse(fused, sessions(), 0.9) == ["t0", "u0", "t1"]
