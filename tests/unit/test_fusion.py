"""Weighted RRF, weight normalisation, the adaptive alpha and the leg weights."""

from __future__ import annotations

import pytest

from hybrid_memory._model.results import KEYWORD, TAG, VECTOR
from hybrid_memory._search.fusion import (
    adaptive_alpha,
    leg_weights,
    normalise_weights,
    order_by_score,
    reciprocal_rank_fusion,
)

RANKINGS = {VECTOR: ["a", "b", "c"], KEYWORD: ["b", "d"]}

# Worked by hand, weights 0.7 / 0.3 (sum 1, so normalising changes nothing), k = 60:
#   a: vector rank 1                      0.7/61           = 0.0114754098...
#   b: vector rank 2, keyword rank 1      0.7/62 + 0.3/61  = 0.0112903226 + 0.0049180328
#                                                          = 0.0162083554...
#   c: vector rank 3                      0.7/63           = 0.0111111111...
#   d: keyword rank 2                     0.3/62           = 0.0048387097...
# so b (found by both legs) beats a, the vector leg's own first choice.
EXPECTED_70_30 = {
    "a": 0.011475409836065573,
    "b": 0.016208355367530407,
    "c": 0.011111111111111112,
    "d": 0.004838709677419355,
}


def test_rrf_matches_hand_computed_scores() -> None:
    fused = reciprocal_rank_fusion(RANKINGS, {VECTOR: 0.7, KEYWORD: 0.3}, k=60)
    assert fused == pytest.approx(EXPECTED_70_30, rel=1e-12)
    assert order_by_score(fused) == ["b", "a", "c", "d"]


def test_rrf_normalises_weights() -> None:
    # 7 : 3 and 1.4 : 0.6 are 0.7 : 0.3 after normalisation.
    for weights in ({VECTOR: 7, KEYWORD: 3}, {VECTOR: 1.4, KEYWORD: 0.6}):
        assert reciprocal_rank_fusion(RANKINGS, weights, k=60) == pytest.approx(EXPECTED_70_30)


def test_rrf_other_k_changes_scores_as_the_formula_says() -> None:
    # k = 1, equal weights 0.5 / 0.5:
    #   a: 0.5/2 = 0.25;  b: 0.5/3 + 0.5/2 = 0.41666...;  c: 0.5/4 = 0.125;  d: 0.5/3
    fused = reciprocal_rank_fusion(RANKINGS, {VECTOR: 1, KEYWORD: 1}, k=1)
    assert fused == pytest.approx({"a": 0.25, "b": 5 / 12, "c": 0.125, "d": 1 / 6})


def test_rrf_with_one_leg_keeps_its_order() -> None:
    fused = reciprocal_rank_fusion({VECTOR: ["x", "y", "z"]}, {VECTOR: 0.2}, k=60)
    # A single leg's weight normalises to 1.
    assert fused == pytest.approx({"x": 1 / 61, "y": 1 / 62, "z": 1 / 63})
    assert order_by_score(fused) == ["x", "y", "z"]


def test_zero_weight_leg_contributes_nothing() -> None:
    fused = reciprocal_rank_fusion(RANKINGS, {VECTOR: 1.0, KEYWORD: 0.0}, k=60)
    assert set(fused) == {"a", "b", "c"}  # d only came from the silenced leg
    assert fused["b"] == pytest.approx(1 / 62)


def test_missing_weight_counts_as_zero() -> None:
    fused = reciprocal_rank_fusion(RANKINGS, {KEYWORD: 0.5}, k=60)
    assert fused == pytest.approx({"b": 1 / 61, "d": 1 / 62})


def test_all_zero_weights_fuse_to_nothing() -> None:
    assert reciprocal_rank_fusion(RANKINGS, {VECTOR: 0, KEYWORD: 0}, k=60) == {}


def test_empty_rankings() -> None:
    assert reciprocal_rank_fusion({}, {VECTOR: 1.0}) == {}
    assert reciprocal_rank_fusion({VECTOR: [], KEYWORD: ["a"]}, {VECTOR: 1, KEYWORD: 1}) == (
        pytest.approx({"a": 0.5 / 61})
    )


@pytest.mark.parametrize("k", [0, -1, -60.0])
def test_rrf_rejects_non_positive_k(k: float) -> None:
    with pytest.raises(ValueError, match="k must be positive"):
        reciprocal_rank_fusion(RANKINGS, {VECTOR: 1.0}, k=k)


def test_rrf_rejects_negative_weights() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        reciprocal_rank_fusion(RANKINGS, {VECTOR: 1.0, KEYWORD: -0.1})


def test_normalise_weights() -> None:
    assert normalise_weights({VECTOR: 2, KEYWORD: 1, TAG: 1}) == pytest.approx(
        {VECTOR: 0.5, KEYWORD: 0.25, TAG: 0.25}
    )
    assert normalise_weights({VECTOR: 0, KEYWORD: 0}) == {VECTOR: 0.0, KEYWORD: 0.0}
    assert normalise_weights({}) == {}
    with pytest.raises(ValueError):
        normalise_weights({VECTOR: -1, KEYWORD: 2})


