"""Recall without repeats, measured: LoCoMo with every evidence turn restated, searched
with near-duplicates collapsed and not, and the write-time report's hits and false alarms.

1. The plain store: LoCoMo's turns, stored as ``hybrid-memory eval`` stores them (ids,
   tags, metadata, times; 256 a call). The write report's false alarms: the share of
   turns an add reports ``"similar"`` to an earlier, distinct turn (and of the pairs of
   turns it names).
2. The restated store: the same turns, then every evidence turn (judged relevant to a
   question) restated one to four times (seeded), each restatement a later memory with
   the turn's tags and metadata, in one of four forms: a date in front
   (``2023-05-08: ...``), ``(confirmed again)`` after, ``..., per the chat on May 8,
   2023.`` after, or its words reordered (the second half first). The write report's
   hits: the share of restatements reported similar to the turn or to another
   restatement of it, by form.
3. Every judged question, searched in both stores with ``collapse_similar`` off and on:
   nDCG@10 and the number of distinct relevant facts in the top 10. A fact is a turn
   with its restatements: a restatement in the ranking counts as its turn, and a fact
   counts once, where it first appears (so nDCG@10 of the plain store is the usual one,
   and repeats that push other facts down cost the restated store).
4. LongMemEval's turns stored as the evaluation stores them: the write report's false
   alarms, as in 1.

Public API only (``hybrid_memory`` and ``hybrid_memory_eval``)::

    python -m benchmarks.repeats ../shared/data/locomo --longmemeval ../shared/data/longmemeval
    python -m benchmarks.repeats ../shared/data/locomo --limit 50 --json /tmp/repeats.json

``--vector-cache`` keeps the model's vectors in ``benchmarks/vector_cache.py``'s file
(``HYBRID_MEMORY_VECTOR_CACHE``), so a second run embeds nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from hybrid_memory_eval import Dataset, Document, load_dataset

from hybrid_memory import HybridMemory, WriteReport

FORMS = ("date in front", "confirmed again", "per the chat on", "words reordered")
BATCH = 256  # memories per add_many, as hybrid-memory eval stores them


@dataclass(frozen=True)
class Restatement:
    """A later memory saying what an evidence turn (``of``) said, in one of :data:`FORMS`."""

    id: str
    of: str
    form: int
    text: str
    timestamp: str


def restate(document: Document, form: int, days_later: int) -> tuple[str, str]:
    """The text and time of ``document`` said again ``days_later`` days after it."""
    then = datetime.fromisoformat(document.timestamp or "2026-01-01T00:00:00+00:00")
    when = then + timedelta(days=days_later)
    text = document.text.strip()
    if form == 0:
        said = f"{when:%Y-%m-%d}: {text}"
    elif form == 1:
        said = f"{text} (confirmed again)"
    elif form == 2:
        said = f"{text.rstrip('.!?')}, per the chat on {when:%B} {when.day}, {when.year}."
    else:
        words = text.split()
        half = len(words) // 2
        said = " ".join(words[half:] + words[:half]) if len(words) > 1 else f"{text} {text}"
    return said, when.isoformat()


def restatements(dataset: Dataset, seed: int) -> list[Restatement]:
    """Every evidence turn restated one to four times, in distinct forms (seeded)."""
    rng = random.Random(seed)
    judged = {d for grades in dataset.qrels.values() for d, g in grades.items() if g >= 1}
    out: list[Restatement] = []
    for document in dataset.storable():
        if document.id not in judged:
            continue
        forms = rng.sample(range(len(FORMS)), rng.randint(1, len(FORMS)))
        days = 0
        for n, form in enumerate(forms):
            days += rng.randint(1, 30)
            text, when = restate(document, form, days)
            out.append(Restatement(f"{document.id}#again{n}", document.id, form, text, when))
    return out


def store(memory: HybridMemory, items: Sequence[dict[str, Any]]) -> list[Any]:
    """Add ``items`` (``add_many`` dicts) :data:`BATCH` at a time; every item's result."""
    results: list[Any] = []
    for start in range(0, len(items), BATCH):
        report: WriteReport = memory.add_many(items[start : start + BATCH], allow_duplicates=True)
        results.extend(report.results)
    return results


