"""The hybrid-memory MCP server, driven by the MCP SDK's own client over stdio.

Starts ``hybrid-memory mcp`` as a subprocess (exactly as Claude Desktop or an IDE
would), stores a few memories through its tools, searches them with a filter, and
prints the hits with their per-leg ranks. Offline; the store lives in a temporary
directory. Needs ``pip install -e integrations/mcp`` (or ``pip install hybrid-memory-mcp``).

    python examples/mcp_server.py
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

try:
    from mcp import ClientSession, StdioServerParameters, stdio_client
except ImportError:
    sys.exit("this example needs the MCP plugin: pip install -e integrations/mcp")

MEMORIES = [
    {
        "text": "Alice prefers dark mode in every editor",
        "tags": ["alice", "ui"],
        "metadata": {"user": "alice"},
    },
    {
        "text": "Alice's standup moved to 9:30 on Mondays",
        "tags": ["alice", "schedule"],
        "metadata": {"user": "alice"},
    },
    {
        "text": "Bob likes a light theme with large fonts",
        "tags": ["bob", "ui"],
        "metadata": {"user": "bob"},
    },
]


def server_command() -> list[str]:
    """``hybrid-memory mcp``, run by the same Python as this example."""
    script = Path(sys.executable).with_name("hybrid-memory")
    if script.exists():
        return [str(script), "mcp"]
    found = shutil.which("hybrid-memory")
    return [found, "mcp"] if found else [sys.executable, "-m", "hybrid_memory.cli", "mcp"]


async def call(session: ClientSession, tool: str, arguments: dict[str, Any]) -> Any:
    result = await session.call_tool(tool, arguments)
    if result.is_error:
        raise RuntimeError(result.content[0].text)  # type: ignore[union-attr]
    return result.structured_content


async def main(store: str) -> None:
    command = server_command()
    # The server imports the hybrid_memory this example would: the checkout's when run
    # from it with no install, else the installed one (never the checkout's by accident).
    spec = importlib.util.find_spec("hybrid_memory")
    root = str(Path(spec.origin).parents[1]) if spec and spec.origin else ""
    env = {
        "HYBRID_MEMORY_PATH": store,
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p),
    }
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        info = await session.initialize()
        tools = await session.list_tools()
        print(f"connected to {info.server_info.name}: {', '.join(t.name for t in tools.tools)}")

        for memory in MEMORIES:
            stored = await call(session, "store_memory", memory)
            print(f"stored {stored['id'][:8]}…  {memory['text']}")
        again = await call(session, "store_memory", {"text": MEMORIES[0]["text"]})
        print(f"storing the first text again: duplicate={again['duplicate']}")

        query = "which theme does alice like?"
        found = await call(
            session, "search_memory", {"query": query, "k": 3, "filter": {"user": "alice"}}
        )
        print(f"\nsearch {query!r} (filter user=alice, fallback_mode={found['fallback_mode']}):")
        for hit in found["hits"]:
            ranks = ", ".join(f"{leg} #{rank}" for leg, rank in hit["ranks"].items())
            print(f"  {hit['score']:.4f}  {hit['text']}  [{ranks}]")

        bad = await session.call_tool("search_memory", {"query": query, "k": 0})
        print(f"\nk=0 is refused as a tool error: {bad.content[0].text}")  # type: ignore[union-attr]
        unknown = await session.call_tool("search_memory", {"query": query, "limit": 2})
        print(f"so is an unknown argument: {unknown.content[0].text}")  # type: ignore[union-attr]

        page = await call(session, "list_memories", {"limit": 2, "newest_first": True})
        print(f"\nthe {len(page['memories'])} newest of {page['total']}: ", end="")
        print("; ".join(m["text"] for m in page["memories"]))

        stats = await call(session, "memory_stats", {})
        print(
            f"\n{stats['count']} memories, tags {stats['tags']}, model {stats['embedding_model']}, "
            f"index in step: {stats['in_step']}"
        )
        assert found["hits"] and found["hits"][0]["text"] == MEMORIES[0]["text"]


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(main(str(Path(directory) / "memory")))
