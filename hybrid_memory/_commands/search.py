"""``search``: the fused hits, best first, with each leg's rank (why each came back)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from hybrid_memory._commands.memories import json_object
from hybrid_memory._commands.output import memory_json, note, print_json, table
from hybrid_memory._model.results import LEGS

if TYPE_CHECKING:
    from hybrid_memory._commands.store import Readable


def register(commands: Any, shared: argparse.ArgumentParser) -> None:
    search = commands.add_parser(
        "search",
        parents=[shared],
        help="search memories: the best first, with each leg's rank",
        description="Hybrid search: the vector, keyword and tag legs fused. The table shows "
        "each hit's relevance score (0-1) and its rank on each leg that found it (- where "
        "a leg did not). Exit status 1 when nothing matches.",
    )
    search.add_argument("query", metavar="QUERY")
    search.add_argument("-k", type=int, help="how many hits (default: HYBRID_MEMORY_K, 5)")
    search.add_argument("--filter", type=json_object, metavar="JSON", help="a metadata filter")
    search.add_argument(
        "--tag", action="append", default=[], metavar="T", help="a tag to match (repeat)"
    )
    search.set_defaults(run=run_search)


def run_search(args: argparse.Namespace, memory: Readable) -> int:
    result = memory.search(args.query, k=args.k, filter=args.filter, tags=args.tag or None)
    if args.json:
        print_json(
            {
                "query": args.query,
                "hits": [
                    {
                        "rank": rank,
                        "score": hit.score,
                        "fused_score": hit.fused_score,
                        "ranks": dict(hit.ranks),
                        "scores": dict(hit.scores),
                        **memory_json(hit.memory),
                    }
                    for rank, hit in enumerate(result, 1)
                ],
                "matched_tags": list(result.matched_tags),
                "alpha": result.alpha,
                "fallback_reason": result.fallback_reason,
            }
        )
    elif result:
        table(
            ["#", "score", *LEGS, "id", "text"],
            [
                [
                    str(rank),
                    f"{hit.score:.3f}",
                    *(str(hit.ranks.get(leg, "-")) for leg in LEGS),
                    hit.id,
                    hit.text,
                ]
                for rank, hit in enumerate(result, 1)
            ],
        )
    if result.fallback_reason:
        note(f"note: {result.fallback_reason}")
    if not result:
        if not args.json:
            note("no memories match")
        return 1
    return 0
