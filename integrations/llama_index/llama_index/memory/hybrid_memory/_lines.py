"""How the block renders a recalled memory: one line of ``line_format``."""

from __future__ import annotations

from typing import Any

from hybrid_memory import Hit

#: The placeholders ``line_format`` may use.
LINE_FIELDS = ("role", "date", "text", "session_id", "score", "id", "tags")
DEFAULT_LINE_FORMAT = "- [{role}, {date}] {text}"
_SAMPLE_LINE: dict[str, Any] = {
    "role": "user",
    "date": "2026-01-01 00:00",
    "text": "text",
    "session_id": "session",
    "score": 0.5,
    "id": "id",
    "tags": "role:user",
}


def formattable(line_format: str) -> str:
    """``line_format``, checked to render one line with the known placeholders."""
    if "\n" in line_format:
        raise ValueError("one memory is one line: no newline allowed")
    try:
        line_format.format(**_SAMPLE_LINE)
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(
            f"cannot format it ({exc!r}); placeholders allowed: {', '.join(LINE_FIELDS)}"
        ) from None
    return line_format


def hit_line(hit: Hit, line_format: str, date_format: str, superseded_note: str) -> str:
    """One recalled memory as a line (``superseded_note`` after a superseded one)."""
    memory = hit.memory
    created = memory.created_at
    line = line_format.format(
        role=memory.metadata.get("role", "memory"),
        date="unknown date" if created is None else created.strftime(date_format),
        text=" ".join(memory.text.split()),
        session_id=memory.metadata.get("session_id", ""),
        score=round(hit.score, 4),
        id=memory.id,
        tags=", ".join(memory.tags),
    )
    return line + superseded_note if hit.superseded_by else line
