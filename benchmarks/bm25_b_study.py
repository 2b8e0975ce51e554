"""BM25's length normalisation b set from the store's own memory lengths (issue 43, round five).

Round four found b the knob that reaches LongMemEval's weak types (long assistant turns
that repeat the question's words outrank the user's short turns): b 1.0 gains there and
costs LoCoMo. This study asks whether a b derived from the store's length distribution,
a continuous formula with one or two constants and no relevance judgments, tracks that
mechanism. For each collection the keyword leg is computed once per b on a grid (the
engine's index, scored with each b in turn: ``hybrid_memory.testing.keyword_bm25_b``; the
postings read b at query time, so one index serves every b), the other legs as in
``benchmarks/leg_weighting_study.py``; every candidate maps the store's length statistics
to a b (rounded to the grid) and fuses with the engine's own ``reciprocal_rank_fusion``
and ``score_lifts``. Candidates:

- **fixed b** (0.75 is the engine's default);
- **b = min(1, c x cv)**, cv the coefficient of variation of the memories' lengths in
  index tokens (one constant);
- **b = b0 + s x (cv - 0.5)**, clipped to the grid (two constants);
- **the normalisation effect** (He & Ounis, "term frequency normalisation tuning", 2003/
  2005): the b at which the spread (cv) of the factor ``1 / (1 - b + b x |d| / avgdl)``
  over the store's memories reaches a target t (one constant);

each with and without ``keyword_score_lift`` 0.5.

    python -m benchmarks.bm25_b_study ../shared/data/locomo ../shared/data/cranfield \\
        ../shared/data/longmemeval /tmp/locomo-long/locomo-long \\
        --check /tmp/user-turns/longmemeval-user --cache /tmp/legs5 \\
        --out benchmarks/results/quality5/bm25-b-study.json

prints the stores' statistics and each store's b, nDCG@10 and paired p (against the
defaults) per collection and LongMemEval type, and the leave-one-collection-out folds
over the stores named first (``--check`` stores are measured, never in a fold).
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from hybrid_memory_eval import PEERS, QUIET, build_memory, load_dataset, ndcg_at_k
from hybrid_memory_eval.report import per_query_scores
from hybrid_memory_eval.runs import run_peer
from hybrid_memory_eval.significance import paired_randomisation_test

from benchmarks._porter import stem
from benchmarks.fusion_study import DEPTH, Prepared
from benchmarks.leg_weighting_study import compute_legs, group_of, load, order
from benchmarks.lift_gating_study import lifted_rrf
from benchmarks.vector_cache import CachedEmbedding
from hybrid_memory.testing import (
    default_embedder,
    keyword_bm25_b,
    keyword_leg,
    memory_lengths,
    text_words,
)

GRID = tuple(round(0.3 + 0.05 * i, 2) for i in range(15))  # 0.30 ... 1.00
DEFAULT_B = 0.75
Hits = list[tuple[str, float]]


@dataclass(frozen=True)
class Lengths:
    """The store's memory lengths in the keyword index's tokens (memories with none, which
    no keyword query can match, left out)."""

    tokens: np.ndarray

    @classmethod
    def of(cls, lengths: np.ndarray) -> Lengths:
        return cls(lengths[lengths > 0].astype(np.float64))

    @property
    def cv(self) -> float:
        return float(self.tokens.std() / self.tokens.mean())

    def normalisation_spread(self, b: float) -> float:
        """The cv over memories of BM25's length factor ``1 / (1 - b + b |d| / avgdl)``."""
        factor = 1.0 / (1.0 - b + b * self.tokens / self.tokens.mean())
        return float(factor.std() / factor.mean())


def snap(b: float) -> float:
    """The grid's b nearest to ``b`` (clipped to the grid)."""
    return min(GRID, key=lambda g: (abs(g - b), g))


def keyword_legs(path: str, cache: str | None) -> tuple[dict[float, dict[str, Hits]], Lengths]:
    """Every judged query's keyword leg for each b of the grid, and the store's lengths."""
    name = Path(path).name
    target = Path(cache) / f"{name}-keyword-by-b.pkl" if cache else None
    if target is not None and target.exists():
        with target.open("rb") as f:
            found: tuple[dict[float, dict[str, Hits]], np.ndarray] = pickle.load(f)
        return found[0], Lengths.of(found[1])
    dataset = load_dataset(path)
    memory = build_memory(dataset, {}, embedding=CachedEmbedding(default_embedder()))
    by_b: dict[float, dict[str, Hits]] = {}
    try:
        lengths = Lengths(memory_lengths(memory))
        for b in GRID:
            with keyword_bm25_b(b):
                legs: dict[str, Hits] = {}
                for q in dataset.judged_queries():
                    legs[q.id] = keyword_leg(memory, q.text, DEPTH, q.filter)
            by_b[b] = legs
            print(f"{name}: keyword legs at b {b}", flush=True)
    finally:
        memory.close()
    if target is not None:
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("wb") as f:
            pickle.dump((by_b, lengths.tokens), f)  # plain arrays: any module can read them
    return by_b, Lengths.of(lengths.tokens)


