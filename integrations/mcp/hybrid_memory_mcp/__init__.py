"""hybrid-memory-mcp: an MCP server over a hybrid-memory store.

``hybrid-memory mcp`` runs it (stdio by default; ``--transport streamable-http`` for
HTTP); ``create_server(memory)`` builds it in code.
"""

from __future__ import annotations

from hybrid_memory_mcp.http import build_http_app
from hybrid_memory_mcp.legacy import migrate_prefixed_namespace
from hybrid_memory_mcp.models import SimilarFound
from hybrid_memory_mcp.server import (
    DeleteResult,
    MemoryPage,
    MemoryRecord,
    MemoryStats,
    SearchHit,
    SearchResponse,
    StoreManyResult,
    StoreResult,
    TagList,
    create_server,
)
from hybrid_memory_mcp.settings import MCPServerSettings

__version__ = "0.1.0"

__all__ = [
    "DeleteResult",
    "MCPServerSettings",
    "MemoryPage",
    "MemoryRecord",
    "MemoryStats",
    "SearchHit",
    "SearchResponse",
    "SimilarFound",
    "StoreManyResult",
    "StoreResult",
    "TagList",
    "build_http_app",
    "create_server",
    "migrate_prefixed_namespace",
]