def item(document: Document) -> dict[str, Any]:
    out: dict[str, Any] = {"id": document.id, "text": document.text}
    if document.tags:
        out["tags"] = list(document.tags)
    if document.metadata:
        out["metadata"] = document.metadata
    if document.timestamp is not None:
        out["created_at"] = document.timestamp
    return out


def false_alarms(results: Sequence[Any], same: Mapping[str, str] | None = None) -> dict[str, Any]:
    """How many of the turns ``results`` stored were reported similar to a distinct turn
    (``same`` maps an id to its fact, to leave a turn's own restatements out)."""
    fact = (lambda i: same.get(i, i)) if same else (lambda i: i)
    flagged = [r for r in results if r.outcome == "similar"]
    pairs = {
        tuple(sorted((r.id, s.id))) for r in flagged for s in r.similar if fact(s.id) != fact(r.id)
    }
    turns = sum(1 for r in flagged if any(fact(s.id) != fact(r.id) for s in r.similar))
    n = len(results)
    return {
        "turns": n,
        "turns_flagged": turns,
        "turns_flagged_share": turns / n if n else 0.0,
        "pairs_flagged": len(pairs),
        "pairs_flagged_share": len(pairs) / (n * (n - 1) / 2) if n > 1 else 0.0,
    }


def detection(results: Sequence[Any], restated: Sequence[Restatement]) -> dict[str, Any]:
    """The share of restatements reported similar to their turn or a restatement of it
    (by form), and of those reported similar to another fact only."""
    fact = {r.id: r.of for r in restated}
    found: Counter[int] = Counter()
    elsewhere = 0
    per_form = Counter(r.form for r in restated)
    for result, restatement in zip(results, restated, strict=True):
        named = {fact.get(s.id, s.id) for s in result.similar}
        if restatement.of in named:
            found[restatement.form] += 1
        elif named:
            elsewhere += 1
    total = len(restated)
    return {
        "restatements": total,
        "found": sum(found.values()),
        "found_share": sum(found.values()) / total if total else 0.0,
        "similar_to_another_fact_only": elsewhere,
        "by_form": {
            FORMS[f]: {"restatements": per_form[f], "found_share": found[f] / per_form[f]}
            for f in sorted(per_form)
        },
    }


def fact_ndcg(
    ranked: Sequence[str], grades: Mapping[str, int], fact: Mapping[str, str], k: int
) -> tuple[float, int]:
    """nDCG@k over facts (a restatement counts as its turn, each fact once, where it
    first appears) and the number of distinct relevant facts in the top ``k``."""
    seen: set[str] = set()
    dcg = 0.0
    for position, memory_id in enumerate(ranked[:k], start=1):
        turn = fact.get(memory_id, memory_id)
        if turn in seen:
            continue
        seen.add(turn)
        dcg += (2.0 ** grades.get(turn, 0) - 1.0) / math.log2(position + 1)
    ideal = sum(
        (2.0**g - 1.0) / math.log2(i + 1)
        for i, g in enumerate(sorted(grades.values(), reverse=True)[:k], start=1)
    )
    distinct = sum(1 for turn in seen if grades.get(turn, 0) >= 1)
    return (dcg / ideal if ideal > 0 else 0.0), distinct


def searched(
    memory: HybridMemory,
    dataset: Dataset,
    fact: Mapping[str, str],
    k: int,
    limit: int | None,
) -> dict[str, dict[str, float]]:
    """nDCG@k and distinct relevant facts in the top k, with collapse off and on."""
    queries = dataset.judged_queries()[:limit]
    out: dict[str, dict[str, float]] = {}
    for name, collapse in (("collapse off", False), ("collapse on", True)):
        view = memory.with_settings(collapse_similar=collapse)
        ndcgs, distinct, latencies = [], [], []
        for query in queries:
            started = time.perf_counter()
            hits = view.search(query.text, k=k, filter=query.filter, now=query.now)
            latencies.append((time.perf_counter() - started) * 1000)
            value, facts = fact_ndcg([h.id for h in hits], dataset.qrels[query.id], fact, k)
            ndcgs.append(value)
            distinct.append(facts)
        out[name] = {
            f"ndcg@{k}": round(statistics.fmean(ndcgs), 4),
            f"distinct_relevant_facts@{k}": round(statistics.fmean(distinct), 4),
            f"distinct_relevant_facts@{k}_total": sum(distinct),
            "p50_ms": round(statistics.median(latencies), 2),
        }
    return out


