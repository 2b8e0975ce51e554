"""Round six's agreement signals read against the raw query vector's leg (issue 43).

``benchmarks/agreement_study.py`` measures the legs' agreement on the vector leg the engine
fuses, which the keyword top's feedback has already pulled toward the keyword leg. This
check computes the same signals against the vector leg of the query's own embedding (no
feedback) and asks the study's diagnostic question: within each store, does the per-query
gain of the keyword lift (or of a vector-heavier alpha) follow the signal? The fused
rankings are the engine's (feedback in), only the signal changes.

    python -m benchmarks.agreement_raw_vector ../shared/data/locomo ../shared/data/cranfield \\
        ../shared/data/longmemeval --cache /tmp/legs6 --out raw-vector.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
from hybrid_memory_eval import ndcg_at_k

from benchmarks.agreement_study import SIGNALS, spearman
from benchmarks.fusion_study import DEPTH
from benchmarks.leg_weighting_study import compute_legs, load, order
from benchmarks.lift_gating_study import lifted_rrf

CHANGES = {"lift 0.5": (0.5, 0.0), "lift 1.0": (1.0, 0.0), "alpha +0.2": (0.0, 0.2)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("datasets", nargs="+")
    parser.add_argument("--cache", help="a folder keeping each collection's prepared legs")
    parser.add_argument("--out", help="write the figures as JSON")
    args = parser.parse_args(argv)
    out: dict[str, dict[str, dict[str, object]]] = {}
    for path in args.datasets:
        prep = load(path, args.cache, None)
        rows: dict[str, dict[str, object]] = {}
        values: dict[str, list[float]] = {s: [] for s in SIGNALS}
        gains: dict[str, list[float]] = {c: [] for c in CHANGES}
        kept: dict[str, list[int]] = {s: [] for s in SIGNALS}
        for n, q in enumerate(prep.queries):
            legs = compute_legs(prep, q)
            raw = replace(legs, vector=prep.nearest(q, q.vector, DEPTH))
            qrels = prep.dataset.qrels.get(q.id, {})
            base = ndcg_at_k(order(lifted_rrf(legs, 0.0, 0.0))[:10], qrels, 10)
            for change, (lift, shift) in CHANGES.items():
                ranked = order(lifted_rrf(legs, lift, 0.0, shift))[:10]
                gains[change].append(ndcg_at_k(ranked, qrels, 10) - base)
            for s, f in SIGNALS.items():
                v = f(raw)
                if v is not None:
                    values[s].append(v)
                    kept[s].append(n)
        for s in SIGNALS:
            entry: dict[str, object] = {
                "median": round(float(np.median(values[s])), 3),
                "p10": round(float(np.percentile(values[s], 10)), 3),
                "p90": round(float(np.percentile(values[s], 90)), 3),
            }
            for change in CHANGES:
                delta = [gains[change][i] for i in kept[s]]
                entry[f"spearman with {change} gain"] = spearman(values[s], delta)
                lo, hi = np.percentile(values[s], [33.3, 66.7])
                for name, test in (
                    ("low third", lambda v, lo=lo: v < lo),
                    ("middle third", lambda v, lo=lo, hi=hi: lo <= v < hi),
                    ("high third", lambda v, hi=hi: v >= hi),
                ):
                    inside = [d for v, d in zip(values[s], delta, strict=True) if test(v)]
                    entry[f"{change} gain, {name}"] = (
                        round(statistics.fmean(inside), 4) if inside else None
                    )
            rows[s] = entry
        out[prep.name] = rows
        for s, entry in rows.items():
            print(f"{prep.name:20s} {s:10s} {json.dumps(entry)}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
