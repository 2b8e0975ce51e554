"""Query-aware leg weighting and session context, leave-one-collection-out (issue 43).

The legs of every judged query are computed once per collection with the engine's own
parts (``benchmarks/fusion_study.py``: the FTS5 keyword index, the tag matcher, the cached
vectors, an exact cosine vector leg with the engine's keyword-top feedback), then each
candidate re-weights or re-orders them in Python:

- **leg confidence**: alpha moved per query by how peaked each leg's own scores are
  (``zscore``: top score in standard deviations above the leg's top-100 mean; ``gap``:
  the share of the leg's top-100 score spread that lies between ranks 1 and 10);
- **score-aware RRF**: each leg's reciprocal-rank share times ``1 + gamma`` x the hit's
  min-max normalised score in that leg (a hit far ahead of the leg's tail counts more);
- **convex fusion** (mcp-memory-service's form, min-max scores, vectors 0.7), and a
  blend of it with RRF;
- **an open-question word list** ("recommend", "suggest", "what should I", "any tips"...):
  alpha raised for such questions, optionally without the feedback;
- **session context**: a hit's session neighbours (same ``session``, the turns next to
  it) lifted by a share of its fused score, or the second and later hits of one session
  lowered (session diversity).

    python -m benchmarks.leg_weighting_study ../shared/data/locomo ../shared/data/cranfield \\
        ../shared/data/longmemeval --cache /tmp/legs --out leg-weighting.json

prints nDCG@10 per collection (and per LongMemEval question type) for every candidate,
then for each collection held out the candidate with the best mean nDCG@10 over the
other two, on the held-out one, with the paired randomisation test's p.
"""

from __future__ import annotations

import argparse
import json
import pickle
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hybrid_memory_eval import ndcg_at_k
from hybrid_memory_eval.significance import paired_randomisation_test

from benchmarks.fusion_study import Prepared, QueryLegs, _tag_leg, prep_index, prepare
from benchmarks.vector_cache import CachedEmbedding
from hybrid_memory.testing import (
    adaptive_alpha,
    default_embedder,
    length_scaled_weight,
    rocchio,
    score_lifts,
)

DEPTH = 100
RRF_K = 60.0
Hits = list[tuple[str, float]]


@dataclass
class Legs:
    """One query's legs at the engine's defaults."""

    vector: Hits  # refined by the keyword top's feedback
    keyword: Hits
    tag: Hits
    alpha: float  # the adaptive alpha by size
    tags: int  # matched query tags


def compute_legs(prep: Prepared, q: QueryLegs) -> Legs:
    keyword = q.keyword[True][:DEPTH]
    alpha = adaptive_alpha(len(q.rows), [500, 5000], [0.5, 0.5, 0.4])
    top = [d for d, _ in keyword[:3]]
    vector = q.vector
    if top:
        index = prep_index(prep)
        weight = length_scaled_weight(0.5, q.words, 10)
        vector = np.asarray(
            rocchio(q.vector.tolist(), prep.matrix[[index[d] for d in top]], weight)
        )
    hits = prep.nearest(q, vector, DEPTH)
    evidence: dict[str, int] = {}
    for ranking in (hits, keyword):
        for r, (doc, _) in enumerate(ranking, start=1):
            evidence[doc] = min(evidence.get(doc, r), r)
    tag = [(d, float(c)) for d, c in _tag_leg(prep, q, evidence, DEPTH)]
    return Legs(hits, keyword, tag, alpha, len(q.tags))


def weights(alpha: float, tags: int) -> dict[str, float]:
    tag = 1.0 * (1 + 0.5 * max(tags - 1, 0)) if tags else 0.0
    total = 1.0 + tag
    return {"vector": alpha / total, "keyword": (1 - alpha) / total, "tag": tag / total}


def rrf(
    legs: Legs,
    alpha: float,
    gamma: float = 0.0,
    legs_scored: tuple[str, ...] = ("vector", "keyword"),
) -> dict[str, float]:
    w = weights(alpha, legs.tags)
    fused: dict[str, float] = {}
    for name, hits in (("vector", legs.vector), ("keyword", legs.keyword), ("tag", legs.tag)):
        if not w[name] or not hits:
            continue
        lifted = bool(gamma) and name in legs_scored
        shares = score_lifts([s for _, s in hits], gamma) if lifted else [1.0] * len(hits)
        for rank, ((doc, _), share) in enumerate(zip(hits, shares, strict=True), start=1):
            fused[doc] = fused.get(doc, 0.0) + w[name] * share / (RRF_K + rank)
    return fused


def convex(legs: Legs, alpha: float) -> dict[str, float]:
    w = weights(alpha, legs.tags)
    fused: dict[str, float] = {}
    for name, hits in (("vector", legs.vector), ("keyword", legs.keyword), ("tag", legs.tag)):
        if not w[name] or not hits:
            continue
        # the min-max normalised score is the engine's lift of 1 less its base 1
        lifts = score_lifts([s for _, s in hits], 1.0)
        for (doc, _), lift in zip(hits, lifts, strict=True):
            fused[doc] = fused.get(doc, 0.0) + w[name] * (lift - 1.0)
    return fused


