"""Where one LongMemEval question type's judged memories sit in each leg, and what the
keyword leg puts above them (docs/quality-study.md, "Issue 43, round four").

    python -m benchmarks.type_hits ../shared/data/longmemeval single-session-preference \\
        --cache /tmp/legs

prints, per question, the first judged memory's rank in the keyword leg, the vector leg
(with the engine's feedback) and the fused list, then the medians, how many of the keyword
and vector top 10 are the assistant's turns, how many query content words a judged memory
shares, and the query words most common in the store.
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter
from collections.abc import Sequence

from benchmarks.leg_weighting_study import compute_legs, group_of, load, order
from benchmarks.lift_gating_study import _terms, lifted_rrf

MISSING = 101  # not in a leg's top 100


def first_judged(ids: Sequence[str], judged: dict[str, int]) -> int:
    return next((r for r, d in enumerate(ids, start=1) if d in judged), MISSING)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("type", help="a LongMemEval question type (metadata.type)")
    parser.add_argument("--cache", help="the folder of benchmarks/leg_weighting_study's legs")
    args = parser.parse_args(argv)
    prep = load(args.dataset, args.cache, None)
    docs = {d.id: d for d in prep.dataset.storable()}
    df: Counter[str] = Counter()
    for doc in docs.values():
        df.update(set(_terms(doc.text, False)))
    ranks: dict[str, list[int]] = {"keyword": [], "vector": [], "fused": []}
    assistant: dict[str, list[int]] = {"keyword": [], "vector": []}
    shared: list[float] = []
    words: dict[str, int] = {}
    for q in prep.queries:
        if group_of(prep, q.id) != args.type:
            continue
        legs = compute_legs(prep, q)
        judged = prep.dataset.qrels.get(q.id, {})
        lists = {
            "keyword": [d for d, _ in legs.keyword],
            "vector": [d for d, _ in legs.vector],
            "fused": order(lifted_rrf(legs, 0.0, 0.0))[:100],
        }
        for leg, ids in lists.items():
            ranks[leg].append(first_judged(ids, judged))
        for leg in assistant:
            top = lists[leg][:10]
            assistant[leg].append(sum(docs[d].metadata.get("role") == "assistant" for d in top))
        asked = set(_terms(q.text, True))
        words.update({t: df[t] for t in asked})  # each word once, with its store count
        for doc_id in judged:
            held = set(_terms(docs[doc_id].text, False))
            shared.append(len(asked & held) / max(len(asked), 1))
        print(
            f"{q.id}: keyword {ranks['keyword'][-1]}, vector {ranks['vector'][-1]}, fused "
            f"{ranks['fused'][-1]} (101: not in the top 100) | {q.text}"
        )
    n = len(ranks["fused"])
    for leg, found in ranks.items():
        print(
            f"{leg}: median first judged rank {statistics.median(found)}, in the top 10 for "
            f"{sum(r <= 10 for r in found)} of {n}, not in the top 100 for "
            f"{sum(r == MISSING for r in found)}"
        )
    for leg, counts in assistant.items():
        print(f"assistant turns in the {leg} top 10: mean {statistics.fmean(counts):.1f}")
    print(
        f"share of the query's content words a judged memory holds: {statistics.fmean(shared):.2f}"
    )
    most = sorted(words.items(), key=lambda item: -item[1])[:12]
    common = ", ".join(f"{t} {c / len(docs):.2f}" for t, c in most)
    print(f"the query words most common in the store (share of memories): {common}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
