"""Resources and prompts: memory an agent (or its user) can pull into context without a
tool call.

Resources, as JSON:

- ``memory://{id}``: one memory;
- ``memories://recent``: the newest memories (at most 20), newest first;
- ``memories://tag/{tag}``: the newest memories carrying a tag (at most 50).

Prompts:

- ``recall(topic)``: the memories that best match a topic, as a message to answer with;
- ``recent_memories(days)``: what was stored in the last days, as a message to review.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError

from hybrid_memory import HybridMemory, HybridMemoryError, Memory, MemoryNotFoundError
from hybrid_memory_mcp.models import MemoryRecord
from hybrid_memory_mcp.times import time_bound

__all__ = ["add_prompts", "add_resources"]

RECENT = 20
BY_TAG = 50
RECALL = 8


@contextmanager
def _resource_errors() -> Iterator[None]:
    try:
        yield
    except MemoryNotFoundError as exc:
        raise ResourceNotFoundError(str(exc)) from exc
    except HybridMemoryError as exc:
        raise ResourceError(str(exc)) from exc


def newest(memory: HybridMemory, where: dict[str, Any] | None, n: int) -> list[Memory]:
    """The ``n`` newest memories passing ``where``, newest first."""
    total = memory.count(where)
    start = max(0, total - n)
    return list(reversed(memory.list_memories(where, limit=total - start, offset=start)))


def _json(memories: Sequence[Memory]) -> str:
    return json.dumps([MemoryRecord.of(m).model_dump() for m in memories], ensure_ascii=False)


def _lines(memories: Sequence[Memory]) -> str:
    return "\n".join(
        f"- {m.text} (id {m.id}"
        + (f", tags {', '.join(m.tags)}" if m.tags else "")
        + (f", {m.created_at:%Y-%m-%d}" if m.created_at else "")
        + ")"
        for m in memories
    )


def add_resources(server: MCPServer, memory: Callable[[], HybridMemory]) -> None:
    """Register the resources over the store ``memory()`` returns."""

    @server.resource(
        "memory://{id}",
        name="memory",
        description="One stored memory as JSON (id, text, tags, metadata, times).",
        mime_type="application/json",
    )
    def one_memory(id: str) -> str:
        with _resource_errors():
            return json.dumps(MemoryRecord.of(memory().get(id)).model_dump(), ensure_ascii=False)

    @server.resource(
        "memories://recent",
        name="recent memories",
        description=f"The {RECENT} newest memories, newest first, as a JSON list.",
        mime_type="application/json",
    )
    def recent() -> str:
        with _resource_errors():
            return _json(newest(memory(), None, RECENT))

    @server.resource(
        "memories://tag/{tag}",
        name="memories by tag",
        description=f"The {BY_TAG} newest memories carrying a tag, newest first, as a JSON list.",
        mime_type="application/json",
    )
    def by_tag(tag: str) -> str:
        with _resource_errors():
            return _json(newest(memory(), {"tags": {"$contains": tag}}, BY_TAG))


def add_prompts(server: MCPServer, memory: Callable[[], HybridMemory]) -> None:
    """Register the prompts over the store ``memory()`` returns."""

    @server.prompt(
        name="recall",
        description="What long-term memory holds about a topic, to answer with.",
    )
    def recall(topic: str) -> str:
        with _resource_errors():
            hits = memory().search(topic, k=RECALL)
        if not hits:
            return f"Long-term memory holds nothing about {topic!r}. Answer without it."
        found = _lines([hit.memory for hit in hits])
        return (
            f"Long-term memory about {topic!r}, best match first:\n{found}\n\n"
            "Use what is relevant; say so when a memory may be out of date."
        )

    @server.prompt(
        name="recent_memories",
        description="The memories stored in the last days (default 7), to review or summarise.",
    )
    def recent_memories(days: str = "7") -> str:
        with _resource_errors():
            since = time_bound(f"{days.strip()} days ago", "days")
            found = newest(memory(), {"created_at": {"$gte": since}}, 100)
        if not found:
            return f"No memory was stored in the last {days} days."
        return f"Memories stored in the last {days} days, newest first:\n{_lines(found)}"