# A candidate maps a store's lengths to (b, keyword lift).
Rule = Callable[[Lengths], tuple[float, float]]


def fixed_b(b: float, lift: float) -> Rule:
    return lambda s: (b, lift)


def cv_scaled(c: float, lift: float) -> Rule:
    return lambda s: (snap(min(1.0, c * s.cv)), lift)


def cv_linear(b0: float, slope: float, lift: float) -> Rule:
    return lambda s: (snap(b0 + slope * (s.cv - 0.5)), lift)


def normalisation_effect(target: float, lift: float) -> Rule:
    def rule(s: Lengths) -> tuple[float, float]:
        return min(GRID, key=lambda b: (abs(s.normalisation_spread(b) - target), b)), lift

    return rule


def candidates() -> dict[str, tuple[str, Rule]]:
    """name -> (family, rule); a family's members differ only in their constants."""
    out: dict[str, tuple[str, Rule]] = {}
    for lift in (0.0, 0.5):
        tail = f", keyword lift {lift}" if lift else ""
        for b in (0.5, 0.6, 0.75, 0.9, 1.0):
            out[f"b {b}{tail}"] = (f"fixed b{tail}", fixed_b(b, lift))
        for c in (1.0, 1.2, 1.4, 1.6, 1.8, 2.0):
            out[f"b = min(1, {c} cv){tail}"] = (f"b = min(1, c cv){tail}", cv_scaled(c, lift))
        for b0 in (0.6, 0.75, 0.9):
            for slope in (0.5, 1.0, 2.0):
                out[f"b = {b0} + {slope} (cv - 0.5){tail}"] = (
                    f"b = b0 + s (cv - 0.5){tail}",
                    cv_linear(b0, slope, lift),
                )
        for t in (0.2, 0.3, 0.4, 0.5):
            out[f"b where the factor's cv = {t}{tail}"] = (
                f"normalisation effect{tail}",
                normalisation_effect(t, lift),
            )
    return out


def mean(values: Sequence[float]) -> float:
    return round(statistics.fmean(values), 4)


def p_value(a: dict[str, float], b: dict[str, float], ids: Sequence[str]) -> float:
    return round(paired_randomisation_test([a[i] for i in ids], [b[i] for i in ids]), 4)


def scores_at(prep: Prepared, keyword: dict[str, Hits], lift: float) -> dict[str, float]:
    """nDCG@10 of every judged query, fused with this keyword leg and lift."""
    out = {}
    for q in prep.queries:
        swapped = replace(q, keyword={True: keyword[q.id], False: q.keyword[False]})
        ranked = order(lifted_rrf(compute_legs(prep, swapped), lift, 0.0))[:10]
        out[q.id] = ndcg_at_k(ranked, prep.dataset.qrels.get(q.id, {}), 10)
    return out


def long_memories(prep: Prepared, by_b: dict[float, dict[str, Hits]]) -> dict[str, float]:
    """Where the store's longest quarter of memories (in words, repeats counted) sits: its
    share of the store's judged memories, of the keyword leg's top 10 at b 0.75 and 1.0,
    and the words per distinct word stem (verbosity: how often a memory repeats itself)
    of its memories against the rest's."""
    docs = prep.dataset.storable()
    words = {d.id: [stem(w.casefold()) for w in text_words(d.text)] for d in docs}
    cut = float(np.quantile([len(w) for w in words.values()], 0.75))
    long = {i for i, w in words.items() if len(w) > cut}
    judged = {d for q in prep.queries for d, g in prep.dataset.qrels.get(q.id, {}).items() if g > 0}

    def verbosity(ids: set[str]) -> float:
        return statistics.fmean(len(words[i]) / len(set(words[i])) for i in ids if words[i])

    def top_share(b: float) -> float:
        tops = [d for hits in by_b[b].values() for d, _ in hits[:10]]
        return sum(d in long for d in tops) / max(len(tops), 1)

    return {
        "long quarter: beyond words": cut,
        "long quarter: share of judged memories": round(len(judged & long) / len(judged), 3),
        "long quarter: share of keyword top 10 at b 0.75": round(top_share(0.75), 3),
        "long quarter: share of keyword top 10 at b 1.0": round(top_share(1.0), 3),
        "words per distinct stem, long quarter": round(verbosity(long), 2),
        "words per distinct stem, the rest": round(verbosity(set(words) - long), 2),
    }