def test_order_by_score_breaks_ties_by_insertion_order() -> None:
    assert order_by_score({"p": 0.1, "q": 0.3, "r": 0.1, "s": 0.3}) == ["q", "s", "p", "r"]
    # Equal ranks in two equally weighted legs tie; the earlier leg's id comes first.
    fused = reciprocal_rank_fusion({VECTOR: ["v"], KEYWORD: ["k"]}, {VECTOR: 1, KEYWORD: 1})
    assert fused["v"] == fused["k"]
    assert order_by_score(fused) == ["v", "k"]


# --- adaptive alpha ---------------------------------------------------------------------

THRESHOLDS = [500, 5000]
VALUES = [0.5, 0.7, 0.8]


@pytest.mark.parametrize(
    ("size", "alpha"),
    [
        (0, 0.5),
        (1, 0.5),
        (499, 0.5),
        (500, 0.7),  # a threshold starts the next band
        (501, 0.7),
        (4999, 0.7),
        (5000, 0.8),
        (5001, 0.8),
        (10**9, 0.8),
    ],
)
def test_adaptive_alpha_at_and_around_thresholds(size: int, alpha: float) -> None:
    assert adaptive_alpha(size, THRESHOLDS, VALUES) == alpha


def test_adaptive_alpha_without_thresholds_is_constant() -> None:
    assert adaptive_alpha(0, [], [0.6]) == 0.6
    assert adaptive_alpha(10**6, [], [0.6]) == 0.6


def test_adaptive_alpha_accepts_tuples() -> None:
    assert adaptive_alpha(600, (500, 5000), (0.5, 0.7, 0.8)) == 0.7


@pytest.mark.parametrize("values", [[0.5, 0.7], [0.5, 0.6, 0.7, 0.8], []])
def test_adaptive_alpha_needs_one_more_value_than_thresholds(values: list[float]) -> None:
    with pytest.raises(ValueError, match="one more entry"):
        adaptive_alpha(10, THRESHOLDS, values)


# --- leg weights ---------------------------------------------------------------------------


def test_leg_weights_without_matched_tags_silence_the_tag_leg() -> None:
    assert leg_weights(0.7, tag_weight=0.3, tag_boost=0.5, matched_tags=0) == pytest.approx(
        {VECTOR: 0.7, KEYWORD: 0.3, TAG: 0.0}
    )


@pytest.mark.parametrize(
    ("matched", "tag"),
    [
        (1, 0.3),  # the first matched tag: tag_weight itself
        (2, 0.45),  # 0.3 × (1 + 0.5 × 1)
        (3, 0.6),  # 0.3 × (1 + 0.5 × 2)
        (5, 0.9),  # 0.3 × (1 + 0.5 × 4)
    ],
)
def test_leg_weights_tag_boost_per_extra_matched_tag(matched: int, tag: float) -> None:
    weights = leg_weights(0.6, tag_weight=0.3, tag_boost=0.5, matched_tags=matched)
    assert weights == pytest.approx({VECTOR: 0.6, KEYWORD: 0.4, TAG: tag})


def test_leg_weights_keep_alpha_ratio_after_normalisation() -> None:
    weights = normalise_weights(leg_weights(0.8, tag_weight=0.3, tag_boost=0.5, matched_tags=2))
    # tag share = 0.45 / (1 + 0.45); vector : keyword stays 0.8 : 0.2
    assert weights[TAG] == pytest.approx(0.45 / 1.45)
    assert weights[VECTOR] / weights[KEYWORD] == pytest.approx(4.0)


def test_no_boost_means_flat_tag_weight() -> None:
    assert leg_weights(0.5, 0.3, 0.0, matched_tags=4)[TAG] == pytest.approx(0.3)


def test_alpha_extremes() -> None:
    assert leg_weights(0.0, 0.3, 0.5, 0) == {VECTOR: 0.0, KEYWORD: 1.0, TAG: 0.0}
    assert leg_weights(1.0, 0.3, 0.5, 0) == {VECTOR: 1.0, KEYWORD: 0.0, TAG: 0.0}


@pytest.mark.parametrize("alpha", [-0.01, 1.01])
def test_leg_weights_reject_alpha_outside_unit_interval(alpha: float) -> None:
    with pytest.raises(ValueError, match="alpha"):
        leg_weights(alpha, 0.3, 0.5, 1)


def test_three_leg_fusion_end_to_end() -> None:
    # alpha 0.5, one matched tag: weights 0.5 / 0.5 / 0.3, normalised by 1.3.
    weights = leg_weights(0.5, tag_weight=0.3, tag_boost=0.5, matched_tags=1)
    rankings = {VECTOR: ["a", "b"], KEYWORD: ["b", "a"], TAG: ["c", "b"]}
    fused = reciprocal_rank_fusion(rankings, weights, k=60)
    v, kw, t = 0.5 / 1.3, 0.5 / 1.3, 0.3 / 1.3
    assert fused == pytest.approx(
        {
            "a": v / 61 + kw / 62,
            "b": v / 62 + kw / 61 + t / 62,
            "c": t / 61,
        }
    )
    assert order_by_score(fused) == ["b", "a", "c"]