def run(
    locomo: str,
    longmemeval: str | None,
    *,
    k: int,
    seed: int,
    limit: int | None,
    embedding: Any,
    log: Any,
) -> dict[str, Any]:
    dataset = load_dataset(locomo)
    turns = [item(d) for d in dataset.storable()]
    restated = restatements(dataset, seed)
    fact = {r.id: r.of for r in restated}
    report: dict[str, Any] = {"dataset": dataset.name, "seed": seed, "k": k}

    log(f"plain store: {len(turns)} turns")
    with HybridMemory(embedding=embedding) as plain:
        report["plain_write"] = false_alarms(store(plain, turns))
        report["plain_search"] = searched(plain, dataset, {}, k, limit)

    log(f"restated store: {len(turns)} turns and {len(restated)} restatements")
    with HybridMemory(embedding=embedding) as memory:
        store(memory, turns)
        again = [
            {**item(d), "id": r.id, "text": r.text, "created_at": r.timestamp}
            for r, d in _with_turns(restated, dataset.storable())
        ]
        report["restated_write"] = detection(store(memory, again), restated)
        report["restated_search"] = searched(memory, dataset, fact, k, limit)

    if longmemeval is not None:
        other = load_dataset(longmemeval)
        log(f"longmemeval store: {len(other.storable())} turns")
        with HybridMemory(embedding=embedding) as memory:
            report["longmemeval_write"] = false_alarms(
                store(memory, [item(d) for d in other.storable()])
            )
    return report


def _with_turns(
    restated: Iterable[Restatement], documents: Iterable[Document]
) -> list[tuple[Restatement, Document]]:
    by_id = {d.id: d for d in documents}
    return [(r, by_id[r.of]) for r in restated]


def render(report: Mapping[str, Any]) -> str:
    k = report["k"]
    lines = [f"Recall without repeats: {report['dataset']}, seed {report['seed']}", ""]
    lines.append(f"{'store':<22}{'collapse':<10}{f'nDCG@{k}':>9}{f'facts@{k}':>10}{'p50 ms':>9}")
    for store_name, key in (("plain LoCoMo", "plain_search"), ("restated", "restated_search")):
        for mode, row in report[key].items():
            lines.append(
                f"{store_name:<22}{mode.split()[1]:<10}{row[f'ndcg@{k}']:>9.4f}"
                f"{row[f'distinct_relevant_facts@{k}']:>10.3f}{row['p50_ms']:>9.1f}"
            )
    w = report["restated_write"]
    lines += [
        "",
        f"write report: restatements found {w['found']}/{w['restatements']} "
        f"= {w['found_share']:.2%} (similar to another fact only: "
        f"{w['similar_to_another_fact_only']})",
    ]
    for form, row in w["by_form"].items():
        lines.append(f"  {form:<18}{row['restatements']:>6}  found {row['found_share']:.2%}")
    for name, key in (("LoCoMo", "plain_write"), ("LongMemEval", "longmemeval_write")):
        if key in report:
            a = report[key]
            lines.append(
                f"write report, {name}'s own turns: {a['turns_flagged']}/{a['turns']} turns "
                f"flagged = {a['turns_flagged_share']:.2%}; {a['pairs_flagged']} pairs = "
                f"{a['pairs_flagged_share']:.5%} of all pairs"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("locomo", help="the LoCoMo folder (evaluation format)")
    parser.add_argument("--longmemeval", default=None, help="also measure its own turns")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--limit", type=int, default=None, help="only the first N questions")
    parser.add_argument("--json", default=None, metavar="FILE", help="also write the report")
    parser.add_argument(
        "--vector-cache", action="store_true", help="keep the model's vectors on disk"
    )
    args = parser.parse_args(argv)
    embedding = None
    if args.vector_cache:
        from benchmarks.vector_cache import CachedEmbedding

        with HybridMemory() as model:
            embedding = CachedEmbedding(model.embedder)
    report = run(
        args.locomo,
        args.longmemeval,
        k=args.k,
        seed=args.seed,
        limit=args.limit,
        embedding=embedding,
        log=lambda message: print(message, file=sys.stderr, flush=True),
    )
    print(render(report))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
