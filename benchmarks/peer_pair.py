"""hybrid-memory (defaults and given settings) against one in-process peer, paired.

``hybrid-memory eval --peers`` runs every peer, the foreign ones (mem0,
mcp-memory-service) in their own venvs with their own indexing: on LongMemEval most of
an hour. This runs only the named in-process peer (plain RRF, LangChain, LlamaIndex:
:data:`hybrid_memory_eval.PEERS`) beside our defaults and each ``--set`` configuration,
through the harness's own runs and scoring, with document vectors cached on disk
(:mod:`benchmarks.vector_cache`; the peer indexes ``"<tags>: <text>"``, so its first run
embeds those texts once). p: the harness's paired randomisation test of per-query
nDCG@k, each configuration against the peer.

    python -m benchmarks.peer_pair ../shared/data/longmemeval --peer "plain RRF" \\
        --set keyword_score_lift=0.5 --by metadata.type
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence

from hybrid_memory_eval import (
    PEERS,
    Progress,
    build_memory,
    load_dataset,
    parse_setting,
    run_memory,
)
from hybrid_memory_eval.report import per_query_scores
from hybrid_memory_eval.runs import run_peer
from hybrid_memory_eval.significance import paired_randomisation_test

from benchmarks.vector_cache import CachedEmbedding
from hybrid_memory.testing import default_embedder


def group_of(query_metadata: dict[str, object], by: str | None) -> str | None:
    if by is None:
        return None
    value: object = query_metadata
    for part in by.removeprefix("metadata.").split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return None if value is None else str(value)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--peer", default="plain RRF", help="the start of a peer's name")
    parser.add_argument(
        "--set", action="append", default=[], help="KEY=VALUE[,KEY=VALUE]: one configuration"
    )
    parser.add_argument("--by", help="a query field to group by, e.g. metadata.type")
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args(argv)
    names = [n for n in PEERS if n.lower().startswith(args.peer.lower())]
    if len(names) != 1:
        parser.error(f"--peer must name one of {sorted(PEERS)}; got {args.peer!r}")
    dataset = load_dataset(args.dataset)
    progress = Progress(sys.stderr)
    embedding = CachedEmbedding(default_embedder())
    configurations = [{}] + [
        dict(parse_setting(part) for part in text.split(",")) for text in args.set
    ]
    memory = build_memory(dataset, {}, embedding=embedding, progress=progress)
    try:
        runs = {}
        for settings in configurations:
            view = memory.with_settings(**settings) if settings else memory
            label = json.dumps(settings) if settings else "defaults"
            runs[label] = run_memory(view, dataset, k=args.k, progress=progress)
        peer_run = run_peer(PEERS[names[0]], embedding, dataset, k=args.k, progress=progress)
    finally:
        memory.close()
    peer = {
        q: s[f"ndcg@{args.k}"] for q, s in per_query_scores(peer_run, dataset, k=args.k).items()
    }
    groups = {q.id: group_of(q.metadata, args.by) for q in dataset.judged_queries()}
    report: dict[str, object] = {"dataset": dataset.name, "peer": names[0], "systems": {}}
    peer_figures: dict[str, float] = {"all": round(statistics.fmean(peer.values()), 4)}
    for group in sorted({g for g in groups.values() if g is not None}):
        members = [q for q in peer if groups.get(q) == group]
        peer_figures[group] = round(statistics.fmean(peer[q] for q in members), 4)
    report["peer_ndcg"] = peer_figures
    for label, run in runs.items():
        ours = {q: s[f"ndcg@{args.k}"] for q, s in per_query_scores(run, dataset, k=args.k).items()}
        ids = sorted(ours)
        row: dict[str, object] = {
            "all": round(statistics.fmean(ours.values()), 4),
            "p_vs_peer": round(
                paired_randomisation_test([ours[i] for i in ids], [peer[i] for i in ids]), 4
            ),
        }
        for group in sorted({g for g in groups.values() if g is not None}):
            members = [q for q in ids if groups.get(q) == group]
            row[group] = round(statistics.fmean(ours[q] for q in members), 4)
            row[f"{group} p_vs_peer"] = round(
                paired_randomisation_test([ours[q] for q in members], [peer[q] for q in members]),
                4,
            )
        report["systems"][label] = row  # type: ignore[index]
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
