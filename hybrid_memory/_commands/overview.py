"""The commands about the store as a whole: ``tags`` and ``stats``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from hybrid_memory._commands.output import fields, note, print_json, table
from hybrid_memory._model.errors import StoreError

if TYPE_CHECKING:
    from hybrid_memory._commands.store import Readable


def register(commands: Any, shared: argparse.ArgumentParser) -> None:
    tags = commands.add_parser(
        "tags", parents=[shared], help="every tag in use, with how many memories carry it"
    )
    tags.set_defaults(run=run_tags)
    stats = commands.add_parser(
        "stats",
        parents=[shared],
        help="how many memories, tags and namespaces; where the store is, what embeds it",
    )
    stats.set_defaults(run=run_stats)


def tag_counts(memory: Readable) -> list[tuple[str, int]]:
    """Each tag in use and how many memories carry it, the most used first."""
    counts = [(tag, memory.count({"tags": {"$contains": tag}})) for tag in memory.tags()]
    return sorted(counts, key=lambda pair: (-pair[1], pair[0]))


def run_tags(args: argparse.Namespace, memory: Readable) -> int:
    counts = tag_counts(memory)
    if args.json:
        print_json([{"tag": tag, "memories": count} for tag, count in counts])
    elif counts:
        table(["memories", "tag"], [[str(count), tag] for tag, count in counts])
    else:
        note("no tags in use")
    return 0


def run_stats(args: argparse.Namespace, memory: Readable) -> int:
    stats = memory.stats()
    try:
        namespaces: list[str] | None = memory.namespaces()
    except StoreError as exc:  # another process owns the path and cannot list them
        namespaces = None
        note(f"namespaces unknown: {exc}")
    if args.json:
        print_json(
            {
                "count": stats.count,
                "indexed": stats.indexed,
                "tags": stats.tags,
                "namespaces": namespaces,
                "kind": stats.kind,
                "location": stats.location,
                "collection": stats.collection,
                "index_path": stats.index_path,
                "embedding": stats.embedding,
                "dimension": stats.dimension,
                "namespace": list(stats.namespace),
                "sync_interval": stats.sync_interval,
            }
        )
        return 0
    fields(
        {
            "memories": stats.count,
            "indexed": stats.indexed
            if stats.in_step
            else f"{stats.indexed} (catching up with the collection)",
            "tags": stats.tags,
            "namespaces": "unknown" if namespaces is None else ", ".join(namespaces) or "-",
            "store": f"{stats.kind} {stats.location or ''}".rstrip(),
            "collection": stats.collection,
            "namespace": " / ".join(stats.namespace) or "- (the store itself)",
            "index": stats.index_path or "in memory",
            "embedding": f"{stats.embedding} ({stats.dimension or '?'} dimensions)",
        }
    )
    return 0
