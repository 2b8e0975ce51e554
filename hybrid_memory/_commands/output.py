"""How the commands print: aligned tables for people, JSON for scripts, memories and
times in one shape for both."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from hybrid_memory._model.results import Memory

_MIN_TEXT = 20  # the narrowest a table's last (text) column gets


def print_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2, default=str))


def note(message: str) -> None:
    """A line for the person at the terminal (stderr: stdout stays the command's
    answer, for pipes)."""
    print(message, file=sys.stderr)


def memory_count(count: int) -> str:
    """``1 memory``, ``2 memories``."""
    return f"{count} {'memory' if count == 1 else 'memories'}"


def iso(moment: datetime | None) -> str | None:
    """A time as in the export format: ISO 8601 UTC with ``Z``."""
    return None if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def short_time(moment: datetime | None) -> str:
    """A time for a table: to the minute, UTC."""
    return "-" if moment is None else moment.strftime("%Y-%m-%d %H:%M")


def memory_json(memory: Memory) -> dict[str, Any]:
    return {
        "id": memory.id,
        "text": memory.text,
        "tags": list(memory.tags),
        "metadata": dict(memory.metadata),
        "created_at": iso(memory.created_at),
        "updated_at": iso(memory.updated_at),
    }


def excerpt(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(width - 1, 0)] + "…"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Print an aligned table; the last column (a text) is cut to the terminal's width."""
    columns = len(headers)
    widths = [
        max(len(headers[c]), *(len(row[c]) for row in rows)) if rows else len(headers[c])
        for c in range(columns)
    ]
    terminal = shutil.get_terminal_size((120, 24)).columns
    fixed = sum(widths[:-1]) + 2 * (columns - 1)
    last = max(_MIN_TEXT, min(widths[-1], terminal - fixed))
    widths[-1] = last

    def line(cells: Sequence[str]) -> str:
        padded = [cell.ljust(widths[c]) for c, cell in enumerate(cells[:-1])]
        return "  ".join([*padded, excerpt(cells[-1], last)]).rstrip()

    print(line(headers))
    for row in rows:
        print(line(row))


def fields(pairs: Mapping[str, Any]) -> None:
    """Print ``name  value`` lines, names aligned."""
    width = max(len(name) for name in pairs)
    for name, value in pairs.items():
        print(f"{name.ljust(width)}  {value}")
