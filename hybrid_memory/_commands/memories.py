"""The commands on memories one by one: ``add``, ``get``, ``list``, ``delete``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from hybrid_memory._commands.output import (
    fields,
    iso,
    memory_count,
    memory_json,
    note,
    print_json,
    short_time,
    table,
)
from hybrid_memory._commands.store import UsageError
from hybrid_memory._model.errors import DuplicateIdError

if TYPE_CHECKING:
    from hybrid_memory._commands.store import Readable
    from hybrid_memory._memory.memory import HybridMemory


def register(commands: Any, shared: argparse.ArgumentParser) -> None:
    add = commands.add_parser(
        "add",
        parents=[shared],
        help="store a memory, print its id",
        description="Store one memory and print its id. An exact duplicate (same text and "
        "metadata) is not stored twice: the stored one's id is printed.",
    )
    add.add_argument("text", metavar="TEXT", help="the memory's text ('-': read it from stdin)")
    add.add_argument("--tag", action="append", default=[], metavar="T", help="a tag (repeat)")
    add.add_argument(
        "--meta",
        action="append",
        default=[],
        metavar="K=V",
        help="a metadata field (repeat): K=V holds the text V; K:=JSON a number, true/false "
        "or a list (age:=42)",
    )
    add.add_argument("--id", help="the memory's id (default: a new one)")
    add.add_argument("--upsert", action="store_true", help="replace the memory with this --id")
    add.set_defaults(run=run_add)

    get = commands.add_parser("get", parents=[shared], help="show one memory")
    get.add_argument("id", metavar="ID")
    get.set_defaults(run=run_get)

    listing = commands.add_parser(
        "list",
        parents=[shared],
        help="list memories, oldest (or --newest) first, a page at a time",
        description="List memories by creation time, oldest first (then by id); --newest "
        "lists the newest first.",
    )
    listing.add_argument("--limit", type=int, default=20, help="memories per page (default 20)")
    listing.add_argument("--offset", type=int, default=0, help="memories to skip (default 0)")
    listing.add_argument("--filter", type=json_object, metavar="JSON", help="a metadata filter")
    listing.add_argument("--newest", action="store_true", help="the newest memories first")
    listing.set_defaults(run=run_list)

    delete = commands.add_parser(
        "delete",
        parents=[shared],
        help="delete memories by id, or all those a filter matches",
        description="Delete the memories with these ids (every one must exist), or with "
        "--filter every memory the filter matches (which needs --yes; without it, the "
        "number that would go is printed and nothing is deleted).",
    )
    delete.add_argument("ids", nargs="*", metavar="ID")
    delete.add_argument("--filter", type=json_object, metavar="JSON", help="a metadata filter")
    delete.add_argument("--yes", action="store_true", help="confirm a delete by --filter")
    delete.set_defaults(run=run_delete)


def json_object(value: str) -> dict[str, Any]:
    """An argparse type: a JSON object (a filter)."""
    try:
        parsed = json.loads(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc})") from None
    if not isinstance(parsed, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {value!r}")
    return parsed


def metadata_of(pairs: list[str]) -> dict[str, Any]:
    """``--meta`` values: ``K=V`` (text) and ``K:=JSON`` (typed)."""
    metadata: dict[str, Any] = {}
    for pair in pairs:
        key, typed, value = pair.partition(":=")
        if not typed:
            key, equals, value = pair.partition("=")
            if not equals or not key:
                raise UsageError(f"--meta: expected K=V or K:=JSON, got {pair!r}")
            metadata[key] = value
            continue
        try:
            metadata[key] = json.loads(value)
        except ValueError:
            raise UsageError(f"--meta {key}: {value!r} is not JSON (use {key}=TEXT)") from None
    return metadata


def run_add(args: argparse.Namespace, memory: HybridMemory) -> int:
    text = sys.stdin.read() if args.text == "-" else args.text
    try:
        memory_id = memory.add(
            text, id=args.id, tags=args.tag, metadata=metadata_of(args.meta), upsert=args.upsert
        )
    except DuplicateIdError as exc:  # its message names the library's upsert=True
        raise UsageError(
            f"--id: a memory with id {exc.memory_id!r} already exists; add --upsert to replace it"
        ) from None
    if args.json:
        print_json({"id": memory_id})
    else:
        print(memory_id)
    return 0


def run_get(args: argparse.Namespace, memory: Readable) -> int:
    found = memory.get(args.id)
    if args.json:
        print_json(memory_json(found))
        return 0
    fields(
        {
            "id": found.id,
            "created": iso(found.created_at) or "-",
            "updated": iso(found.updated_at) or "-",
            "tags": ", ".join(found.tags) or "-",
            "metadata": json.dumps(dict(found.metadata), ensure_ascii=False) or "-",
        }
    )
    print()
    print(found.text)
    return 0


def run_list(args: argparse.Namespace, memory: Readable) -> int:
    page = memory.list_memories(
        args.filter, limit=args.limit, offset=args.offset, newest_first=args.newest
    )
    total = memory.count(args.filter)
    if args.json:
        print_json(
            {
                "total": total,
                "offset": args.offset,
                "limit": args.limit,
                "memories": [memory_json(m) for m in page],
            }
        )
        return 0
    if not page:
        note(f"no memories here ({memory_count(total)} in all, offset {args.offset})")
        return 0
    table(
        ["id", "created", "tags", "text"],
        [[m.id, short_time(m.created_at), ",".join(m.tags), m.text] for m in page],
    )
    shown = f"{args.offset + 1}-{args.offset + len(page)}"
    after = args.offset + len(page)
    more = f"; next page: --offset {after}" if after < total else ""
    note(f"{shown} of {total}{more}")
    return 0


def run_delete(args: argparse.Namespace, memory: HybridMemory) -> int:
    if bool(args.ids) == (args.filter is not None):
        raise UsageError("give the ids to delete, or --filter JSON (with --yes), not both")
    if args.filter is not None and not args.yes:
        matching = memory.count(args.filter)
        verb = "matches" if matching == 1 else "match"
        note(f"{memory_count(matching)} {verb} the filter; add --yes to delete them")
        if args.json:
            print_json({"deleted": 0, "matching": matching})
        return 2
    deleted = memory.delete(args.ids) if args.ids else memory.delete(filter=args.filter)
    if args.json:
        print_json({"deleted": deleted})
    else:
        print(f"deleted {memory_count(deleted)}")
    return 0 if deleted else 1  # a filter that matched nothing
