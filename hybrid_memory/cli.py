"""The ``hybrid-memory`` command line: the store commands, and a subcommand per plugin.

    hybrid-memory add "Alice prefers dark mode" --tag alice --path ./memory
    hybrid-memory search "what theme does alice like?" --path ./memory
    hybrid-memory list | get | delete | tags | stats | export | import ...
    hybrid-memory mcp ...      # the MCP server (hybrid-memory-mcp)
    hybrid-memory ui ...       # the memory browser (hybrid-memory-ui)
    hybrid-memory eval ...     # the evaluation harness (hybrid-memory-eval)
    hybrid-memory peers ...    # its foreign peers' venvs (hybrid-memory-eval)

The store commands live in :mod:`hybrid_memory._commands` (docs/cli.md): each takes
``--path`` / ``--url`` / ``--namespace`` (defaults from ``HYBRID_MEMORY_PATH`` /
``HYBRID_MEMORY_URL``), prints a table (``--json`` for scripts), and exits 0 when done,
1 when what was asked for is not there, 2 on a usage error or invalid input, 3 when the
store or the model failed, with a one-line message.

Each entry point in the group ``hybrid_memory.commands`` names a
``callable(argv: list[str]) -> int`` that receives the arguments after its name
(``hybrid-memory mcp --port 8765`` calls the ``mcp`` entry point with
``["--port", "8765"]``). The core imports no plugin: a plugin is loaded only when its
command is run. A known plugin that is not installed (``hybrid-memory mcp``,
``hybrid-memory eval``) prints the line that installs it and exits 2.

``python -m hybrid_memory ...`` runs the same command.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from hybrid_memory import _commands

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = ["build_parser", "main", "plugin_commands"]

#: The entry-point group plugins register their subcommands in.
COMMANDS_GROUP = "hybrid_memory.commands"
#: Plugin commands this project ships, and how to install each when it is missing.
_EVAL_INSTALL = (
    "pip install hybrid-memory-eval  (from a checkout: pip install -e benchmarks/evaluation)"
)
KNOWN_PLUGINS = {
    "mcp": (
        "the MCP memory server",
        "pip install hybrid-memory-mcp  (from a checkout: pip install -e integrations/mcp)",
    ),
    "ui": (
        "the memory browser (web page)",
        "pip install hybrid-memory-ui  (from a checkout: pip install -e integrations/ui)",
    ),
    "eval": ("the evaluation harness (retrieval quality on a dataset folder)", _EVAL_INSTALL),
    "peers": ("the evaluation's foreign peers (their venvs: build, list)", _EVAL_INSTALL),
}


def plugin_commands() -> dict[str, EntryPoint]:
    """The installed plugin subcommands, by name (the first one found for a name)."""
    from importlib.metadata import entry_points  # reads every installed package's data

    found: dict[str, EntryPoint] = {}
    for entry in entry_points(group=COMMANDS_GROUP):
        found.setdefault(entry.name, entry)
    return found


def build_parser(plugins: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The ``hybrid-memory`` command line: its commands and the installed ``plugins``'."""
    parser = argparse.ArgumentParser(
        prog="hybrid-memory", description="Hybrid (vector + BM25 + tag) memory for agents."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _commands.register(commands)
    # Listed for --help only: main() hands a plugin command's arguments to the plugin.
    for name in sorted({*plugins, *KNOWN_PLUGINS} - set(_commands.COMMANDS)):
        purpose = KNOWN_PLUGINS.get(name, ("a plugin command", ""))[0]
        note = "" if name in plugins else f" (not installed: {KNOWN_PLUGINS[name][1]})"
        commands.add_parser(name, help=f"{purpose}{note}", add_help=False)
    return parser


def _run_plugin(name: str, entry: EntryPoint | None, argv: list[str]) -> int:
    if entry is None:
        purpose, install = KNOWN_PLUGINS[name]
        print(
            f"hybrid-memory {name}: {purpose} is a separate package that is not installed.\n"
            f"Install it with: {install}",
            file=sys.stderr,
        )
        return 2
    try:
        command: Callable[[list[str]], int | None] = entry.load()
    except ImportError as exc:
        package = entry.dist.name if entry.dist else name
        install = KNOWN_PLUGINS.get(name, ("", f"pip install {package}"))[1]
        print(
            f"hybrid-memory {name}: the plugin could not be loaded ({exc}).\n"
            f"Reinstall it with: {install}",
            file=sys.stderr,
        )
        return 2
    return int(command(argv) or 0)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hybrid-memory`` console script; returns the exit status."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments and arguments[0] in _commands.COMMANDS:
        # A store command: the plugins need not be looked for.
        return _commands.run(build_parser().parse_args(arguments))
    plugins = plugin_commands()
    if arguments and (arguments[0] in plugins or arguments[0] in KNOWN_PLUGINS):
        name = arguments[0]
        return _run_plugin(name, plugins.get(name), arguments[1:])
    # A store command runs; anything else: argparse prints the usage (or --help), exits 2.
    args = build_parser(list(plugins)).parse_args(arguments)
    return _commands.run(args)


if __name__ == "__main__":
    raise SystemExit(main())
