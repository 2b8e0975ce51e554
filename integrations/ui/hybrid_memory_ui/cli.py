"""``hybrid-memory ui`` (and the ``hybrid-memory-ui`` script): serve the page.

    hybrid-memory ui [--path DIR | --url URL] [--namespace NS] [--host 127.0.0.1]
                     [--port 8777] [--read-only] [--allowed-host NAME ...]

The store is ``--path`` (default ``HYBRID_MEMORY_PATH``) or ``--url`` (a Chroma server);
the other ``HYBRID_MEMORY_*`` variables set it up as for any store. Off loopback the page
needs ``HYBRID_MEMORY_UI_TOKEN``. Exit status 2 on a bad or unsafe configuration, 1 when
the store cannot be opened.
"""

from __future__ import annotations

import argparse
import importlib
import os
import socket
import sys
from collections.abc import Sequence
from typing import Any

from hybrid_memory import HybridMemory, HybridMemoryError, InvalidInputError
from hybrid_memory_ui.config import TOKEN_VARIABLE, UIConfig, UnsafeConfigError

__all__ = ["build_parser", "main", "run"]


def build_parser(prog: str = "hybrid-memory ui") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="A web page over a hybrid-memory store: browse, search and see why, edit, "
        "bulk delete or re-tag, stats, export and import. Serves http://HOST:PORT/.",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--path", help="the store's directory (default: HYBRID_MEMORY_PATH)")
    where.add_argument("--url", help="a Chroma server holding the store (http://host:8000)")
    parser.add_argument("--collection", help="the Chroma collection (default hybrid_memory)")
    parser.add_argument(
        "--namespace", help="show only this namespace of the store (one that exists)"
    )
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8777, help="port (default 8777; 0: any free)")
    parser.add_argument(
        "--read-only",
        action="store_true",
        help="offer no edit, delete or import; refuse writes (the store must exist)",
    )
    parser.add_argument(
        "--allowed-host",
        dest="allowed_hosts",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name the page answers to besides loopback and --host; repeatable",
    )
    parser.add_argument(
        "--embedding",
        metavar="MODULE:NAME",
        help="the embedding the store was built with, when not the default model: an "
        "importable callable(list[str]) -> vectors, or a class made with no arguments",
    )
    parser.add_argument("--embedding-name", help="the name recorded for that embedding")
    parser.add_argument(
        "--poll-seconds",
        type=float,
        default=2.0,
        help="how often an open page checks for other processes' writes (default 2)",
    )
    return parser


def load_embedding(spec: str) -> Any:
    """``module:name`` -> the object (a class is instantiated with no arguments)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise InvalidInputError("--embedding", f"expected MODULE:NAME, got {spec!r}")
    try:
        found = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise InvalidInputError("--embedding", f"cannot load {spec!r}: {exc}") from exc
    return found() if isinstance(found, type) else found


def open_memory(args: argparse.Namespace) -> tuple[HybridMemory, HybridMemory]:
    """The store, and the view the page shows (the store, or its ``--namespace``, which
    must exist). With ``--read-only``, the store must exist too."""
    options: dict[str, Any] = {}
    if args.url:
        options["url"] = args.url
    elif args.path:
        options["path"] = args.path
    if args.collection:
        options["collection"] = args.collection
    if args.embedding:
        options["embedding"] = load_embedding(args.embedding)
        options["embedding_name"] = args.embedding_name
    # A page that may not write opens only a store that exists; a namespace is never made
    # by starting the page (a typo would leave an empty one behind).
    root = HybridMemory(**options, create=not args.read_only)
    try:
        view = root.namespace(args.namespace, create=False) if args.namespace else root
        return root, view
    except BaseException:
        root.close()
        raise


def run(argv: Sequence[str] | None = None, *, prog: str = "hybrid-memory ui") -> int:
    """Parse ``argv`` (without the ``ui`` word), then serve until interrupted."""
    args = build_parser(prog).parse_args(argv)
    config = UIConfig(
        host=args.host,
        port=args.port,
        token=os.environ.get(TOKEN_VARIABLE) or None,
        allowed_hosts=tuple(args.allowed_hosts),
        read_only=args.read_only,
        poll_seconds=args.poll_seconds,
    )
    try:
        config.check()  # before the store and the model load: refuse unsafe binds at once
        root, memory = open_memory(args)
    except (UnsafeConfigError, InvalidInputError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except HybridMemoryError as exc:  # StoreNotFoundError included: exit 1, nothing made
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1
    if memory.settings.path is None and memory.settings.url is None:
        print(
            f"{prog}: note: no --path, --url or HYBRID_MEMORY_PATH: showing an empty "
            "in-memory store",
            file=sys.stderr,
        )
    import uvicorn

    from hybrid_memory_ui.app import create_app

    try:
        sock = bind(config.host, config.port)
    except OSError as exc:
        print(
            f"{prog}: error: cannot listen on {config.host}:{config.port}: {exc}", file=sys.stderr
        )
        root.close()
        return 2
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"{prog}: serving {memory!r} at http://{shown}:{port}/", flush=True)
    server = uvicorn.Server(
        uvicorn.Config(create_app(memory, config), log_level="warning", server_header=False)
    )
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        root.close()
    return 0


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: one the system picks)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]"), port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hybrid-memory-ui`` console script."""
    return run(argv, prog="hybrid-memory-ui")


if __name__ == "__main__":
    raise SystemExit(main())
