"""Pure rank-fusion math: weighted Reciprocal Rank Fusion and the adaptive alpha.

Weighted RRF (Cormack, Clarke & Büttcher, SIGIR 2009, with per-ranking weights):

    score(d) = Σ_legs  w_leg / (k + rank_leg(d))

where ``rank_leg(d)`` is d's 1-based rank in that leg and legs that did not return
d contribute nothing. Weights are normalised to sum to 1 so fused scores from
different weightings stay on one scale.

Score-aware RRF (optional, per leg): each hit's share is multiplied by

    1 + lift × (s(d) - s_last) / (s_first - s_last)

its leg score min-max normalised over that leg's list, so a hit far ahead of its
leg's tail counts more than its rank alone says (RRF blended with the score-based
"relative score fusion" of Weaviate and mcp-memory-service; lift 0 is plain RRF).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence

from hybrid_memory._model.results import KEYWORD, TAG, VECTOR


def normalise_weights(weights: Mapping[str, float]) -> dict[str, float]:
    """Scale non-negative weights to sum to 1; all-zero weights stay zero."""
    if any(w < 0 for w in weights.values()):
        raise ValueError(f"weights must be non-negative, got {dict(weights)}")
    total = sum(weights.values())
    if total == 0:
        return {leg: 0.0 for leg in weights}
    return {leg: w / total for leg, w in weights.items()}


def reciprocal_rank_fusion(
    rankings: Mapping[str, Sequence[str]],
    weights: Mapping[str, float],
    k: float = 60.0,
    multipliers: Mapping[str, Sequence[float]] | None = None,
) -> dict[str, float]:
    """Fuse ranked id lists into one score per id with weighted RRF.

    ``rankings`` maps a leg name to its ids, best first; ``weights`` maps the same
    names to weights (normalised here; a leg without a weight counts 0). Returns
    ``{id: fused score}``; sort it with :func:`order_by_score`. ``multipliers`` (from
    :func:`score_lifts`) maps a leg to one factor per position of its ranking, each
    hit's share multiplied by it; legs without one keep plain RRF.
    """
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    norm = normalise_weights({leg: weights.get(leg, 0.0) for leg in rankings})
    fused: dict[str, float] = {}
    for leg, ids in rankings.items():
        weight = norm[leg]
        if weight == 0:
            continue
        factors = (multipliers or {}).get(leg)
        if factors is not None and len(factors) != len(ids):
            raise ValueError(f"multipliers[{leg!r}] has {len(factors)} factors for {len(ids)} ids")
        get = fused.get
        for position, doc_id in enumerate(ids, start=1):
            share = weight if factors is None else weight * factors[position - 1]
            fused[doc_id] = get(doc_id, 0.0) + share / (k + position)
    return fused


def score_lifts(scores: Sequence[float], lift: float) -> list[float]:
    """One RRF multiplier per hit of a leg, its ``scores`` best first:
    ``1 + lift × (score - last) / (first - last)`` (1 + lift for every hit when the
    scores do not spread)."""
    if lift < 0:
        raise ValueError(f"lift must be non-negative, got {lift}")
    if not scores:
        return []
    first, last = scores[0], scores[-1]
    span = first - last
    if span <= 0:
        return [1.0 + lift] * len(scores)
    return [1.0 + lift * (score - last) / span for score in scores]


def order_by_score(scores: Mapping[str, float]) -> list[str]:
    """Ids by descending score; ties keep insertion order (the earlier leg's order)."""
    return sorted(scores, key=scores.__getitem__, reverse=True)


def adaptive_alpha(corpus_size: int, thresholds: Sequence[int], values: Sequence[float]) -> float:
    """The vector share for a corpus of ``corpus_size`` memories.

    ``values[i]`` applies to sizes below ``thresholds[i]`` (and above the previous
    threshold); the last value applies from the last threshold up. Larger corpora
    lean on the vector leg because BM25's exact-term evidence gets noisier as the
    vocabulary of unrelated memories grows.
    """
    if len(values) != len(thresholds) + 1:
        raise ValueError("values needs exactly one more entry than thresholds")
    return values[bisect.bisect_right(list(thresholds), corpus_size)]


def leg_weights(
    alpha: float, tag_weight: float, tag_boost: float, matched_tags: int
) -> dict[str, float]:
    """Un-normalised weights of the three legs.

    The vector and keyword legs split ``1 - tag share`` as ``alpha : 1 - alpha``.
    The tag leg weighs ``tag_weight``, raised by ``tag_boost`` for every matched
    query tag beyond the first (several matching tags are stronger evidence), and
    weighs nothing when no tag matched.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    tag = tag_weight * (1.0 + tag_boost * max(matched_tags - 1, 0)) if matched_tags else 0.0
    return {VECTOR: alpha, KEYWORD: 1.0 - alpha, TAG: tag}
