"""The pure parts of ``benchmarks/agreement_study.py`` do what docs/quality-study.md
("Issue 43, round six") says they measured: the legs' agreement signals, the gates and
shifts they drive, and the logistic gate over all of them."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.agreement_study import (
    alpha_linear,
    alpha_when_disagree,
    bm25_gap,
    candidates,
    cover,
    lift_or_alpha,
    lift_when,
    logistic_gate,
    overlap,
    rbo,
    tau,
)
from benchmarks.leg_weighting_study import Legs


def legs(vector: list[str], keyword: list[str], scores: list[float] | None = None) -> Legs:
    kw_scores = scores or [float(len(keyword) - i) for i in range(len(keyword))]
    return Legs(
        vector=[(d, 1.0 - i / 100) for i, d in enumerate(vector)],
        keyword=list(zip(keyword, kw_scores, strict=True)),
        tag=[],
        alpha=0.5,
        tags=0,
    )


IDS = [f"m{i}" for i in range(30)]


def test_identical_legs_agree_fully() -> None:
    same = legs(IDS, IDS)
    assert overlap(same) == 1.0
    assert cover(same) == 1.0
    assert rbo(same) == pytest.approx(1.0)
    assert tau(same) == pytest.approx(1.0)


def test_disjoint_legs_do_not_agree() -> None:
    apart = legs(IDS[:15], IDS[15:])
    assert overlap(apart) == 0.0
    assert cover(apart) == 0.0
    assert rbo(apart) == 0.0
    assert tau(apart) is not None and tau(apart) < 0  # type: ignore[operator]


def test_overlap_counts_the_top_ten_and_cover_the_whole_vector_list() -> None:
    # the keyword top 10: m0-m4 in the vector top 10, m20-m24 only at ranks 21-25
    vector = IDS[:25]
    keyword = IDS[:5] + IDS[20:25] + IDS[5:10]
    both = legs(vector, keyword)
    assert overlap(both) == 0.5
    assert cover(both) == 1.0


def test_reversed_legs_rank_against_each_other() -> None:
    ten = IDS[:10]
    assert tau(legs(ten, ten[::-1])) == pytest.approx(-1.0)


def test_the_bm25_gap_is_the_keyword_legs_drop_from_first_to_tenth() -> None:
    scores = [10.0, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0.5]
    assert bm25_gap(legs(IDS[:11], IDS[:11], scores)) == pytest.approx(0.9)
    # fewer than ten hits: the last one stands for the tenth
    assert bm25_gap(legs(IDS[:3], IDS[:3], [4.0, 2.0, 1.0])) == pytest.approx(0.75)


def test_an_empty_keyword_leg_gives_no_signal_and_no_change() -> None:
    empty = legs(IDS, [])
    assert all(f(empty) is None for f in (overlap, cover, rbo, tau, bm25_gap))
    signals = {"rbo": None}
    assert lift_when("rbo", 0.4, 0.5, agree=False)(signals) == (0.0, 0.0, 0.0)
    assert alpha_when_disagree("rbo", 0.4, 0.2)(signals) == (0.0, 0.0, 0.0)
    assert alpha_linear("rbo", 0.2, 0.5)(signals) == (0.0, 0.0, 0.0)
    assert lift_or_alpha("rbo", 0.4, 0.5, 0.1)(signals) == (0.0, 0.0, 0.0)


def test_the_gates_fire_on_the_side_they_name() -> None:
    low, high = {"rbo": 0.2}, {"rbo": 0.6}
    assert lift_when("rbo", 0.4, 0.5, agree=True)(high) == (0.5, 0.0, 0.0)
    assert lift_when("rbo", 0.4, 0.5, agree=True)(low) == (0.0, 0.0, 0.0)
    assert lift_when("rbo", 0.4, 1.0, agree=False)(low) == (1.0, 0.0, 0.0)
    assert alpha_when_disagree("rbo", 0.4, 0.2)(low) == (0.0, 0.0, 0.2)
    assert alpha_when_disagree("rbo", 0.4, -0.1)(high) == (0.0, 0.0, 0.0)
    assert alpha_linear("rbo", 0.2, 0.5)(high) == (0.0, 0.0, pytest.approx(-0.2))
    assert lift_or_alpha("rbo", 0.4, 0.5, 0.1)(high) == (0.5, 0.0, 0.0)
    assert lift_or_alpha("rbo", 0.4, 0.5, 0.1)(low) == (0.0, 0.0, 0.1)


def test_the_candidates_include_the_references_the_write_up_reports() -> None:
    names = candidates()
    for name in (
        "defaults",
        "keyword lift 0.5 always",
        "alpha +0.2 always",
        "lift 0.5 when rbo < 0.4",
        "alpha +0.1 when cover@10 < 0.9",
        "lift 0.5 when cover@10 >= 0.9, else alpha +0.1",
    ):
        assert name in names
    assert len(names) == 397


def test_the_logistic_gate_learns_which_side_gains() -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, size=(400, 2))
    gain = np.where(x[:, 0] > 0.5, 0.1, -0.1)  # the first signal decides, the second is noise
    gate = logistic_gate(x, gain)
    assert gate(np.array([[0.9, 0.5], [0.1, 0.5]])).tolist() == [True, False]
