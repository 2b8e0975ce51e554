"""The pure parts of ``benchmarks/lift_gating_study.py`` do what docs/quality-study.md
("Issue 43, round four") says they measured: the engine's fusion with per-leg lifts, the
length fades, and the store's statistics."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from benchmarks.leg_weighting_study import Legs, rrf
from benchmarks.lift_gating_study import StoreStats, cut_fade, lifted_rrf, ratio_fade


def legs(alpha: float = 0.4) -> Legs:
    vector = [("a", 0.9), ("b", 0.5), ("c", 0.1)]
    keyword = [("b", 12.0), ("d", 3.0), ("a", 2.0)]
    return Legs(vector=vector, keyword=keyword, tag=[], alpha=alpha, tags=0)


def test_lifted_rrf_is_the_round_three_studys_score_aware_rrf() -> None:
    assert lifted_rrf(legs(), 0.0, 0.0) == pytest.approx(rrf(legs(), 0.4))
    assert lifted_rrf(legs(), 0.5, 0.0) == pytest.approx(rrf(legs(), 0.4, 0.5, ("keyword",)))
    assert lifted_rrf(legs(), 0.0, 1.0) == pytest.approx(rrf(legs(), 0.4, 1.0, ("vector",)))


def test_the_alpha_shift_moves_the_vector_share_within_zero_and_one() -> None:
    assert lifted_rrf(legs(), 0.0, 0.0, 0.2) == pytest.approx(rrf(legs(0.6), 0.6))
    only_vectors = lifted_rrf(legs(), 0.0, 0.0, 0.9)  # 0.4 + 0.9 is held at 1
    assert "d" not in only_vectors and only_vectors == pytest.approx(rrf(legs(1.0), 1.0))


@pytest.mark.parametrize(
    ("words", "ratio", "cut"), [(3, 1.0, 1.0), (6, 1.0, 1.0), (8, 0.75, 0.0), (12, 0.5, 0.0)]
)
def test_the_length_fades(words: int, ratio: float, cut: float) -> None:
    assert ratio_fade(words, 6) == pytest.approx(ratio)
    assert cut_fade(words, 6) == cut


def test_the_query_idf_is_bm25s_idf_over_log_n_of_the_words_the_store_holds() -> None:
    stats = StoreStats(
        memories=100,
        mean_words=10.0,
        length_cv=0.5,
        beyond_window=0.0,
        df=Counter({"kitchen": 1, "clean": 49}),
    )
    rare = math.log((100 - 1 + 0.5) / 1.5 + 1)
    common = math.log((100 - 49 + 0.5) / 49.5 + 1)
    # "tips" and "keeping" are absent from the store and left out; "any", "for" and
    # "the" are stopwords
    text = "Any tips for keeping the kitchen clean?"
    assert stats.query_idf(text) == pytest.approx((rare + common) / 2 / math.log(101))
    assert stats.query_idf(text, rarest=True) == pytest.approx(rare / math.log(101))
    assert stats.query_idf("nothing held here") == 0.0
