"""When should the keyword score lift be on? Gates available at query time (issue 43, round four).

``keyword_score_lift`` (score-aware fusion of the keyword leg, ``_fusion.score_lifts``)
gains 0.03 nDCG@10 on LongMemEval and costs Cranfield 0.027, so it is off by default.
This study asks whether a signal known when the query runs, neither per-query leg
confidence nor a word list (both rejected in round three), can turn it on where it helps
and off where it hurts. The legs come from ``benchmarks/leg_weighting_study.py`` (computed
once per collection, kept in ``--cache``); every candidate fuses them with the engine's own
``reciprocal_rank_fusion`` and ``score_lifts``:

- **the query's length**: the keyword lift fading with the query's content words
  (``ratio``: ``lift x min(1, n0 / words)``, the form of ``length_scaled_weight``;
  ``cut``: the whole lift up to ``n1`` words, none beyond), optionally handing what it takes
  from the keyword leg to the vector leg (``vector_score_lift`` for long questions);
- **a statistic of the store**: the lift on only in stores whose memories' lengths spread
  widely (the coefficient of variation of their lengths in words), whose memories are long
  on average, or where many memories are longer than the model reads (256 word pieces);
- **the keyword index's idf of the query**: the lift on only when the query's content words
  are rare in the store (their mean idf over ``log(N + 1)``); and, for open questions, the
  vector share raised when the query holds no rare word;
- **BM25's length normalisation** (``--bm25-b``): the keyword legs computed again with
  another ``b`` (``hybrid_memory.testing.keyword_bm25_b``: the postings read b when they
  score), long memories' keyword scores lowered more (or less), with and without the lift.

    python -m benchmarks.lift_gating_study ../shared/data/locomo ../shared/data/cranfield \\
        ../shared/data/longmemeval --cache /tmp/legs --out lift-gating.json

prints nDCG@10 per collection and LongMemEval type with paired p against the defaults
(and, with ``--peer "plain RRF"``, against that in-process peer of the harness, run on
each collection with the same cached vectors), then the leave-one-collection-out folds
and the leave-one-LongMemEval-type-out folds.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hybrid_memory_eval import PEERS, QUIET, ndcg_at_k
from hybrid_memory_eval.report import per_query_scores
from hybrid_memory_eval.runs import run_peer
from hybrid_memory_eval.significance import paired_randomisation_test

from benchmarks._porter import stem
from benchmarks.fusion_study import Prepared, QueryLegs
from benchmarks.leg_weighting_study import Legs, compute_legs, group_of, load, order, weights
from benchmarks.vector_cache import CachedEmbedding
from hybrid_memory import EmbeddingError
from hybrid_memory.testing import (
    default_embedder,
    default_model_tokenizer_file,
    keyword_bm25_b,
    query_words,
    reciprocal_rank_fusion,
    score_lifts,
)

RRF_K = 60.0
BM25_B_RULES = ("defaults", "keyword lift 0.5 always", "keyword lift 1.0 always")
MODEL_WINDOW = 256  # all-MiniLM-L6-v2 reads this many word pieces of a memory


def lifted_rrf(
    legs: Legs, keyword_lift: float, vector_lift: float, alpha_shift: float = 0.0
) -> dict[str, float]:
    """The engine's fusion of the study's legs, each leg lifted by its own factor, the
    vector share moved by ``alpha_shift`` (within [0, 1])."""
    rankings = {
        "vector": [d for d, _ in legs.vector],
        "keyword": [d for d, _ in legs.keyword],
        "tag": [d for d, _ in legs.tag],
    }
    multipliers: dict[str, Sequence[float]] = {}
    if keyword_lift and legs.keyword:
        multipliers["keyword"] = score_lifts([s for _, s in legs.keyword], keyword_lift)
    if vector_lift and legs.vector:
        multipliers["vector"] = score_lifts([s for _, s in legs.vector], vector_lift)
    alpha = min(1.0, max(0.0, legs.alpha + alpha_shift))
    return reciprocal_rank_fusion(rankings, weights(alpha, legs.tags), RRF_K, multipliers)


def ratio_fade(words: int, full_words: int) -> float:
    """1 up to ``full_words`` content words, ``full_words / words`` beyond."""
    return 1.0 if words <= full_words else full_words / words


def cut_fade(words: int, last_words: int) -> float:
    """1 up to ``last_words`` content words, 0 beyond."""
    return 1.0 if words <= last_words else 0.0


def _terms(text: str, drop_stopwords: bool) -> list[str]:
    return [stem(w.lower()) for w in query_words(text, drop_stopwords=drop_stopwords)]


@dataclass(frozen=True)
class StoreStats:
    """What a store knows about its memories without any query."""

    memories: int
    mean_words: float
    length_cv: float  # standard deviation of the memories' lengths in words over their mean
    beyond_window: float  # share of memories longer than the model's window, in word pieces
    df: Counter[str]

    @classmethod
    def of(cls, prep: Prepared, pieces: Callable[[list[str]], list[int]] | None) -> StoreStats:
        texts = [d.text for d in prep.dataset.storable()]
        lengths = np.array([len(query_words(t, drop_stopwords=False)) for t in texts], float)
        df: Counter[str] = Counter()
        for text in texts:
            df.update(set(_terms(text, False)))
        beyond = float(np.mean(np.array(pieces(texts)) > MODEL_WINDOW)) if pieces else 0.0
        cv = float(lengths.std() / lengths.mean()) if lengths.mean() else 0.0
        return cls(len(texts), float(lengths.mean()), cv, beyond, df)

    def query_idf(self, text: str, rarest: bool = False) -> float:
        """The mean (``rarest``: the largest) BM25 idf of the query's content words held
        by the store, over log(N + 1)."""
        held = [t for t in _terms(text, True) if self.df[t]]
        if not held:
            return 0.0
        n = self.memories
        idf = [math.log((n - self.df[t] + 0.5) / (self.df[t] + 0.5) + 1) for t in held]
        return (max(idf) if rarest else statistics.fmean(idf)) / math.log(n + 1)


def word_pieces() -> Callable[[list[str]], list[int]] | None:
    """Each text's length in the default model's word pieces (None without the model)."""
    try:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(default_model_tokenizer_file()))
    except (ImportError, OSError, EmbeddingError):  # left out, and the output says so
        return None
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return lambda texts: [len(e.ids) for e in tokenizer.encode_batch(texts)]


# A candidate says, for one query in one store: the keyword leg's lift, the vector leg's
# lift and the shift of the vector share.
Rule = Callable[[QueryLegs, StoreStats], tuple[float, float, float]]


def fixed(keyword: float, vector: float = 0.0) -> Rule:
    return lambda q, s: (keyword, vector, 0.0)


def fading(lift: float, fade: Callable[[int, int], float], words: int, vector: float) -> Rule:
    """The keyword lift times ``fade``; ``vector`` times what the fade took away."""

    def rule(q: QueryLegs, s: StoreStats) -> tuple[float, float, float]:
        kept = fade(q.words, words)
        return lift * kept, vector * (1 - kept), 0.0

    return rule


Test = Callable[[QueryLegs, StoreStats], bool]


def store_at_least(statistic: str, least: float) -> Test:
    return lambda q, s: float(getattr(s, statistic)) >= least


def query_idf_at_least(least: float) -> Test:
    return lambda q, s: s.query_idf(q.text) >= least


def rarest_idf_below(most: float) -> Test:
    return lambda q, s: s.query_idf(q.text, rarest=True) < most


def gated(lift: float, on: Test) -> Rule:
    return lambda q, s: (lift if on(q, s) else 0.0, 0.0, 0.0)


def shifted(shift: float, on: Test) -> Rule:
    return lambda q, s: (0.0, 0.0, shift if on(q, s) else 0.0)


def candidates() -> dict[str, Rule]:
    out: dict[str, Rule] = {"defaults": fixed(0.0)}
    for lift in (0.5, 1.0):
        out[f"keyword lift {lift} always"] = fixed(lift)
    # the query's length
    for lift in (0.5, 1.0):
        for n0 in (4, 6, 8, 10):
            out[f"keyword lift {lift} x min(1, {n0}/words)"] = fading(lift, ratio_fade, n0, 0)
        for n1 in (5, 7, 9):
            out[f"keyword lift {lift} up to {n1} words"] = fading(lift, cut_fade, n1, 0)
    for n0 in (6, 8):
        for vector in (0.5, 1.0):
            name = f"keyword lift 1.0 x min(1, {n0}/words), vector lift {vector} x the rest"
            out[name] = fading(1.0, ratio_fade, n0, vector)
        for vector in (0.5, 1.0):
            out[f"vector lift {vector} beyond {n0} words only"] = fading(0, cut_fade, n0, vector)
    # a statistic of the store
    for lift in (0.5, 1.0):
        for cv in (0.55, 0.6):
            out[f"keyword lift {lift} when memory lengths' cv >= {cv}"] = gated(
                lift, store_at_least("length_cv", cv)
            )
        for words in (50, 95):
            out[f"keyword lift {lift} when memories' mean words >= {words}"] = gated(
                lift, store_at_least("mean_words", words)
            )
        out[f"keyword lift {lift} when >= 35% of memories exceed the model's window"] = gated(
            lift, store_at_least("beyond_window", 0.35)
        )
    # the keyword index's idf of the query
    for lift in (0.5, 1.0):
        for least in (0.35, 0.4, 0.45):
            out[f"keyword lift {lift} when the query's mean idf/log N >= {least}"] = gated(
                lift, query_idf_at_least(least)
            )
    # open questions (preference): no rare word in the query, so the keyword leg can only
    # match its common words; the vector share raised for such queries
    for shift in (0.2, 0.4):
        for most in (0.5, 0.6):
            out[f"alpha +{shift} when the query's rarest word's idf/log N < {most}"] = shifted(
                shift, rarest_idf_below(most)
            )
    return out


def mean(values: Sequence[float]) -> float:
    return round(statistics.fmean(values), 4)


def p_value(a: dict[str, float], b: dict[str, float], ids: Sequence[str]) -> float:
    return round(paired_randomisation_test([a[i] for i in ids], [b[i] for i in ids]), 4)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("datasets", nargs="+")
    parser.add_argument("--cache", help="a folder keeping each collection's prepared legs")
    parser.add_argument("--out", help="write every figure and the folds as JSON")
    parser.add_argument("--peer", help="also pair every candidate with this harness peer")
    parser.add_argument(
        "--bm25-b",
        type=float,
        action="append",
        default=[],
        help="also measure the defaults and the keyword lift with BM25's b set to this",
    )
    args = parser.parse_args(argv)
    peer_name = None
    if args.peer:
        found = [n for n in PEERS if n.lower().startswith(args.peer.lower())]
        if len(found) != 1:
            parser.error(f"--peer must name one of {sorted(PEERS)}; got {args.peer!r}")
        peer_name = found[0]
    preps = [load(p, args.cache, None) for p in args.datasets]
    names = [p.name for p in preps]
    pieces = word_pieces()
    stats = {p.name: StoreStats.of(p, pieces) for p in preps}
    for name, st in stats.items():
        print(
            f"{name}: {st.memories} memories, mean {st.mean_words:.1f} words, length cv "
            f"{st.length_cv:.2f}, beyond the model's window {st.beyond_window:.3f}"
            + ("" if pieces else " (model absent: not measured)"),
            flush=True,
        )
    groups = {p.name: {q.id: group_of(p, q.id) for q in p.queries} for p in preps}
    per_query: dict[str, dict[str, dict[str, float]]] = {}

    def measure(prep: Prepared, rules: dict[str, Rule], prefix: str = "") -> None:
        legs = {q.id: compute_legs(prep, q) for q in prep.queries}
        for name, rule in rules.items():
            rows = per_query.setdefault(prefix + name, {}).setdefault(prep.name, {})
            for q in prep.queries:
                ranked = order(lifted_rrf(legs[q.id], *rule(q, stats[prep.name])))[:10]
                rows[q.id] = ndcg_at_k(ranked, prep.dataset.qrels.get(q.id, {}), 10)

    for prep in preps:
        measure(prep, candidates())
    # BM25's length normalisation: the keyword legs computed again with another b
    for b in args.bm25_b:
        with keyword_bm25_b(b):
            for path in args.datasets:
                cache = None if args.cache is None else str(Path(args.cache) / f"bm25-b-{b}")
                rules = {n: candidates()[n] for n in BM25_B_RULES}
                measure(load(path, cache, None), rules, f"bm25 b {b}: ")
    if peer_name is not None:
        embedding = CachedEmbedding(default_embedder())
        for prep in preps:
            run = run_peer(PEERS[peer_name], embedding, prep.dataset, k=10, progress=QUIET)
            scores = per_query_scores(run, prep.dataset, k=10)
            per_query.setdefault(peer_name, {})[prep.name] = {
                q.id: scores[q.id]["ndcg@10"] for q in prep.queries
            }
    base = per_query["defaults"]
    # units: every collection, and LongMemEval's types
    units: dict[str, tuple[str, list[str]]] = {n: (n, sorted(base[n])) for n in names}
    lme = "longmemeval" if "longmemeval" in names else None
    types = sorted({g for g in groups[lme].values() if g}) if lme else []
    for group in types:
        units[f"lme {group}"] = (
            lme or "",
            sorted(i for i in base[lme or ""] if groups[lme or ""][i] == group),
        )
    table: dict[str, dict[str, float]] = {}
    for name, by_prep in per_query.items():
        row: dict[str, float] = {}
        for unit, (prep_name, ids) in units.items():
            scores = by_prep[prep_name]
            row[unit] = mean([scores[i] for i in ids])
            row[f"{unit} p"] = p_value(scores, base[prep_name], ids)
            if peer_name is not None:
                row[f"{unit} p vs peer"] = p_value(scores, per_query[peer_name][prep_name], ids)
        table[name] = row
        print(
            f"{name:70s} " + "  ".join(f"{u}: {row[u]} ({row[u + ' p']})" for u in units),
            flush=True,
        )
    folds = []

    def fold(held: str, others: list[str]) -> None:
        def on_others(c: str) -> float:
            return statistics.fmean(table[c][u] for u in others)

        best = max(
            (c for c in table if c != peer_name),
            key=lambda c: (round(on_others(c), 6), c == "defaults"),
        )
        result = {
            "held_out": held,
            "chosen": best,
            "on_others": round(on_others(best), 4),
            "defaults_on_others": round(on_others("defaults"), 4),
            "on_held_out": table[best][held],
            "defaults_on_held_out": table["defaults"][held],
            "p": table[best][f"{held} p"],
        }
        folds.append(result)
        print(json.dumps(result), flush=True)

    for held in names if len(names) > 1 else []:
        fold(held, [n for n in names if n != held])
    for group in types:
        held = f"lme {group}"
        # LongMemEval without the held-out type stands for LongMemEval among the others
        rest = f"lme without {group}"
        rest_ids = [i for i in base[lme or ""] if groups[lme or ""][i] != group]
        for name in table:
            table[name][rest] = mean([per_query[name][lme or ""][i] for i in rest_ids])
        fold(held, [n for n in names if n != lme] + [rest])
    if args.out:
        Path(args.out).write_text(
            json.dumps(
                {
                    "stores": {
                        n: {
                            "memories": s.memories,
                            "mean_words": round(s.mean_words, 2),
                            "length_cv": round(s.length_cv, 3),
                            "beyond_window": round(s.beyond_window, 3),
                        }
                        for n, s in stats.items()
                    },
                    "peer": peer_name,
                    "table": table,
                    "folds": folds,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