def z_confidence(hits: Hits) -> float:
    scores = np.array([s for _, s in hits[:DEPTH]], dtype=np.float64)
    if len(scores) < 3 or scores.std() == 0:
        return 0.0
    return max(0.0, float((scores[0] - scores.mean()) / scores.std()))


def gap_confidence(hits: Hits, head: int = 10) -> float:
    """The share of the leg's score spread (rank 1 to its last) spent within its head."""
    if len(hits) < head + 1:
        return 0.0
    top, low = hits[0][1], hits[-1][1]
    if top <= low:
        return 0.0
    return (top - hits[head - 1][1]) / (top - low)


def confident_alpha(legs: Legs, kind: str, mix: float) -> float:
    if kind == "z":
        cv, ck = z_confidence(legs.vector), z_confidence(legs.keyword)
    else:
        cv, ck = gap_confidence(legs.vector), gap_confidence(legs.keyword)
    if cv + ck <= 0:
        return legs.alpha
    return min(1.0, max(0.0, (1 - mix) * legs.alpha + mix * cv / (cv + ck)))


OPEN_QUESTION = re.compile(
    r"\b(recommend\w*|suggest\w*|what should i|any (tips|advice|ideas|suggestions)|"
    r"ideas? for|advice|tips?)\b",
    re.IGNORECASE,
)


# The same, asking for advice now: a question about advice given before ("what did you
# recommend", "remind me of the tips you suggested") is a recall question.
ASKING_ADVICE = re.compile(
    r"\b(can|could|would) you (recommend|suggest)\b|\bwhat should i\b|"
    r"\bany (tips|advice|ideas|suggestions|recommendations)\b",
    re.IGNORECASE,
)


def order(fused: dict[str, float]) -> list[str]:
    return sorted(fused, key=fused.__getitem__, reverse=True)


@dataclass
class Sessions:
    """Each memory's session and position, and each session's memories in order."""

    of: dict[str, tuple[str, int]]
    members: dict[str, list[str]]

    @classmethod
    def of_prep(cls, prep: Prepared) -> Sessions:
        of: dict[str, tuple[str, int]] = {}
        members: dict[str, list[str]] = {}
        for row, doc in enumerate(prep.dataset.storable()):
            meta = doc.metadata
            if "session" not in meta:
                continue
            key = f"{meta.get('conversation', '')}/{meta['session']}"
            members.setdefault(key, []).append(doc.id)
            of[doc.id] = (key, row)
        for key, ids in members.items():
            ids.sort(key=lambda i: of[i][1])
            for position, doc_id in enumerate(ids):
                of[doc_id] = (key, position)
        return cls(of, members)


def with_neighbours(
    fused: dict[str, float], sessions: Sessions, share: float, window: int, head: int = 20
) -> dict[str, float]:
    """Each of the top ``head`` hits lifts its session neighbours (within ``window``
    turns) by ``share`` of its score (the largest lift counts); none lowered."""
    lifted = dict(fused)
    for doc in order(fused)[:head]:
        found = sessions.of.get(doc)
        if found is None:
            continue
        key, position = found
        ids = sessions.members[key]
        for other in ids[max(0, position - window) : position + window + 1]:
            if other != doc:
                lifted[other] = max(
                    lifted.get(other, 0.0), fused.get(other, 0.0) + share * fused[doc]
                )
    return lifted


def session_diverse(fused: dict[str, float], sessions: Sessions, factor: float) -> list[str]:
    """The fused order with each session's n-th hit's score times ``factor`` ** (n - 1)."""
    seen: dict[str, int] = {}
    scored = {}
    for doc in order(fused):
        key = sessions.of.get(doc, (doc, 0))[0]
        n = seen.get(key, 0)
        seen[key] = n + 1
        scored[doc] = fused[doc] * factor**n
    return order(scored)


Candidate = Callable[[Legs, QueryLegs, Sessions], list[str]]


