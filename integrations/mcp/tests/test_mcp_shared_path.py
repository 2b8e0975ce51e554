"""The README's setup for two MCP clients (a desktop app and an IDE, say): each launches
``hybrid-memory mcp`` over stdio with the same ``HYBRID_MEMORY_PATH``. Both servers
store, and each finds the other's memories by keyword and by vector (the hits' ranks
name the legs). Issue 21, item 1. (With the other multi-process tests in spirit; here
because it drives the MCP plugin with the MCP SDK's own client.)"""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from _mcp_test_support import child_env, server_command
from mcp import ClientSession, StdioServerParameters, stdio_client


def structured(result: Any) -> Any:
    assert not result.is_error, result.content
    return result.structured_content


async def test_two_stdio_servers_on_one_path_find_each_others_memories(tmp_path: Path) -> None:
    command = server_command()
    params = StdioServerParameters(
        command=command[0],
        args=[*command[1:], "mcp"],
        # The default model (as a user runs it); a short sync interval for the test.
        env=child_env(
            HYBRID_MEMORY_PATH=str(tmp_path / "memory"), HYBRID_MEMORY_SYNC_INTERVAL="0.5"
        ),
    )
    memories = {
        "desktop": ["The cat is called Miso", "Deploys happen on Tuesdays after standup"],
        "ide": ["The project uses ruff for linting", "Alice prefers the dark colour theme"],
    }
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with AsyncExitStack() as stack:
            sessions: dict[str, ClientSession] = {}
            for name in memories:
                read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                sessions[name] = session
            stored: dict[str, str] = {}  # text -> id
            for name, texts in memories.items():
                for text in texts:
                    got = structured(await sessions[name].call_tool("store_memory", {"text": text}))
                    stored[text] = got["id"]

            async def ranks(session: ClientSession, query: str, text: str) -> dict[str, int]:
                found = structured(await session.call_tool("search_memory", {"query": query}))
                return next((h["ranks"] for h in found["hits"] if h["id"] == stored[text]), {})

            # Each server searches for the other's memories: by their own words (the
            # keyword leg finds them), and by a paraphrase sharing no word with them,
            # which the vector leg must rank first.
            checks = [
                ("desktop", "ruff linting", "The project uses ruff for linting", "keyword"),
                ("desktop", "which scheme does she like?", memories["ide"][1], "vector"),
                ("ide", "cat Miso", "The cat is called Miso", "keyword"),
                ("ide", "when do we ship to production?", memories["desktop"][1], "vector"),
            ]
            for name, query, text, leg in checks:
                seen: dict[str, int] = {}
                with anyio.move_on_after(60):  # within sync_interval; bounded
                    while seen.get(leg) != 1:
                        seen = await ranks(sessions[name], query, text)
                        if seen.get(leg) != 1:
                            await anyio.sleep(0.3)
                assert seen.get(leg) == 1, (name, query, seen)
            for session in sessions.values():
                stats = structured(await session.call_tool("memory_stats", {}))
                assert stats["count"] == 4, stats
