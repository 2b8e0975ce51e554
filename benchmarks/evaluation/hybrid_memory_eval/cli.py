"""``hybrid-memory eval`` and ``hybrid-memory peers``, registered as plugin commands.

    hybrid-memory eval DATASET_DIR [--k 10] [--json] [--set KEY=VALUE ...]
                       [--sweep KEY=v1,v2,... ...] [--grid] [--peers] [--by FIELD]
                       [--run FILE] [--limit N] [--quiet]
    hybrid-memory peers install [mem0|mcp-memory-service ...]
    hybrid-memory peers list

``eval`` runs the evaluation protocol of :mod:`hybrid_memory_eval` on a dataset folder
(``corpus.jsonl``, ``queries.jsonl``, ``qrels.tsv``). ``--set`` overrides a setting
(any field of ``HybridMemorySettings``; the value is parsed as JSON when it can be,
so ``--set alpha=0.6``, ``--set alpha=null``, ``--set alpha_values=[0.5,0.7,0.8]``);
``--sweep`` evaluates each listed value of a setting in turn on one store (``--grid``:
every combination of several sweeps); ``--peers`` adds LangChain's EnsembleRetriever,
LlamaIndex's QueryFusionRetriever and plain RRF on the same data (the core's extra
``bench``, which this distribution's ``peers`` extra and the README's setup command
install), and mem0 and mcp-memory-service, each from a virtual environment of its own
that ``peers install`` builds (a peer whose venv is not built is reported as not run,
with the command that builds it). Every peer and sweep row gets a p-value: a paired
randomisation test of its per-query nDCG@k against our run's. ``--by metadata.type``
repeats the table for each value of that query field; ``--run FILE`` writes every
system's ranking as a TREC run file. Progress goes to stderr; the report (or, with
``--json``, one JSON object) to stdout.

The ``hybrid_memory.commands`` entry points ``eval`` and ``peers`` name
:func:`eval_command` and :func:`peers_command`; each receives the arguments after its
name. :func:`main` takes the command name first (``main(["eval", DIR])``), for tests
and ``python -m hybrid_memory_eval``.

Exit status: 0 on success, 2 on bad arguments or a malformed dataset, 1 on any other
hybrid-memory error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence

from hybrid_memory import HybridMemoryError, InvalidInputError

__all__ = ["eval_command", "eval_parser", "main", "peers_command", "peers_parser"]


def eval_parser() -> argparse.ArgumentParser:
    run = argparse.ArgumentParser(
        prog="hybrid-memory eval",
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
        "plain RRF (installed by the README's setup command; alone: "
        "pip install 'hybrid-memory-eval[peers]'), and mem0 and mcp-memory-service from "
        "their venvs (built by: hybrid-memory peers install)",
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
    return run


def peers_parser() -> argparse.ArgumentParser:
    peers = argparse.ArgumentParser(
        prog="hybrid-memory peers",
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
    return peers


def _eval(args: argparse.Namespace) -> int:
    # Loaded here, not at the top: --help needs none of the harness.
    from hybrid_memory_eval import (
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
    from hybrid_memory_eval.foreign import (
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


def _run(
    name: str,
    parser: argparse.ArgumentParser,
    action: Callable[[argparse.Namespace], int],
    argv: Sequence[str],
) -> int:
    args = parser.parse_args(list(argv))
    try:
        return action(args)
    except InvalidInputError as exc:
        print(f"hybrid-memory {name}: error: {exc}", file=sys.stderr)
        return 2
    except HybridMemoryError as exc:
        print(f"hybrid-memory {name}: error: {exc}", file=sys.stderr)
        return 1


def eval_command(argv: Sequence[str]) -> int:
    """The ``eval`` entry point: ``hybrid-memory eval ARGS``."""
    return _run("eval", eval_parser(), _eval, argv)


def peers_command(argv: Sequence[str]) -> int:
    """The ``peers`` entry point: ``hybrid-memory peers ARGS``."""
    return _run("peers", peers_parser(), _peers, argv)


_COMMANDS = {"eval": eval_command, "peers": peers_command}


def main(argv: Sequence[str] | None = None) -> int:
    """``eval ...`` or ``peers ...``, the command's name first."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if not arguments or arguments[0] not in _COMMANDS:
        print("usage: python -m hybrid_memory_eval {eval,peers} ...", file=sys.stderr)
        return 2
    return _COMMANDS[arguments[0]](arguments[1:])
