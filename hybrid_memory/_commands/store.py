"""The options every store command takes (which store, which namespace, which
embedding, ``--json``) and the store they open.

A read (``search``, ``list``, ``get``, ``tags``, ``stats``) of an embedded path that
another process holds is answered by that process (:mod:`hybrid_memory._memory.read_client`):
the command then loads neither Chroma nor the model. Otherwise the command opens the
store itself, and only ``add`` and ``import`` may create it (or a namespace): every other
command on a store or namespace that does not exist says so, and creates nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from hybrid_memory._model.errors import HybridMemoryError

if TYPE_CHECKING:
    from hybrid_memory._memory.memory import HybridMemory
    from hybrid_memory._memory.read_client import OwnerReads

    #: What a read command runs on: the store, or its owner's answers.
    Readable = HybridMemory | OwnerReads

#: The commands that only read, and may be answered by the process holding the path.
READS = frozenset({"search", "list", "get", "tags", "stats"})
#: The commands that may create the store or a namespace (they write memories into it).
CREATING = frozenset({"add", "import"})


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
def open_store(args: argparse.Namespace) -> Iterator[Any]:
    """The store (or namespace view) the options name, closed on exit; for a read of a
    path another process holds, that process's answers (:class:`OwnerReads`). Without
    ``--path`` or ``--url``, the environment's ``HYBRID_MEMORY_PATH`` /
    ``HYBRID_MEMORY_URL``; neither is a usage error (an in-memory store would forget
    everything on exit)."""
    if args.path and args.url:
        raise UsageError("give --path or --url, not both")
    served = _served(args) if args.command in READS else None
    if served is not None:
        try:
            yield served
        finally:
            served.close()
        return
    with _opened(args) as memory:
        yield memory


def _served(args: argparse.Namespace) -> OwnerReads | None:
    """The reads of the path's owner, when the store is an embedded path that another
    process holds and can answer for this one."""
    from hybrid_memory._memory.read_client import owner_reads, store_environment

    path = args.path
    if not path and not args.url:
        environment = {k.upper(): v for k, v in store_environment().items()}
        path = (
            None if environment.get("HYBRID_MEMORY_URL") else environment.get("HYBRID_MEMORY_PATH")
        )
    if not path:
        return None
    return owner_reads(
        path,
        collection=args.collection,
        namespace=args.namespace,
        embedding_name=args.embedding_name if args.embedding else None,
        custom_embedding=bool(args.embedding),
    )


@contextlib.contextmanager
def _opened(args: argparse.Namespace) -> Iterator[HybridMemory]:
    """The store (or namespace view) opened in this process; created only by
    :data:`CREATING` commands."""
    from hybrid_memory._memory.memory import HybridMemory
    from hybrid_memory._model.settings import HybridMemorySettings

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
    create = args.command in CREATING
    text = _embeds(args)
    if embedding is None and text is not None and (create or _exists(settings)):
        from hybrid_memory._memory.early_model import loading_default_model

        embedding = loading_default_model(settings, text)
    with HybridMemory(
        settings=settings, embedding=embedding, embedding_name=args.embedding_name, create=create
    ) as memory:
        view = memory
        for name in args.namespace:
            view = view.namespace(name, create=create)
        yield view


def _exists(settings: Any) -> bool:
    """Whether the store may exist (an embedded path is looked at; a server is asked when
    the store opens)."""
    from hybrid_memory._memory.existing import holds_store

    return not settings.path or holds_store(settings.path)


def _embeds(args: argparse.Namespace) -> str | None:
    """The one text the command embeds with the store's model (a search's query, an added
    text given on the command line), whose model is then loaded while the store opens;
    None for the other commands."""
    if args.command == "search":
        return str(args.query)
    if args.command == "add" and args.text != "-":
        return str(args.text)
    return None


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
