"""The keyword leg alone at a store size, without Chroma or vectors.

The scale benchmark's memories (``benchmarks/scale.py``: real sentences from
``../shared/data`` recombined, the same seed) go into an in-memory keyword index, and its
200 timed questions are ranked at the search's depth (100), a few passes each. With
``--compare``, every pass also ranks them with the cut the keyword leg used before
(a partial sort of every matched posting), the two alternating, and checks that both
give the same rankings and scores. With ``--kernel``, the numpy path and the compiled
loops (numba, ``hybrid_memory/_keyword/scoring_kernel.py``) alternate instead, and the
rankings and scores of the two are checked to be identical to the bit. With ``--cold``,
a 64 MB buffer is read and written before each question, as a search's Chroma query
leaves the processor's caches between two keyword legs. Figures only, no assertions; the
machine's load average is printed beside them.

    python benchmarks/keyword_leg.py --n 1000000 --compare
    python benchmarks/keyword_leg.py --n 100000 --kernel --passes 4
    python benchmarks/keyword_leg.py --n 1000000 --cold
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _scale.constants import WARMUP_QUERIES
from _scale.data import generate_memories, load_sources

from hybrid_memory._keyword import numpy_top, scoring_kernel
from hybrid_memory._keyword import postings as postings_module
from hybrid_memory._keyword.bm25 import query_words
from hybrid_memory._keyword.index import KeywordIndex
from hybrid_memory._model.records import IndexRow
from hybrid_memory._model.settings import HybridMemorySettings

DEPTH = 100
BATCH = 20_000
_CACHE_FLUSH = 64 * 1024 * 1024  # bytes: twice this machine's last-level cache
current_top = postings_module.Postings.top


def partial_sort_top(
    self: postings_module.Postings,
    terms: Sequence[str],
    limit: int,
    within: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``Postings.top`` as it cut before (commit e333526): the ``limit * terms``-th best
    of every matched posting's total, by a partial sort (``within``: as now)."""
    if within is not None:
        return current_top(self, terms, limit, within)
    matched = numpy_top._matched(self, terms)
    if matched is None or limit <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    rows, totals = matched
    lists = sum(1 for term in terms if self.parts(term))
    scored = totals[rows]
    entries = limit * lists
    if len(scored) > entries:
        cut = np.argpartition(-scored, entries - 1)[:entries]
        rows = rows[scored >= scored[cut].min()]
    candidates = np.unique(rows).astype(np.int64)
    return postings_module.best_first(candidates, totals[candidates], limit)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="memories (default 100000)")
    parser.add_argument("--passes", type=int, default=3, help="passes over the questions")
    parser.add_argument("--compare", action="store_true", help="also time the previous cut")
    parser.add_argument(
        "--kernel", action="store_true", help="time the numpy path against the compiled loops"
    )
    parser.add_argument(
        "--cold", action="store_true", help="empty the processor's caches before each question"
    )
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    args = parser.parse_args()

    pools, questions = load_sources(args.data)
    questions = questions[WARMUP_QUERIES : WARMUP_QUERIES + 200]
    start = time.perf_counter()
    memories = generate_memories(pools, args.n)
    index = KeywordIndex(None, HybridMemorySettings().keyword_tokenizer)
    for first in range(0, args.n, BATCH):
        index.upsert(
            [
                IndexRow(
                    m["id"],
                    m["text"],
                    tuple(m["tags"]),
                    m["metadata"],
                    m["id"],
                    datetime.fromisoformat(m["created_at"]).timestamp(),
                )
                for m in memories[first : first + BATCH]
            ]
        )
    del memories
    print(f"{args.n:,} memories indexed in {time.perf_counter() - start:.0f} s")

    loops = scoring_kernel.load()
    print(f"keyword leg: {scoring_kernel.status()}")
    # Each way: the ``top`` it ranks with and the loops it uses (None: numpy).
    ways = {"current cut": (current_top, loops)}
    if args.compare:
        ways["previous cut"] = (partial_sort_top, loops)  # type: ignore[assignment]
    if args.kernel:
        if loops is None:
            print("the compiled loops are not available: nothing to compare")
            return 1
        ways = {"numpy path": (current_top, None), "compiled loops": (current_top, loops)}
    times: dict[str, list[float]] = {name: [] for name in ways}
    for question in questions:  # first-time costs (term lookups) out of the timing
        index.search(question, DEPTH)
    flush = np.zeros(_CACHE_FLUSH // 8) if args.cold else None
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    try:
        for turn in range(args.passes):
            order = list(ways) if turn % 2 == 0 else list(reversed(ways))
            for name in order:
                postings_module.Postings.top, _ = ways[name]  # type: ignore[method-assign]
                scoring_kernel.use(ways[name][1])
                for question in questions:
                    if flush is not None:
                        flush += 1.0  # read and written: the caches hold it, not the index
                    began = time.perf_counter()
                    index.search(question, DEPTH)
                    times[name].append((time.perf_counter() - began) * 1e3)
        if len(ways) > 1:
            rankings = {}
            for name, (way, way_loops) in ways.items():
                postings_module.Postings.top = way  # type: ignore[method-assign]
                scoring_kernel.use(way_loops)
                rankings[name] = [index.search(q, DEPTH) for q in questions]
            # Scores are Python floats from float64: == compares them to the bit.
            same = sum(a == b for a, b in zip(*rankings.values(), strict=True))
            print(f"same rankings and scores: {same}/{len(questions)}")
    finally:
        postings_module.Postings.top = current_top  # type: ignore[method-assign]
        scoring_kernel.use(loops)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for name, values in times.items():
        ms = np.array(values)
        print(
            f"{name}: keyword leg p50 {np.percentile(ms, 50):.2f} ms, "
            f"p95 {np.percentile(ms, 95):.2f}, mean {ms.mean():.2f}"
        )
    postings = index.keywords.postings
    assert postings is not None
    sizes = [
        sum(len(p.rows) for t in index.terms(query_words(q)) if t for p in postings.parts(t[0]))
        for q in questions
    ]
    print(f"postings per question: median {int(np.median(sizes)):,}, mean {int(np.mean(sizes)):,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
