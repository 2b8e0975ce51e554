"""Pure rank-fusion math: weighted Reciprocal Rank Fusion and the adaptive alpha.

Weighted RRF (Cormack, Clarke & Büttcher, SIGIR 2009, with per-ranking weights):

    score(d) = Σ_legs  w_leg / (k + rank_leg(d))

where ``rank_leg(d)`` is d's 1-based rank in that leg and legs that did not return
d contribute nothing. Weights are normalised to sum to 1 so fused scores from
different weightings stay on one scale.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence

from hybrid_memory._types import KEYWORD, TAG, VECTOR


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
) -> dict[str, float]:
    """Fuse ranked id lists into one score per id with weighted RRF.

    ``rankings`` maps a leg name to its ids, best first; ``weights`` maps the same
    names to weights (normalised here; a leg without a weight counts 0). Returns
    ``{id: fused score}``; sort it with :func:`order_by_score`.
    """
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    norm = normalise_weights({leg: weights.get(leg, 0.0) for leg in rankings})
    fused: dict[str, float] = {}
    for leg, ids in rankings.items():
        weight = norm[leg]
        if weight == 0:
            continue
        get = fused.get
        for position, doc_id in enumerate(ids, start=1):
            fused[doc_id] = get(doc_id, 0.0) + weight / (k + position)
    return fused


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
