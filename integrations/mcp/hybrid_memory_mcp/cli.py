"""``hybrid-memory mcp`` (and the ``hybrid-memory-mcp`` script): run the MCP server.

    hybrid-memory mcp                                   # stdio, what desktop/IDE clients launch
    hybrid-memory mcp --transport streamable-http [--host 127.0.0.1] [--port 8765]
                      [--token T] [--allowed-host H ...] [--allowed-origin O ...]
                      [--max-body-bytes N] [--namespace NS]

The store comes from the ``HYBRID_MEMORY_*`` variables (``HYBRID_MEMORY_PATH``,
``HYBRID_MEMORY_URL``, ``HYBRID_MEMORY_COLLECTION``, ...); the server's options from
``HYBRID_MEMORY_MCP_*`` (the flags win). Exit status 2 on a bad or unsafe
configuration, 1 when the store cannot be opened.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from hybrid_memory import HybridMemory, HybridMemoryError, InvalidInputError
from hybrid_memory_mcp.settings import MCPServerSettings

__all__ = ["build_parser", "main", "run"]


def build_parser(prog: str = "hybrid-memory mcp") -> argparse.ArgumentParser:
    """The ``hybrid-memory mcp`` command line."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Serve a hybrid-memory store to MCP clients (tools: store_memory, "
        "store_memories, search_memory, get_related, get_memory, list_memories, "
        "update_memory, delete_memory, list_tags, memory_stats). The store is set by "
        "HYBRID_MEMORY_PATH / HYBRID_MEMORY_URL / HYBRID_MEMORY_COLLECTION; every option "
        "below also reads HYBRID_MEMORY_MCP_<NAME>.",
    )
    parser.add_argument("--transport", choices=["stdio", "streamable-http"], help="default: stdio")
    parser.add_argument("--host", help="HTTP bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="HTTP port (default 8765)")
    parser.add_argument("--path", dest="http_path", help="HTTP endpoint path (default /mcp)")
    parser.add_argument(
        "--token",
        help="bearer token required on every HTTP request (required off loopback); "
        "prefer HYBRID_MEMORY_MCP_TOKEN, which other users cannot see in the process list",
    )
    parser.add_argument(
        "--allowed-host",
        dest="allowed_hosts",
        action="append",
        metavar="HOST",
        help="accepted Host header besides loopback (e.g. 'memory.internal:*'); repeatable",
    )
    parser.add_argument(
        "--allowed-origin",
        dest="allowed_origins",
        action="append",
        metavar="ORIGIN",
        help="accepted browser Origin besides loopback (e.g. 'https://app.example'); repeatable",
    )
    parser.add_argument(
        "--max-body-bytes", type=int, help="largest HTTP request body (default 1 MiB)"
    )
    parser.add_argument(
        "--namespace",
        help="scope every tool to this namespace of the store (its own memories and keyword index)",
    )
    parser.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"])
    return parser


def settings_from(args: argparse.Namespace) -> MCPServerSettings:
    """Flags that were given, over the environment."""
    names = (
        "transport",
        "host",
        "port",
        "http_path",
        "token",
        "allowed_hosts",
        "allowed_origins",
        "max_body_bytes",
        "namespace",
        "log_level",
    )
    given: dict[str, Any] = {n: getattr(args, n) for n in names if getattr(args, n) is not None}
    return MCPServerSettings(**given)


def run(argv: Sequence[str] | None = None, *, prog: str = "hybrid-memory mcp") -> int:
    """Parse ``argv`` (without the ``mcp`` word), then serve until interrupted."""
    args = build_parser(prog).parse_args(argv)
    try:
        settings = settings_from(args)
        if settings.transport == "streamable-http":
            settings.check_http()  # before the model loads: refuse unsafe binds at once
        memory = HybridMemory()
    except InvalidInputError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except HybridMemoryError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1

    from hybrid_memory_mcp.server import create_server

    if memory.settings.path is None and memory.settings.url is None:
        print(
            f"{prog}: note: memories are kept in memory and lost when the server stops; set "
            "HYBRID_MEMORY_PATH (a directory) or HYBRID_MEMORY_URL (a Chroma server) to keep them",
            file=sys.stderr,
            flush=True,
        )
    try:
        server = create_server(memory, settings)
        if settings.transport == "stdio":
            server.run("stdio")
        else:
            from hybrid_memory_mcp.http import serve_http

            where = f"http://{settings.host}:{settings.port}{settings.http_path}"
            print(f"{prog}: serving {memory!r} at {where}", file=sys.stderr, flush=True)
            serve_http(server, settings)
    except KeyboardInterrupt:
        pass
    finally:
        memory.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hybrid-memory-mcp`` console script."""
    return run(argv, prog="hybrid-memory-mcp")


if __name__ == "__main__":
    raise SystemExit(main())
