"""The built-in commands of ``hybrid-memory`` (``add``, ``search``, ``list``, ``get``,
``delete``, ``tags``, ``stats``, ``export``, ``import``): each module registers its
subcommands on the parser and runs them on an open store; :func:`run` opens the store,
runs one, and turns every error into a one-line message and an exit status.

Exit status: 0 done; 1 not found (an id, a store or a namespace, or no hits, or a filter
matching nothing to delete); 2 a usage error or invalid input (the message says which); 3
the store or the embedding model failed (the message says how).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from hybrid_memory._commands import memories, overview, search, transfer
from hybrid_memory._commands.store import UsageError, open_store, store_options
from hybrid_memory._model.errors import (
    EmbeddingMismatchError,
    HybridMemoryError,
    InvalidInputError,
    MemoryNotFoundError,
    StoreNotFoundError,
)

#: The built-in commands, in the order ``--help`` lists them.
COMMANDS = ("add", "search", "list", "get", "delete", "tags", "stats", "export", "import")
_MODULES = (memories, search, overview, transfer)

NOT_FOUND = 1
USAGE = 2
FAILED = 3


def register(commands: Any) -> None:
    """Add the built-in commands to ``commands`` (an argparse subparsers action)."""
    shared = store_options()
    for module in _MODULES:
        module.register(commands, shared)


def run(args: argparse.Namespace) -> int:
    """Run a parsed built-in command; its exit status."""
    name = f"hybrid-memory {args.command}"
    try:
        check = getattr(args, "check", None)
        if check is not None:  # what can be refused before the store is opened
            check(args)
        with open_store(args) as memory:
            return int(args.run(args, memory))
    except UsageError as exc:
        return _fail(name, str(exc), USAGE)
    except (MemoryNotFoundError, StoreNotFoundError) as exc:
        return _fail(name, str(exc), NOT_FOUND)
    except InvalidInputError as exc:
        return _fail(name, str(exc), USAGE)
    except EmbeddingMismatchError as exc:
        opening = not args.embedding and "--re-embed" not in str(exc)
        hint = (
            " (a store built with another embedding is opened with --embedding MODULE:NAME "
            "--embedding-name NAME)"
            if opening
            else ""
        )
        return _fail(name, f"{exc}{hint}", USAGE)
    except HybridMemoryError as exc:
        return _fail(name, str(exc), FAILED)
    except BrokenPipeError:
        # The reader of stdout went away (`hybrid-memory export - | head`): stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return NOT_FOUND
    except KeyboardInterrupt:
        return _fail(name, "interrupted", 130)
    except OSError as exc:  # a file of the command's (stdin, stdout, a FILE) failed
        where = f": {exc.filename}" if exc.filename else ""
        return _fail(name, f"{exc.strerror or exc}{where}", FAILED)


def _fail(name: str, message: str, status: int) -> int:
    print(f"{name}: error: {message}", file=sys.stderr)
    return status
