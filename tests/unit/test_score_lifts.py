"""Score-aware RRF (hybrid_memory._search.fusion.score_lifts and the ``multipliers`` of
reciprocal_rank_fusion): each hit's share times 1 + lift x its min-max normalised leg
score."""

from __future__ import annotations

import pytest

from hybrid_memory._search.fusion import reciprocal_rank_fusion, score_lifts


def test_lifts_are_one_plus_lift_times_the_min_max_normalised_score() -> None:
    assert score_lifts([10.0, 6.0, 2.0], 1.0) == [2.0, 1.5, 1.0]
    assert score_lifts([10.0, 6.0, 2.0], 0.5) == [1.5, 1.25, 1.0]


def test_zero_lift_is_plain_rrf() -> None:
    assert score_lifts([0.9, 0.5, 0.1], 0.0) == [1.0, 1.0, 1.0]
    rankings = {"vector": ["a", "b", "c"], "keyword": ["c", "a"]}
    weights = {"vector": 0.4, "keyword": 0.6}
    multipliers = {"vector": score_lifts([0.9, 0.5, 0.1], 0.0)}
    assert reciprocal_rank_fusion(rankings, weights, 60, multipliers) == pytest.approx(
        reciprocal_rank_fusion(rankings, weights, 60)
    )


def test_scores_that_do_not_spread_lift_every_hit_alike() -> None:
    assert score_lifts([3.0], 1.0) == [2.0]
    assert score_lifts([0.5, 0.5], 2.0) == [3.0, 3.0]
    assert score_lifts([], 1.0) == []


def test_negative_scores_normalise_the_same_way() -> None:
    # cosines can be negative; only their spread matters
    assert score_lifts([-0.1, -0.3, -0.5], 1.0) == pytest.approx([2.0, 1.5, 1.0])


def test_multipliers_scale_each_hits_share_by_position() -> None:
    rankings = {"vector": ["a", "b"], "keyword": ["b", "c"]}
    weights = {"vector": 0.5, "keyword": 0.5}
    fused = reciprocal_rank_fusion(rankings, weights, 10, {"keyword": [3.0, 1.0]})
    assert fused["a"] == pytest.approx(0.5 / 11)
    assert fused["b"] == pytest.approx(0.5 / 12 + 0.5 * 3.0 / 11)
    assert fused["c"] == pytest.approx(0.5 / 12)


def test_a_far_ahead_keyword_hit_overtakes_a_rank_tie() -> None:
    # a and b tie in plain RRF (rank 1 in one leg, rank 2 in the other); a's keyword
    # score is far ahead of the leg's tail, so the lift puts it first
    rankings = {"vector": ["b", "a", "x"], "keyword": ["a", "b", "y"]}
    weights = {"vector": 0.5, "keyword": 0.5}
    plain = reciprocal_rank_fusion(rankings, weights, 60)
    assert plain["a"] == pytest.approx(plain["b"])
    lifted = reciprocal_rank_fusion(
        rankings, weights, 60, {"keyword": score_lifts([9.0, 1.2, 1.0], 1.0)}
    )
    assert lifted["a"] > lifted["b"]


def test_a_negative_lift_and_a_mismatched_multiplier_list_are_refused() -> None:
    with pytest.raises(ValueError, match="lift"):
        score_lifts([1.0, 0.5], -0.1)
    with pytest.raises(ValueError, match="keyword"):
        reciprocal_rank_fusion({"keyword": ["a", "b"]}, {"keyword": 1.0}, 60, {"keyword": [1.0]})