def candidates() -> dict[str, Candidate]:
    out: dict[str, Candidate] = {"defaults": lambda L, q, s: order(rrf(L, L.alpha))}
    for kind in ("z", "gap"):
        for mix in (0.25, 0.5):
            out[f"leg confidence ({kind}) mix {mix}"] = lambda L, q, s, kind=kind, mix=mix: order(
                rrf(L, confident_alpha(L, kind, mix))
            )
    for gamma in (0.5, 1.0, 2.0):
        out[f"score-aware RRF gamma {gamma}"] = lambda L, q, s, g=gamma: order(rrf(L, L.alpha, g))
    for gamma in (0.5, 1.0):
        for leg in ("vector", "keyword"):
            out[f"score-aware RRF gamma {gamma}, {leg} leg only"] = (
                lambda L, q, s, g=gamma, leg=leg: order(rrf(L, L.alpha, g, (leg,)))
            )
    out["convex 0.7 (feedback)"] = lambda L, q, s: order(convex(L, 0.7))
    for blend in (0.005, 0.01):
        out[f"RRF + {blend} x convex 0.7"] = lambda L, q, s, b=blend: order(
            _blend(rrf(L, L.alpha), convex(L, 0.7), b)
        )
    for shift in (0.2, 0.4):
        out[f"open-question words: alpha +{shift}"] = lambda L, q, s, d=shift: order(
            rrf(L, min(1.0, L.alpha + d) if OPEN_QUESTION.search(q.text) else L.alpha)
        )
    out["open-question words: vectors alone"] = lambda L, q, s: order(
        rrf(L, 1.0) if OPEN_QUESTION.search(q.text) else rrf(L, L.alpha)
    )
    for shift in (0.2, 0.4, 0.6):
        out[f"asking-advice words: alpha +{shift}"] = lambda L, q, s, d=shift: order(
            rrf(L, min(1.0, L.alpha + d) if ASKING_ADVICE.search(q.text) else L.alpha)
        )
    out["keyword lift 0.5 + asking-advice words: alpha +0.4"] = lambda L, q, s: order(
        rrf(L, min(1.0, L.alpha + 0.4), 0.5, ("keyword",))
        if ASKING_ADVICE.search(q.text)
        else rrf(L, L.alpha, 0.5, ("keyword",))
    )
    for share in (0.1, 0.25, 0.5):
        for window in (1, 2):
            out[f"session neighbours share {share} window {window}"] = (
                lambda L, q, s, sh=share, w=window: order(
                    with_neighbours(rrf(L, L.alpha), s, sh, w)
                )
            )
    for factor in (0.9, 0.8, 0.6):
        out[f"session diversity {factor}"] = lambda L, q, s, f=factor: session_diverse(
            rrf(L, L.alpha), s, f
        )
    return out


def _blend(a: dict[str, float], b: dict[str, float], share: float) -> dict[str, float]:
    return {d: a.get(d, 0.0) + share * b.get(d, 0.0) for d in set(a) | set(b)}


def load(path: str, cache: str | None, embedding: CachedEmbedding | None) -> Prepared:
    name = Path(path).name
    target = Path(cache) / f"{name}.pkl" if cache else None
    if target is not None and target.exists():
        with target.open("rb") as f:
            prep: Prepared = pickle.load(f)
        return prep
    prep = prepare(path, embedding or CachedEmbedding(default_embedder()))
    if target is not None:
        target.parent.mkdir(parents=True, exist_ok=True)
        prep._vector_cache = {}
        with target.open("wb") as f:
            pickle.dump(prep, f)
    return prep


def group_of(prep: Prepared, qid: str) -> str | None:
    query = next((q for q in prep.dataset.queries if q.id == qid), None)
    meta = {} if query is None else query.metadata
    value = meta.get("type", meta.get("category"))
    return None if value is None else str(value)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("datasets", nargs="+")
    parser.add_argument("--cache", help="a folder keeping each collection's prepared legs")
    parser.add_argument("--out", help="write every figure and the folds as JSON")
    args = parser.parse_args(argv)
    preps = [load(p, args.cache, None) for p in args.datasets]
    names = [p.name for p in preps]
    per_query: dict[str, dict[str, dict[str, float]]] = {}
    for prep in preps:
        sessions = Sessions.of_prep(prep)
        legs = {q.id: compute_legs(prep, q) for q in prep.queries}
        for name, candidate in candidates().items():
            rows = per_query.setdefault(name, {}).setdefault(prep.name, {})
            for q in prep.queries:
                ranked = candidate(legs[q.id], q, sessions)[:10]
                rows[q.id] = ndcg_at_k(ranked, prep.dataset.qrels.get(q.id, {}), 10)
    groups = {p.name: {q.id: group_of(p, q.id) for q in p.queries} for p in preps}
    table: dict[str, dict[str, float]] = {}
    for name, by_prep in per_query.items():
        row: dict[str, float] = {}
        for prep_name, scores in by_prep.items():
            row[prep_name] = round(statistics.fmean(scores.values()), 4)
            ids = sorted(scores)
            base = per_query["defaults"][prep_name]
            row[f"{prep_name} p"] = round(
                paired_randomisation_test([scores[i] for i in ids], [base[i] for i in ids]), 4
            )
            if prep_name == "longmemeval":
                for group in sorted({g for g in groups[prep_name].values() if g}):
                    members = [i for i in ids if groups[prep_name][i] == group]
                    row[f"lme {group}"] = round(statistics.fmean(scores[i] for i in members), 4)
        table[name] = row
        print(f"{name:45s} " + "  ".join(f"{k}: {v}" for k, v in row.items()), flush=True)
    folds = []
    for held in names:
        others = [n for n in names if n != held]
        best = max(
            table, key=lambda c: (statistics.fmean(table[c][n] for n in others), c == "defaults")
        )
        fold = {
            "held_out": held,
            "chosen": best,
            "on_others": round(statistics.fmean(table[best][n] for n in others), 4),
            "defaults_on_others": round(statistics.fmean(table["defaults"][n] for n in others), 4),
            "on_held_out": table[best][held],
            "defaults_on_held_out": table["defaults"][held],
            "p": table[best][f"{held} p"],
        }
        folds.append(fold)
        print(json.dumps(fold), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"table": table, "folds": folds}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
