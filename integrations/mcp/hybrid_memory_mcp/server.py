"""The MCP server over one :class:`hybrid_memory.HybridMemory` store.

``create_server(memory)`` returns an ``mcp`` SDK ``MCPServer`` (the SDK's FastMCP API,
renamed in mcp 2) with the tools of :mod:`hybrid_memory_mcp.tools` (strict input
schemas, structured output) and the resources and prompts of
:mod:`hybrid_memory_mcp.context`::

    from hybrid_memory import HybridMemory
    from hybrid_memory_mcp import create_server

    server = create_server(HybridMemory(path="./memory"))
    server.run()                      # stdio; see hybrid_memory_mcp.cli for HTTP

With a namespace (``MCPServerSettings.namespace``) every tool, resource and prompt works
on ``memory.namespace(name)``: memories of its own with their own keyword index, so
nothing of another namespace (ids, tags, counts, keyword statistics) is seen. Memories
stored by the earlier ``<namespace>:<id>`` scheme are moved into it on start
(:mod:`hybrid_memory_mcp.legacy`).
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.types import ToolAnnotations

from hybrid_memory import HybridMemory
from hybrid_memory_mcp.arguments import StrictTool
from hybrid_memory_mcp.context import add_prompts, add_resources
from hybrid_memory_mcp.legacy import migrate_prefixed_namespace
from hybrid_memory_mcp.models import (
    DeleteResult,
    MemoryPage,
    MemoryRecord,
    MemoryStats,
    SearchHit,
    SearchResponse,
    StoreManyResult,
    StoreResult,
    TagList,
)
from hybrid_memory_mcp.settings import MCPServerSettings
from hybrid_memory_mcp.tools import MemoryTools

__all__ = [
    "DeleteResult",
    "MemoryPage",
    "MemoryRecord",
    "MemoryStats",
    "SearchHit",
    "SearchResponse",
    "StoreManyResult",
    "StoreResult",
    "TagList",
    "create_server",
]

SERVER_NAME = "hybrid-memory"
INSTRUCTIONS = (
    "Long-term memory. Save facts worth remembering with store_memory (short texts, with "
    "tags and metadata such as user or topic), several at once with store_memories; recall "
    "with search_memory before answering questions that may depend on earlier "
    "conversations; browse with list_memories. Filters use Chroma's where syntax over "
    "metadata, plus the fields tags, created_at and updated_at."
)

# Each tool: its title and what it does to the store (the MCP tool annotations).
_READ = ToolAnnotations(read_only_hint=True)
TOOLS: dict[str, tuple[str, ToolAnnotations]] = {
    "store_memory": ("Store a memory", ToolAnnotations(destructive_hint=False)),
    "store_memories": ("Store many memories", ToolAnnotations(destructive_hint=False)),
    "search_memory": ("Search memory", _READ),
    "get_related": ("Related memories", _READ),
    "get_memory": ("Get a memory", _READ),
    "list_memories": ("Browse memories", _READ),
    "update_memory": (
        "Update a memory",
        ToolAnnotations(destructive_hint=True, idempotent_hint=True),
    ),
    "delete_memory": ("Delete memories", ToolAnnotations(destructive_hint=True)),
    "list_tags": ("List tags", _READ),
    "memory_stats": ("Memory statistics", _READ),
}


def create_server(
    memory: HybridMemory,
    settings: MCPServerSettings | None = None,
    *,
    name: str = SERVER_NAME,
) -> MCPServer:
    """An MCP server whose tools read and write ``memory`` (or, with
    ``settings.namespace``, that namespace of it).

    The server does not close ``memory``; the caller owns it (closing it closes the
    namespace view too).
    """
    settings = settings or MCPServerSettings()
    scoped = open_scope(memory, settings)
    tools = MemoryTools(scoped, settings.namespace)
    server: MCPServer = MCPServer(
        name,
        instructions=INSTRUCTIONS,
        version=_version(),
        log_level=settings.log_level,
        tools=build_tools(tools),
    )
    add_resources(server, lambda: scoped)
    add_prompts(server, lambda: scoped)
    return server


def open_scope(memory: HybridMemory, settings: MCPServerSettings) -> HybridMemory:
    """The store the tools work on: ``memory`` itself, or its namespace, with the
    namespace's memories of the old prefixed scheme moved in first."""
    if settings.namespace is None:
        return memory
    moved = migrate_prefixed_namespace(memory, settings.namespace, settings.namespace_key)
    if moved:
        print(
            f"hybrid-memory mcp: moved {moved} memories of namespace {settings.namespace!r} "
            "from the old '<namespace>:<id>' scheme into the namespace",
            file=sys.stderr,
            flush=True,
        )
    return memory.namespace(settings.namespace)


def build_tools(tools: MemoryTools) -> list[Tool]:
    """The strict MCP tools of ``tools``' methods, with the store's limits in their
    schemas."""
    max_k = {"k": {"maximum": tools.memory.settings.max_k}}
    return [
        StrictTool.build(
            getattr(tools, tool_name),
            title=title,
            annotations=annotations,
            bounds=max_k if tool_name in ("search_memory", "get_related") else None,
        )
        for tool_name, (title, annotations) in TOOLS.items()
    ]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hybrid-memory-mcp")
    except PackageNotFoundError:
        return "0.1.0"
