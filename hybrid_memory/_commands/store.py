"""The options every store command takes (which store, which namespace, which
embedding, ``--json``) and the store they open."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Iterator
from typing import Any

from hybrid_memory._memory.memory import HybridMemory
from hybrid_memory._model.errors import HybridMemoryError
from hybrid_memory._model.settings import HybridMemorySettings


class UsageError(Exception):
    """A command line that cannot run as given (exit status 2)."""


def store_options() -> argparse.ArgumentParser:
    """The options shared by the store commands, as a parent parser."""
    shared = argparse.ArgumentParser(add_help=False)
    where = shared.add_argument_group("store")
    where.add_argument(
        "--path", help="the store's directory (default: HYBRID_MEMORY_PATH)", metavar="DIR"
    )
    where.add_argument(
        "--url", help="a Chroma server, http://host:port (default: HYBRID_MEMORY_URL)"
    )
    where.add_argument(
        "--namespace",
        action="append",
        default=[],
        metavar="NAME",
        help="work in this namespace of the store; repeat for a nested one",
    )
    where.add_argument(
        "--collection", help="the Chroma collection (default: HYBRID_MEMORY_COLLECTION)"
    )
    where.add_argument(
        "--embedding",
        metavar="MODULE:NAME",
        help="the embedding the store was built with, when it is not the default model: a "
        "Python object (a class is instantiated with no arguments), e.g. "
        "my_agent.embeddings:embedder",
    )
    where.add_argument(
        "--embedding-name",
        metavar="NAME",
        help="the name recorded with the store for that embedding (see `stats`)",
    )
    shared.add_argument("--json", action="store_true", help="print JSON, for scripts")
    return shared


@contextlib.contextmanager
def open_store(args: argparse.Namespace) -> Iterator[HybridMemory]:
    """The store (or namespace view) the options name, closed on exit. Without
    ``--path`` or ``--url``, the environment's ``HYBRID_MEMORY_PATH`` /
    ``HYBRID_MEMORY_URL``; neither is a usage error (an in-memory store would forget
    everything on exit)."""
    if args.path and args.url:
        raise UsageError("give --path or --url, not both")
    overrides: dict[str, Any] = {}
    if args.path or args.url:
        # The one given beats the environment's other one.
        overrides = {"path": args.path or None, "url": args.url or None}
    if args.collection:
        overrides["collection"] = args.collection
    try:
        settings = HybridMemorySettings(**overrides)
    except HybridMemoryError:
        raise
    except ValueError as exc:  # pydantic's ValidationError
        raise UsageError(str(exc).splitlines()[0]) from None
    if not settings.path and not settings.url:
        raise UsageError(
            "which store? give --path DIR or --url URL "
            "(or set HYBRID_MEMORY_PATH or HYBRID_MEMORY_URL)"
        )
    embedding = load_embedding(args.embedding) if args.embedding else None
    with HybridMemory(
        settings=settings, embedding=embedding, embedding_name=args.embedding_name
    ) as memory:
        view = memory
        for name in args.namespace:
            view = view.namespace(name)
        yield view


def load_embedding(spec: str) -> Any:
    """The object ``MODULE:NAME`` names (``NAME`` may be dotted); a class is
    instantiated with no arguments. The current directory is importable, as it is for
    ``python -m``."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise UsageError(f"--embedding: expected MODULE:NAME, got {spec!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"--embedding: cannot import {module_name!r}: {exc}") from None
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise UsageError(f"--embedding: {module_name!r} has no {attribute!r}") from None
    if isinstance(target, type):
        try:
            target = target()
        except Exception as exc:
            raise UsageError(f"--embedding: {spec} could not be made: {exc}") from None
    return target
