"""The legs' agreement as a query-time signal (issue 43, round six).

Round four found no query-time signal (question length, idf, store statistics) that turns
``keyword_score_lift`` on where it helps (LongMemEval) and off where it hurts (Cranfield);
round five found BM25's b cannot be read from the lengths, and ended: "a signal that could
must read the legs' agreement or the speaker of a memory". This study tests the legs'
agreement: per query, computed from the legs themselves (no judgments, no word list),
deciding (a) whether the keyword lift applies and/or (b) the keyword leg's weight (alpha
moved toward the vector leg where the legs disagree, or away from it). The legs are those
of ``benchmarks/leg_weighting_study.py`` (cached per collection with ``--cache``); every
candidate fuses them with the engine's own ``reciprocal_rank_fusion`` and ``score_lifts``
(``benchmarks/lift_gating_study.lifted_rrf``). The signals, each in [0, 1] but tau:

- ``overlap@10``: the share of the keyword top 10 that is also in the vector top 10;
- ``cover@10``: the share of the keyword top 10 that the vector leg ranks anywhere in its
  100 candidates;
- ``rbo``: rank-biased overlap of the two lists (p 0.9, to depth 100, Webber et al. 2010);
- ``tau@10``: Kendall's tau of the two legs' ranks over the union of their top 10s (a
  hit a leg does not hold ranks 101 there), in [-1, 1];
- ``bm25 gap``: the keyword leg's own peak, (s1 - s10) / s1 of its BM25 scores.

Candidate families (t a threshold on the signal's grid, L the lift, d the alpha shift):
lift L when signal >= t; lift L when signal < t; alpha + d (vectors heavier) when
signal < t; alpha - d when signal < t; alpha + d x (m - signal) (continuous); lift 0.5
when signal >= t with alpha + d when signal < t. References: the defaults, the lift
always, alpha moved for every query.

    python -m benchmarks.agreement_study ../shared/data/locomo ../shared/data/cranfield \\
        ../shared/data/longmemeval --check /tmp/q6/locomo-runs --cache /tmp/legs6 \\
        --peer "plain RRF" --out agreement.json

prints each store's signal distribution and how the per-query gain of the lift (and of a
vector-heavier alpha) follows each signal, every candidate's nDCG@10 with paired p against
the defaults (and the peer), then leave-one-collection-out: within each family and over
all candidates, the constants with the best mean nDCG@10 over the other collections named
first (``--check`` stores are measured, never fitted on), judged on the one held out and
on every check store; and leave-one-LongMemEval-type-out.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from hybrid_memory_eval import PEERS, QUIET, ndcg_at_k
from hybrid_memory_eval.report import per_query_scores
from hybrid_memory_eval.runs import run_peer
from hybrid_memory_eval.significance import paired_randomisation_test

from benchmarks.fusion_study import DEPTH, Prepared
from benchmarks.leg_weighting_study import Legs, compute_legs, group_of, load, order
from benchmarks.lift_gating_study import lifted_rrf
from benchmarks.vector_cache import CachedEmbedding
from hybrid_memory.testing import default_embedder

HEAD = 10
RBO_P = 0.9


def overlap(legs: Legs) -> float | None:
    if not legs.keyword:
        return None
    k = [d for d, _ in legs.keyword[:HEAD]]
    v = {d for d, _ in legs.vector[:HEAD]}
    return sum(d in v for d in k) / len(k)


def cover(legs: Legs) -> float | None:
    if not legs.keyword:
        return None
    k = [d for d, _ in legs.keyword[:HEAD]]
    v = {d for d, _ in legs.vector}
    return sum(d in v for d in k) / len(k)


def rbo(legs: Legs) -> float | None:
    """Rank-biased overlap to the shorter list's depth (the truncated sum, normalised by
    the weight it could reach there, so short keyword lists are not read as disagreement)."""
    if not legs.keyword:
        return None
    a = [d for d, _ in legs.keyword]
    b = [d for d, _ in legs.vector]
    depth = min(len(a), len(b), DEPTH)
    seen_a: set[str] = set()
    seen_b: set[str] = set()
    common = 0
    total = reach = 0.0
    for i in range(depth):
        x, y = a[i], b[i]
        if x == y:
            common += 1
        else:
            common += (x in seen_b) + (y in seen_a)
        seen_a.add(x)
        seen_b.add(y)
        w = RBO_P**i
        total += w * common / (i + 1)
        reach += w
    return total / reach if reach else 0.0


def tau(legs: Legs) -> float | None:
    if not legs.keyword:
        return None
    kr = {d: r for r, (d, _) in enumerate(legs.keyword, start=1)}
    vr = {d: r for r, (d, _) in enumerate(legs.vector, start=1)}
    union = list(
        dict.fromkeys([d for d, _ in legs.keyword[:HEAD]] + [d for d, _ in legs.vector[:HEAD]])
    )
    if len(union) < 2:
        return 1.0
    x = np.array([kr.get(d, DEPTH + 1) for d in union], float)
    y = np.array([vr.get(d, DEPTH + 1) for d in union], float)
    dx = np.sign(x[:, None] - x[None, :])
    dy = np.sign(y[:, None] - y[None, :])
    pairs = len(union) * (len(union) - 1)
    return float((dx * dy).sum() / pairs)


def bm25_gap(legs: Legs) -> float | None:
    if not legs.keyword:
        return None
    top = legs.keyword[0][1]
    tenth = legs.keyword[min(HEAD, len(legs.keyword)) - 1][1]
    return (top - tenth) / top if top > 0 else 0.0


SIGNALS: dict[str, Callable[[Legs], float | None]] = {
    "overlap@10": overlap,
    "cover@10": cover,
    "rbo": rbo,
    "tau@10": tau,
    "bm25 gap": bm25_gap,
}
GRID = {
    "overlap@10": (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7),
    "cover@10": (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
    "rbo": (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5),
    "tau@10": (-0.6, -0.4, -0.2, 0.0, 0.2, 0.4),
    "bm25 gap": (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7),
}
MIDDLE = {"overlap@10": 0.3, "cover@10": 0.6, "rbo": 0.2, "tau@10": -0.2, "bm25 gap": 0.35}

# A candidate maps one query's signals to (keyword lift, vector lift, alpha shift).
Signals = dict[str, float | None]
Rule = Callable[[Signals], tuple[float, float, float]]


def fixed(lift: float, shift: float = 0.0) -> Rule:
    return lambda s: (lift, 0.0, shift)


def lift_when(signal: str, t: float, lift: float, agree: bool) -> Rule:
    def rule(s: Signals) -> tuple[float, float, float]:
        v = s[signal]
        on = v is not None and (v >= t if agree else v < t)
        return (lift if on else 0.0), 0.0, 0.0

    return rule


def alpha_when_disagree(signal: str, t: float, shift: float) -> Rule:
    def rule(s: Signals) -> tuple[float, float, float]:
        v = s[signal]
        return 0.0, 0.0, (shift if v is not None and v < t else 0.0)

    return rule


def alpha_linear(signal: str, middle: float, slope: float) -> Rule:
    def rule(s: Signals) -> tuple[float, float, float]:
        v = s[signal]
        return 0.0, 0.0, (0.0 if v is None else round(slope * (middle - v), 4))

    return rule


def lift_or_alpha(signal: str, t: float, lift: float, shift: float) -> Rule:
    def rule(s: Signals) -> tuple[float, float, float]:
        v = s[signal]
        if v is None:
            return 0.0, 0.0, 0.0
        return (lift, 0.0, 0.0) if v >= t else (0.0, 0.0, shift)

    return rule


def candidates() -> dict[str, tuple[str, Rule]]:
    """name -> (family, rule)."""
    out: dict[str, tuple[str, Rule]] = {"defaults": ("reference", fixed(0.0))}
    for lift in (0.5, 1.0):
        out[f"keyword lift {lift} always"] = ("reference", fixed(lift))
    for shift in (-0.2, -0.1, 0.1, 0.2, 0.3):
        out[f"alpha {shift:+} always"] = ("reference", fixed(0.0, shift))
    for sig, grid in GRID.items():
        for lift in (0.5, 1.0):
            for t in grid:
                out[f"lift {lift} when {sig} >= {t}"] = (
                    f"lift {lift} when {sig} high",
                    lift_when(sig, t, lift, True),
                )
                out[f"lift {lift} when {sig} < {t}"] = (
                    f"lift {lift} when {sig} low",
                    lift_when(sig, t, lift, False),
                )
        for shift in (0.1, 0.2, 0.3):
            for t in grid:
                out[f"alpha +{shift} when {sig} < {t}"] = (
                    f"alpha + when {sig} low",
                    alpha_when_disagree(sig, t, shift),
                )
        for shift in (0.1, 0.2):
            for t in grid:
                out[f"alpha -{shift} when {sig} < {t}"] = (
                    f"alpha - when {sig} low",
                    alpha_when_disagree(sig, t, -shift),
                )
        for slope in (0.25, 0.5, 1.0):
            m = MIDDLE[sig]
            out[f"alpha + {slope} x ({m} - {sig})"] = (
                f"alpha linear in {sig}",
                alpha_linear(sig, m, slope),
            )
        for shift in (0.1, 0.2):
            for t in grid:
                out[f"lift 0.5 when {sig} >= {t}, else alpha +{shift}"] = (
                    f"lift when {sig} high, alpha + when low",
                    lift_or_alpha(sig, t, 0.5, shift),
                )
    return out


def mean(values: Sequence[float]) -> float:
    return round(statistics.fmean(values), 4)


def p_value(a: dict[str, float], b: dict[str, float], ids: Sequence[str]) -> float:
    return round(paired_randomisation_test([a[i] for i in ids], [b[i] for i in ids]), 4)


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    if len(x) < 3:
        return 0.0
    rx = np.argsort(np.argsort(x)).astype(float)
    ry = np.argsort(np.argsort(y)).astype(float)
    if rx.std() == 0 or ry.std() == 0:
        return 0.0
    return round(float(np.corrcoef(rx, ry)[0, 1]), 3)


def logistic_gate(
    x: np.ndarray, gain: np.ndarray, steps: int = 3000, rate: float = 0.1, ridge: float = 1e-3
) -> Callable[[np.ndarray], np.ndarray]:
    """A cost-weighted logistic regression of "the change helps this query" on the signals
    (each query weighted by the size of its gain or loss, ties left out), as a gate: on where
    the predicted probability exceeds one half, i.e. where the weighted evidence says the
    expected gain is positive."""
    keep = gain != 0
    mu = x[keep].mean(axis=0)
    sd = np.where(x[keep].std(axis=0) > 0, x[keep].std(axis=0), 1.0)
    z = np.hstack([np.ones((int(keep.sum()), 1)), (x[keep] - mu) / sd])
    y = (gain[keep] > 0).astype(float)
    w = np.abs(gain[keep]) / np.abs(gain[keep]).sum()
    beta = np.zeros(z.shape[1])
    for _ in range(steps):
        prob = 1 / (1 + np.exp(-z @ beta))
        beta -= rate * (z.T @ (w * (prob - y)) + ridge * np.r_[0, beta[1:]])

    def predict(features: np.ndarray) -> np.ndarray:
        zz = np.hstack([np.ones((len(features), 1)), (features - mu) / sd])
        return np.asarray(zz @ beta > 0)

    predict.beta = beta  # type: ignore[attr-defined]
    return predict


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("datasets", nargs="+", help="the collections of the folds")
    parser.add_argument("--check", action="append", default=[], help="measured, not fitted on")
    parser.add_argument("--cache", help="a folder keeping each collection's prepared legs")
    parser.add_argument("--out", help="write every figure and the folds as JSON")
    parser.add_argument("--peer", help="also pair the decisive rows with this harness peer")
    args = parser.parse_args(argv)
    peer_name = None
    if args.peer:
        found = [n for n in PEERS if n.lower().startswith(args.peer.lower())]
        if len(found) != 1:
            parser.error(f"--peer must name one of {sorted(PEERS)}; got {args.peer!r}")
        peer_name = found[0]
    preps: list[Prepared] = [load(p, args.cache, None) for p in [*args.datasets, *args.check]]
    names = [p.name for p in preps[: len(args.datasets)]]
    checks = [p.name for p in preps[len(args.datasets) :]]
    rules = candidates()
    per_query: dict[str, dict[str, dict[str, float]]] = {}
    signals: dict[str, dict[str, Signals]] = {}
    groups = {p.name: {q.id: group_of(p, q.id) for q in p.queries} for p in preps}
    for prep in preps:
        legs = {q.id: compute_legs(prep, q) for q in prep.queries}
        sig = {qid: {n: f(L) for n, f in SIGNALS.items()} for qid, L in legs.items()}
        signals[prep.name] = sig
        memo: dict[tuple[str, float, float, float], float] = {}
        for name, (_, rule) in rules.items():
            rows = per_query.setdefault(name, {}).setdefault(prep.name, {})
            for q in prep.queries:
                kl, vl, shift = rule(sig[q.id])
                key = (q.id, kl, vl, shift)
                if key not in memo:
                    ranked = order(lifted_rrf(legs[q.id], kl, vl, shift))[:10]
                    memo[key] = ndcg_at_k(ranked, prep.dataset.qrels.get(q.id, {}), 10)
                rows[q.id] = memo[key]
        print(f"{prep.name}: {len(prep.queries)} queries, {len(memo)} fusions", flush=True)
    if peer_name is not None:
        embedding = CachedEmbedding(default_embedder())
        for prep in preps:
            run = run_peer(PEERS[peer_name], embedding, prep.dataset, k=10, progress=QUIET)
            scores = per_query_scores(run, prep.dataset, k=10)
            per_query.setdefault(peer_name, {})[prep.name] = {
                q.id: scores[q.id]["ndcg@10"] for q in prep.queries
            }
    base = per_query["defaults"]

    # --- how the signals spread, and whether the gains follow them ----------------------
    diagnostics: dict[str, dict[str, object]] = {}
    gains = {
        "lift 0.5": "keyword lift 0.5 always",
        "lift 1.0": "keyword lift 1.0 always",
        "alpha +0.2": "alpha +0.2 always",
        "alpha -0.2": "alpha -0.2 always",
    }
    for prep in preps:
        d: dict[str, object] = {}
        for sname in SIGNALS:
            ids = [i for i, s in signals[prep.name].items() if s[sname] is not None]
            values = [float(signals[prep.name][i][sname]) for i in ids]  # type: ignore[arg-type]
            entry: dict[str, object] = {
                "n": len(values),
                "p10": round(float(np.percentile(values, 10)), 3),
                "median": round(float(np.median(values)), 3),
                "p90": round(float(np.percentile(values, 90)), 3),
            }
            for gname, cand in gains.items():
                delta = [per_query[cand][prep.name][i] - base[prep.name][i] for i in ids]
                entry[f"spearman with {gname} gain"] = spearman(values, delta)
                bins = {}
                cuts = GRID[sname]
                edges = [cuts[0], cuts[len(cuts) // 2], cuts[-1]]
                for lo, hi in zip([-9.0, *edges], [*edges, 9.0], strict=True):
                    inside = [dd for v, dd in zip(values, delta, strict=True) if lo <= v < hi]
                    if inside:
                        bins[f"[{lo}, {hi})"] = (len(inside), round(statistics.fmean(inside), 4))
                entry[f"{gname} gain by bin"] = bins
            d[sname] = entry
        diagnostics[prep.name] = d
        print(f"\n{prep.name}:", flush=True)
        for sname, entry in d.items():
            print(f"  {sname:10s} {json.dumps(entry)}", flush=True)

    # --- every candidate ------------------------------------------------------------------
    units: dict[str, tuple[str, list[str]]] = {n: (n, sorted(base[n])) for n in [*names, *checks]}
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
            row[unit] = mean([by_prep[prep_name][i] for i in ids])
        table[name] = row
    p_cache: dict[tuple[str, str, str], float] = {}

    def p_of(name: str, unit: str, against: str = "defaults") -> float:
        key = (name, unit, against)
        if key not in p_cache:
            prep_name, ids = units[unit]
            p_cache[key] = p_value(per_query[name][prep_name], per_query[against][prep_name], ids)
        return p_cache[key]

    # p against the defaults on every collection for every candidate (types on demand)
    for name in table:
        for unit in [*names, *checks]:
            table[name][f"{unit} p"] = p_of(name, unit)
    for name in table:
        print(
            f"{name:55s} "
            + "  ".join(
                f"{u}: {table[name][u]} ({table[name][u + ' p']})" for u in [*names, *checks]
            ),
            flush=True,
        )

    # --- leave-one-collection-out -----------------------------------------------------------
    families: dict[str, list[str]] = {}
    for name, (family, _) in rules.items():
        families.setdefault(family, []).append(name)
    families["any candidate"] = list(rules)
    folds = []
    type_folds = []

    def choose(pool: list[str], fit_units: list[str]) -> str:
        return max(
            pool,
            key=lambda c: (
                round(statistics.fmean(table[c][u] for u in fit_units), 6),
                c == "defaults",
            ),
        )

    for family, pool in families.items():
        for held in names if len(names) > 1 else []:
            fit = [n for n in names if n != held]
            best = choose(pool, fit)
            result: dict[str, object] = {
                "family": family,
                "held_out": held,
                "chosen": best,
                "on_others": mean([table[best][u] for u in fit]),
                "defaults_on_others": mean([table["defaults"][u] for u in fit]),
                "on_held_out": table[best][held],
                "defaults_on_held_out": table["defaults"][held],
                "p": p_of(best, held),
            }
            for check in checks:
                result[f"on {check}"] = table[best][check]
                result[f"defaults on {check}"] = table["defaults"][check]
                result[f"{check} p"] = p_of(best, check)
            folds.append(result)
        wins = [f for f in folds if f["family"] == family]
        print(
            f"fold {family:45s} "
            + "  ".join(
                f"{f['held_out']}: {f['chosen']!r} {f['on_held_out']} vs "
                f"{f['defaults_on_held_out']} (p {f['p']})"
                for f in wins
            ),
            flush=True,
        )
    if lme:
        for group in types:
            held = f"lme {group}"
            rest = f"lme without {group}"
            rest_ids = [i for i in base[lme] if groups[lme][i] != group]
            for name in table:
                table[name][rest] = mean([per_query[name][lme][i] for i in rest_ids])
            fit = [n for n in names if n != lme] + [rest]
            best = choose(list(rules), fit)
            tf = {
                "held_out": held,
                "chosen": best,
                "on_held_out": table[best][held],
                "defaults_on_held_out": table["defaults"][held],
                "p": p_of(best, held),
            }
            type_folds.append(tf)
            print(json.dumps(tf), flush=True)

    # --- all five signals at once: a cost-weighted logistic gate, fitted on the other
    # collections' queries, deciding per query on the held-out one (and the checks)
    combined = []
    change_of = {
        "lift 0.5": "keyword lift 0.5 always",
        "lift 1.0": "keyword lift 1.0 always",
        "alpha +0.2": "alpha +0.2 always",
        "alpha -0.2": "alpha -0.2 always",
    }

    def features(prep_name: str) -> tuple[list[str], np.ndarray]:
        ids = sorted(base[prep_name])
        x = np.array([[signals[prep_name][i][s] or 0.0 for s in SIGNALS] for i in ids], dtype=float)
        return ids, x

    for change, cand in change_of.items():
        for held in names if len(names) > 1 else []:
            fit = [n for n in names if n != held]
            xs, gs = [], []
            for n in fit:
                ids, x = features(n)
                xs.append(x)
                gs.append(np.array([per_query[cand][n][i] - base[n][i] for i in ids]))
            gate = logistic_gate(np.vstack(xs), np.concatenate(gs))
            result: dict[str, object] = {
                "change": change,
                "held_out": held,
                "coefficients": [round(float(b), 3) for b in gate.beta],  # type: ignore[attr-defined]
            }
            for n in [held, *checks]:
                ids, x = features(n)
                on = gate(x)
                gated = {
                    i: (per_query[cand][n][i] if o else base[n][i])
                    for i, o in zip(ids, on, strict=True)
                }
                result[f"{n} share on"] = round(float(on.mean()), 3)
                result[n] = mean(list(gated.values()))
                result[f"{n} defaults"] = table["defaults"][n]
                result[f"{n} p"] = p_value(gated, base[n], ids)
            combined.append(result)
            print("combined " + json.dumps(result), flush=True)

    # --- the decisive rows: references, every fold's choice, with types and the peer --------
    decisive = list(
        dict.fromkeys(
            [n for n, (f, _) in rules.items() if f == "reference"]
            + [str(f["chosen"]) for f in folds]
        )
    )
    detail: dict[str, dict[str, float]] = {}
    for name in decisive:
        row = dict(table[name])
        for unit in units:
            row[f"{unit} p"] = p_of(name, unit)
            if peer_name is not None:
                row[f"{unit} p vs peer"] = p_of(name, unit, peer_name)
        detail[name] = row
    if peer_name is not None:
        detail[peer_name] = {
            **table[peer_name],
            **{f"{u} p": p_of(peer_name, u) for u in units},
        }
    for name, row in detail.items():
        print(
            f"{name:55s} "
            + "  ".join(
                f"{u}: {row[u]} ({row.get(u + ' p')}"
                + (f"; {row[u + ' p vs peer']})" if f"{u} p vs peer" in row else ")")
                for u in units
            ),
            flush=True,
        )
    if args.out:
        Path(args.out).write_text(
            json.dumps(
                {
                    "collections": names,
                    "checks": checks,
                    "peer": peer_name,
                    "signals": diagnostics,
                    "decisive": detail,
                    "folds": folds,
                    "type_folds": type_folds,
                    "combined_gate": combined,
                    "table": table,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
