"""The ``hybrid-memory`` command line.

    hybrid-memory eval DATASET_DIR [--k 10] [--json] [--set KEY=VALUE ...]
                       [--sweep KEY=v1,v2,... ...] [--grid] [--peers] [--by FIELD]
                       [--run FILE] [--limit N] [--quiet]
    hybrid-memory peers install [mem0|mcp-memory-service ...]
    hybrid-memory peers list

``eval`` runs the evaluation protocol of :mod:`hybrid_memory.evaluation` on a dataset folder
(``corpus.jsonl``, ``queries.jsonl``, ``qrels.tsv``). ``--set`` overrides a setting
(any field of ``HybridMemorySettings``; the value is parsed as JSON when it can be,
so ``--set alpha=0.6``, ``--set alpha=null``, ``--set alpha_values=[0.5,0.7,0.8]``);
``--sweep`` evaluates each listed value of a setting in turn on one store (``--grid``:
every combination of several sweeps); ``--peers`` adds LangChain's EnsembleRetriever,
LlamaIndex's QueryFusionRetriever and plain RRF on the same data (extra ``bench``, which
the README's setup command installs through ``dev``), and mem0 and mcp-memory-service,
each from a virtual environment of its own that ``peers install`` builds (a peer whose
venv is not built is reported as not run, with the command that builds it). Every
peer and sweep row gets a p-value: a paired randomisation test of its per-query nDCG@k
against our run's. ``--by metadata.type`` repeats the table for each value of that query
field; ``--run FILE`` writes every system's ranking as a TREC run file. Progress
goes to stderr; the report (or, with ``--json``, one JSON object) to stdout.

``python -m hybrid_memory ...`` runs the same command.

Exit status: 0 on success, 2 on bad arguments or a malformed dataset, 1 on any other
hybrid-memory error.

Other subcommands come from installed plugins: each entry point in the group
``hybrid_memory.commands`` names a ``callable(argv: list[str]) -> int`` that receives
the arguments after its name (``hybrid-memory mcp --port 8765`` calls the ``mcp``
entry point with ``["--port", "8765"]``). The core imports no plugin: a plugin is
loaded only when its command is run. A known plugin that is not installed
(``hybrid-memory mcp``) prints the line that installs it and exits 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import EntryPoint, entry_points

from hybrid_memory._errors import HybridMemoryError, InvalidInputError

__all__ = ["build_parser", "main", "plugin_commands"]

#: The entry-point group plugins register their subcommands in.
COMMANDS_GROUP = "hybrid_memory.commands"
#: Plugin commands this project ships, and how to install each when it is missing.
KNOWN_PLUGINS = {
    "mcp": (
        "the MCP memory server",
        "pip install hybrid-memory-mcp  (from a checkout: pip install -e integrations/mcp)",
    ),
}
_BUILTIN = frozenset({"eval", "peers"})


def plugin_commands() -> dict[str, EntryPoint]:
    """The installed plugin subcommands, by name (built-in names cannot be taken)."""
    found: dict[str, EntryPoint] = {}
    for entry in entry_points(group=COMMANDS_GROUP):
        if entry.name not in _BUILTIN:
            found.setdefault(entry.name, entry)
    return found


def build_parser(plugins: Sequence[str] = ()) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hybrid-memory", description="Hybrid (vector + BM25 + tag) memory for agents."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # Listed for --help only: main() hands a plugin command's arguments to the plugin.
    for name in sorted({*plugins, *KNOWN_PLUGINS}):
        purpose = KNOWN_PLUGINS.get(name, ("a plugin command", ""))[0]
        note = "" if name in plugins else f" (not installed: {KNOWN_PLUGINS[name][1]})"
        commands.add_parser(name, help=f"{purpose}{note}", add_help=False)
    run = commands.add_parser(
        "eval",
        help="measure retrieval quality on a dataset folder",
        description="Run the evaluation protocol (nDCG@k, Recall@5, Recall@k, MRR@k, query "
        "latency p50) on a folder holding corpus.jsonl, queries.jsonl and qrels.tsv.",
    )
    run.add_argument("dataset", metavar="DATASET_DIR", help="folder in the evaluation format")
    run.add_argument("--k", type=int, default=10, help="hits per query and metric cut-off")
    run.add_argument("--json", action="store_true", help="print one JSON object")
    run.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting (value parsed as JSON when possible); repeatable",
    )
    run.add_argument(
        "--sweep",
        action="append",
        default=[],
        metavar="KEY=v1,v2,...",
        help="evaluate each value of a setting, one table row each; repeatable",
    )
    run.add_argument("--grid", action="store_true", help="with several --sweep: every combination")
    run.add_argument(
        "--peers",
        action="store_true",
        help="also run LangChain EnsembleRetriever, LlamaIndex QueryFusionRetriever and "
        "plain RRF (extra 'bench': installed by the README's setup command; alone: "
        "pip install 'hybrid-agent-memory[bench]'), and mem0 and mcp-memory-service from their "
        "venvs (built by: hybrid-memory peers install)",
    )
    run.add_argument(
        "--by",
        default=None,
        metavar="FIELD",
        help="also print the table for each value of a query field (e.g. metadata.type)",
    )
    run.add_argument(
        "--run",
        dest="run_file",
        default=None,
        metavar="FILE",
        help="write each system's ranking as a TREC run: ours to FILE, every other "
        "system beside it as <stem>.<system><suffix>",
    )
    run.add_argument(
        "--limit", type=int, default=None, metavar="N", help="only the first N queries"
    )
    run.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    peers = commands.add_parser(
        "peers",
        help="build or list the venvs of the foreign evaluation peers (mem0, mcp-memory-service)",
        description="mem0 and mcp-memory-service conflict with hybrid-memory's dependencies, "
        "so 'eval --peers' runs each from a virtual environment of its own, built here "
        "(in ~/.cache/hybrid-memory/peer-venvs, or $HYBRID_MEMORY_PEER_VENVS).",
    )
    actions = peers.add_subparsers(dest="action", required=True, metavar="ACTION")
    install = actions.add_parser(
        "install", help="(re)build peer venvs with their pinned versions (default: all)"
    )
    install.add_argument("names", nargs="*", metavar="NAME", help="mem0, mcp-memory-service")
    actions.add_parser("list", help="each peer's venv: built or not, versions, time, size")
    return parser


def _eval(args: argparse.Namespace) -> int:
    # Loaded here, not at the top: the harness is not needed by plugin commands or --help.
    from hybrid_memory.evaluation import (
        QUIET,
        Progress,
        evaluate,
        format_report,
        load_dataset,
        parse_setting,
        parse_sweep,
    )

    if args.k < 1:
        raise InvalidInputError("--k", f"must be at least 1, got {args.k}")
    overrides = dict(parse_setting(text) for text in args.settings)
    sweeps = [parse_sweep(text) for text in args.sweep]
    dataset = load_dataset(args.dataset).limited(args.limit)
    report = evaluate(
        dataset,
        k=args.k,
        overrides=overrides,
        sweeps=sweeps,
        grid=args.grid,
        peers=args.peers,
        by=args.by,
        run_file=args.run_file,
        progress=QUIET if args.quiet else Progress(sys.stderr),
    )
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        print(format_report(report))
    return 0


def _peers(args: argparse.Namespace) -> int:
    # Loaded here, not at the top, like the harness.
    from hybrid_memory.evaluation.foreign import (
        FOREIGN_PEERS,
        build_venv,
        not_ready_reason,
        read_manifest,
        venv_dir,
    )

    if args.action == "list":
        for name, spec in FOREIGN_PEERS.items():
            reason = not_ready_reason(name)
            manifest = read_manifest(name) or {}
            if reason:
                print(f"{name}: not built ({reason})")
                continue
            installed = ", ".join(f"{p} {v}" for p, v in manifest.get("installed", {}).items())
            size = manifest.get("size_bytes", 0) / 2**20
            print(
                f"{name}: {venv_dir(name)}: {installed}; built {manifest.get('built_at')} "
                f"in {manifest.get('build_seconds')} s, {size:.0f} MiB"
            )
            if spec.why_pinned:
                print(f"  pinned: {spec.why_pinned}")
        return 0
    names = list(dict.fromkeys(args.names)) or list(FOREIGN_PEERS)
    unknown = [n for n in names if n not in FOREIGN_PEERS]
    if unknown:
        raise InvalidInputError(
            "NAME", f"unknown peer {unknown[0]!r}; choose from {', '.join(FOREIGN_PEERS)}"
        )
    for name in names:
        build_venv(name, progress=lambda line: print(line, file=sys.stderr, flush=True))
    return 0


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
    plugins = plugin_commands()
    if arguments and (arguments[0] in plugins or arguments[0] in KNOWN_PLUGINS):
        name = arguments[0]
        return _run_plugin(name, plugins.get(name), arguments[1:])
    args = build_parser(list(plugins)).parse_args(arguments)
    try:
        if args.command == "eval":
            return _eval(args)
        if args.command == "peers":
            return _peers(args)
    except InvalidInputError as exc:
        print(f"hybrid-memory {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except HybridMemoryError as exc:
        print(f"hybrid-memory {args.command}: error: {exc}", file=sys.stderr)
        return 1
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":
    raise SystemExit(main())
