"""Ranking metrics, pure functions of a ranked id list and one query's judgments.

``rel(d)`` is the judged grade, 0 when unjudged; a document listed twice in a ranking
counts once, at its first position:

- nDCG@k: DCG = Σ_{i=1..k} (2^rel(d_i) − 1) / log2(i + 1), divided by the DCG of the
  ideal ordering of the query's judged grades (Järvelin & Kekäläinen, 2002, with the
  exponential gain of Burges et al., 2005, as in trec_eval's ``ndcg_cut``).
- Recall@k: |relevant ∩ top k| / |relevant| (relevant: grade ≥ 1).
- MRR@k: 1 / rank of the first relevant result in the top k, else 0.

Kept hand-written (no dependency in the core install) and checked per query, to 1e-9,
against trec_eval through ir-measures (nDCG with the gains mapped to 2^rel − 1, Recall)
and the MS MARCO scorer (MRR@10): ``tests/unit/test_metrics_crosscheck.py``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from hybrid_memory import InvalidInputError

__all__ = ["metric_names", "mrr_at_k", "ndcg_at_k", "recall_at_k"]


def metric_names(k: int) -> tuple[str, str, str, str]:
    """The report's metric keys at cut-off ``k``: nDCG@k, Recall@5, Recall@k, MRR@k."""
    return f"ndcg@{k}", "recall@5", f"recall@{k}", f"mrr@{k}"


def _first_k(ranked_ids: Iterable[str], k: int) -> list[str]:
    """The first ``k`` distinct ids, in order (a repeated id counts once)."""
    if k < 1:
        raise InvalidInputError("k", f"must be at least 1, got {k}")
    seen: dict[str, None] = {}
    for doc_id in ranked_ids:
        if doc_id not in seen:
            seen[doc_id] = None
            if len(seen) == k:
                break
    return list(seen)


def _gain(grade: int) -> float:
    return 2.0 ** max(grade, 0) - 1.0


def ndcg_at_k(ranked_ids: Sequence[str], qrels_for_query: Mapping[str, int], k: int = 10) -> float:
    """nDCG@k with gain 2^rel − 1 and discount log2(i + 1); 0.0 when nothing is relevant."""
    top = _first_k(ranked_ids, k)
    dcg = sum(
        _gain(qrels_for_query.get(doc_id, 0)) / math.log2(i + 1)
        for i, doc_id in enumerate(top, start=1)
    )
    ideal_grades = sorted(qrels_for_query.values(), reverse=True)[:k]
    ideal = sum(_gain(g) / math.log2(i + 1) for i, g in enumerate(ideal_grades, start=1))
    return dcg / ideal if ideal > 0 else 0.0


def recall_at_k(ranked_ids: Sequence[str], qrels_for_query: Mapping[str, int], k: int) -> float:
    """|relevant ∩ top k| / |relevant| (relevant: grade ≥ 1); 0.0 when nothing is relevant."""
    relevant = {doc_id for doc_id, grade in qrels_for_query.items() if grade >= 1}
    if not relevant:
        return 0.0
    return len(relevant.intersection(_first_k(ranked_ids, k))) / len(relevant)


def mrr_at_k(ranked_ids: Sequence[str], qrels_for_query: Mapping[str, int], k: int = 10) -> float:
    """1 / rank of the first relevant (grade ≥ 1) id in the top k, else 0.0."""
    for rank, doc_id in enumerate(_first_k(ranked_ids, k), start=1):
        if qrels_for_query.get(doc_id, 0) >= 1:
            return 1.0 / rank
    return 0.0