class Scores:
    """nDCG@10 per query of one store at each (b, keyword lift), computed once."""

    def __init__(self, prep: Prepared, by_b: dict[float, dict[str, Hits]]) -> None:
        self.prep, self.by_b = prep, by_b
        self.memo: dict[tuple[float, float], dict[str, float]] = {}

    def __call__(self, b: float, lift: float) -> dict[str, float]:
        if (b, lift) not in self.memo:
            self.memo[(b, lift)] = scores_at(self.prep, self.by_b[b], lift)
        return self.memo[(b, lift)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("datasets", nargs="+", help="the stores of the folds")
    parser.add_argument("--check", action="append", default=[], help="measured, not folded")
    parser.add_argument("--cache", help="a folder keeping each collection's prepared legs")
    parser.add_argument("--out", help="write every figure and the folds as JSON")
    parser.add_argument("--peer", help="also pair every candidate with this harness peer")
    args = parser.parse_args(argv)
    peer_name = None
    if args.peer:
        found = [n for n in PEERS if n.lower().startswith(args.peer.lower())]
        if len(found) != 1:
            parser.error(f"--peer must name one of {sorted(PEERS)}; got {args.peer!r}")
        peer_name = found[0]
    paths = args.datasets + args.check
    rules = candidates()
    stores: dict[str, dict[str, float]] = {}
    table: dict[str, dict[str, float]] = {}
    chosen_b: dict[str, dict[str, float]] = {}
    base_ids: dict[str, list[str]] = {}
    for path in paths:
        prep = load(path, args.cache, None)
        by_b, lengths = keyword_legs(path, args.cache)
        name = prep.name
        spread = {b: round(lengths.normalisation_spread(b), 3) for b in (0.5, 0.75, 1.0)}
        stores[name] = {
            "memories": len(lengths.tokens),
            "mean_tokens": round(float(lengths.tokens.mean()), 1),
            "length_cv": round(lengths.cv, 3),
        } | {f"factor cv at b {b}": v for b, v in spread.items()}
        stores[name] |= long_memories(prep, by_b)
        print(name, json.dumps(stores[name]), flush=True)
        at = Scores(prep, by_b)

        base = at(DEFAULT_B, 0.0)
        units = {name: sorted(base)}
        for q in prep.queries:
            group = group_of(prep, q.id)
            if group and "longmemeval" in name:
                units.setdefault(f"{name} {group}", []).append(q.id)
        per_query_peer = None
        if peer_name is not None:
            embedding = CachedEmbedding(default_embedder())
            run = run_peer(PEERS[peer_name], embedding, prep.dataset, k=10, progress=QUIET)
            scores = per_query_scores(run, prep.dataset, k=10)
            per_query_peer = {q.id: scores[q.id]["ndcg@10"] for q in prep.queries}
        base_ids[name] = sorted(base)
        for cand, (_, rule) in rules.items():
            b, lift = rule(lengths)
            chosen_b.setdefault(cand, {})[name] = b
            got = at(b, lift)
            row = table.setdefault(cand, {})
            for unit, ids in units.items():
                row[unit] = mean([got[i] for i in ids])
                row[f"{unit} p"] = p_value(got, base, ids)
                if per_query_peer is not None:
                    row[f"{unit} p vs peer"] = p_value(got, per_query_peer, ids)
        if per_query_peer is not None:
            row = table.setdefault(str(peer_name), {})
            for unit, ids in units.items():
                row[unit] = mean([per_query_peer[i] for i in ids])
                row[f"{unit} p"] = p_value(per_query_peer, base, ids)
        for b in GRID:  # the whole grid, for the curves
            got = at(b, 0.0)
            table.setdefault(f"grid b {b}", {})[name] = mean(list(got.values()))
    for cand, row in table.items():
        if cand in rules:
            bs = " ".join(f"{n}={v}" for n, v in chosen_b[cand].items())
            print(
                f"{cand:52s} [{bs}] "
                + "  ".join(
                    f"{u}: {row[u]} ({row.get(u + ' p')})"
                    for u in row
                    if not u.endswith("p") and not u.endswith("peer")
                ),
                flush=True,
            )
    folded = [Path(p).name for p in args.datasets]
    folds = []
    families = sorted({f for f, _ in rules.values()})
    for family in [None, *families] if len(folded) > 1 else []:
        members = [c for c, (f, _) in rules.items() if family is None or f == family]
        for held in folded:
            others = [n for n in folded if n != held]

            def on_others(c: str) -> float:
                return statistics.fmean(table[c][u] for u in others)  # noqa: B023

            best = max(members, key=lambda c: (round(on_others(c), 6), c == "b 0.75"))
            result = {
                "family": family or "any candidate",
                "held_out": held,
                "chosen": best,
                "b_there": chosen_b[best][held],
                "on_others": round(on_others(best), 4),
                "defaults_on_others": round(on_others("b 0.75"), 4),
                "on_held_out": table[best][held],
                "defaults_on_held_out": table["b 0.75"][held],
                "p": table[best][f"{held} p"],
            }
            folds.append(result)
            print(json.dumps(result), flush=True)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(
            json.dumps(
                {
                    "stores": stores,
                    "peer": peer_name,
                    "b_by_candidate": chosen_b,
                    "table": table,
                    "folds": folds,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
