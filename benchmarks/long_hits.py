"""How much of the keyword leg's head the store's very long memories take, at several b.

A diagnostic for docs/quality-study.md ("Issue 43, round five"), over the legs that
``benchmarks/bm25_b_study.py`` keeps in ``--cache``: a memory counts as very long when it
has more than ``--times`` the store's mean words (repeats counted). For each store it
prints their share of the memories and of the judged memories, and their share of the
keyword leg's top 10 and of the fused top 10 (the engine's defaults otherwise) at each b
of the study's grid asked for.

    python -m benchmarks.long_hits ../shared/data/longmemeval /tmp/locomo-long/locomo-long \\
        --cache /tmp/legs5
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from benchmarks.bm25_b_study import Hits, keyword_legs
from benchmarks.fusion_study import Prepared, QueryLegs
from benchmarks.leg_weighting_study import compute_legs, load, order
from benchmarks.lift_gating_study import lifted_rrf
from hybrid_memory.testing import text_words


def fused_top(prep: Prepared, keyword: Hits, q: QueryLegs) -> list[str]:
    """The engine's fusion's top 10 (defaults, no lift) with this keyword leg."""
    swapped = replace(q, keyword={True: keyword, False: q.keyword[False]})
    return order(lifted_rrf(compute_legs(prep, swapped), 0.0, 0.0))[:10]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("datasets", nargs="+")
    parser.add_argument("--cache", required=True)
    parser.add_argument("--times", type=float, default=2.0)
    parser.add_argument("--b", type=float, action="append", default=[])
    parser.add_argument("--out", help="write the figures as JSON")
    args = parser.parse_args(argv)
    out = {}
    for path in args.datasets:
        prep = load(path, args.cache, None)
        by_b, _ = keyword_legs(path, args.cache)
        words = {d.id: len(text_words(d.text)) for d in prep.dataset.storable()}
        floor = args.times * float(np.mean(list(words.values())))
        long = {i for i, n in words.items() if n > floor}
        judged = {
            d for q in prep.queries for d, g in prep.dataset.qrels.get(q.id, {}).items() if g > 0
        }
        row: dict[str, float] = {
            "very long: more words than": round(floor, 1),
            "share of memories": round(len(long) / len(words), 3),
            "share of judged memories": round(len(judged & long) / max(len(judged), 1), 3),
        }
        for b in args.b or [0.5, 0.75, 1.0]:
            tops = [d for hits in by_b[b].values() for d, _ in hits[:10]]
            row[f"share of keyword top 10 at b {b}"] = round(
                sum(d in long for d in tops) / max(len(tops), 1), 3
            )
            fused = [d for q in prep.queries for d in fused_top(prep, by_b[b][q.id], q)]
            row[f"share of fused top 10 at b {b}"] = round(
                sum(d in long for d in fused) / max(len(fused), 1), 3
            )
        out[prep.name] = row
        print(prep.name, json.dumps(row), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
