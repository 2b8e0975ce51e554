"""``export`` and ``import``: a store's memories as JSON Lines (docs/export-format.md)."""

from __future__ import annotations

import argparse
import io
import itertools
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from hybrid_memory._commands.output import memory_count, note, print_json
from hybrid_memory._commands.store import UsageError

if TYPE_CHECKING:
    from hybrid_memory._memory.memory import HybridMemory


def register(commands: Any, shared: argparse.ArgumentParser) -> None:
    export = commands.add_parser(
        "export",
        parents=[shared],
        help="write every memory (and every namespace's) to a JSON Lines file",
        description="Write every memory of the store and of each namespace under it (id, "
        "text, tags, metadata, times, namespace) as JSON Lines, streamed a page at a time.",
    )
    export.add_argument("file", metavar="FILE", help="the file to write ('-': stdout)")
    export.add_argument(
        "--vectors",
        action="store_true",
        help="include each memory's vector (an import into a store with the same embedding "
        "then needs no model)",
    )
    export.set_defaults(run=run_export, check=lambda args: writable(args.file))

    restore = commands.add_parser(
        "import",
        parents=[shared],
        help="restore memories from an export (same ids, times, tags, namespaces)",
        description="Restore the memories of an export into the store: the same ids, "
        "texts, tags, metadata, times and namespaces. Memories are upserted by id, so "
        "importing twice gives the same store. A bad line stops the import, naming it; "
        "nothing of its batch of 1,000 lines is written (the batches before it are).",
    )
    restore.add_argument("file", metavar="FILE", help="the export to read ('-': stdin)")
    restore.add_argument(
        "--re-embed",
        action="store_true",
        help="embed every text with this store's model instead of using the file's vectors "
        "(the way to move memories to another embedding model)",
    )
    restore.set_defaults(run=run_import)


def writable(file: str) -> None:
    """Refuse, before the store is read, a ``FILE`` an export cannot be written to."""
    if file == "-":
        return
    target = Path(file)
    folder = target.parent
    if target.is_dir():
        raise UsageError(f"cannot write {file!r}: it is a directory")
    if not folder.is_dir():
        raise UsageError(f"cannot write {file!r}: no directory {str(folder)!r}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write {file!r}: the directory {str(folder)!r} is not writable")


def run_export(args: argparse.Namespace, memory: HybridMemory) -> int:
    from hybrid_memory._transfer.transfer import export_memories

    started = time.perf_counter()
    if args.file == "-":
        # UTF-8 and "\n" whatever the terminal's locale: the format is UTF-8 JSON Lines.
        sys.stdout.flush()
        stream = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", newline="\n")
        try:
            count = export_memories(memory, stream, vectors=args.vectors)
            stream.flush()
        finally:
            stream.detach()
    else:
        try:
            count = export_memories(memory, args.file, vectors=args.vectors)
        except OSError as exc:
            raise UsageError(f"cannot write {args.file!r}: {exc.strerror or exc}") from None
    seconds = time.perf_counter() - started
    summary = {"memories": count, "file": args.file, "vectors": args.vectors, "seconds": seconds}
    if args.json and args.file != "-":
        print_json(summary)
    else:
        where = "stdout" if args.file == "-" else args.file
        note(f"exported {memory_count(count)} to {where} in {seconds:.1f} s{_rate(count, seconds)}")
    return 0


def run_import(args: argparse.Namespace, memory: HybridMemory) -> int:
    from hybrid_memory._transfer.transfer import import_memories

    started = time.perf_counter()
    if args.file == "-":
        report_lines = _announced(sys.stdin.buffer, memory, args.re_embed)
        report = import_memories(memory, report_lines, re_embed=args.re_embed)
    else:
        path = Path(args.file)
        try:
            file = path.open("rb")
        except OSError as exc:
            raise UsageError(f"cannot read {args.file!r}: {exc.strerror}") from None
        with file:
            report = import_memories(
                memory, _announced(file, memory, args.re_embed), re_embed=args.re_embed
            )
    seconds = time.perf_counter() - started
    if args.json:
        print_json(
            {
                "read": report.read,
                "added": report.added,
                "updated": report.updated,
                "unchanged": report.unchanged,
                "embedded": report.embedded,
                "namespaces": [list(n) for n in report.namespaces],
                "seconds": seconds,
            }
        )
    else:
        rate = _rate(report.read, seconds)
        note(
            f"imported {memory_count(report.read)} in {seconds:.1f} s{rate}: "
            f"{report.added} added, {report.updated} updated, {report.unchanged} unchanged; "
            f"{report.embedded} embedded by {memory.embedder.name}"
        )
    return 0


def _announced(file: IO[bytes], memory: HybridMemory, re_embed: bool) -> Iterator[bytes]:
    """The file's lines; before the first is handed on, a note when the texts will be
    embedded (the slow path: the model's speed, not the store's)."""
    from hybrid_memory._transfer.format import decode_line, is_header

    lines = iter(file)
    first = next(lines, b"")
    try:
        header = decode_line(first.decode("utf-8"), 1)
    except (UnicodeDecodeError, ValueError):
        header = None  # the import reports it
    has_vectors = is_header(header) and header.get("vectors") is True
    if re_embed or not has_vectors:
        why = "--re-embed" if re_embed else "the file holds no vectors"
        note(f"{why}: each memory written is embedded by {memory.embedder.name} (slower)")
    return itertools.chain([first], lines)


def _rate(count: int, seconds: float) -> str:
    # A rate over a few memories says more about start-up than about the store.
    return f" ({count / seconds:,.0f}/s)" if count >= 1000 and seconds > 0 else ""
