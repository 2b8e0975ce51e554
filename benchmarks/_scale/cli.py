"""The command line: prepares the data per N, runs every system in a worker process
one after the other, and prints the table or the JSON."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

from . import __doc__ as about
from .compare import compare, ingest_rounds, targets
from .constants import (
    CHROMA_DISK,
    CHROMA_MEMORY,
    DEFAULT_DATA,
    FOREIGN_SYSTEMS,
    LABELS,
    MODEL,
    OURS_DISK,
    OURS_MEMORY,
    PEER_SYSTEMS,
    PEER_TEXT_SYSTEMS,
    REPO,
    SCRIPT,
    SEED,
    WARMUP_QUERIES,
    K,
)
from .data import prepare
from .embedding import HashingEmbedding
from .plot import describe, load_reports, plot
from .render import render
from .turns import Turns, make_ring
from .worker import run_model_worker, run_worker


def _worker_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("ANONYMIZED_TELEMETRY", "False")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _paired(
    names: list[str], workdir: Path, adds: int, timeout: float | None, keep: list[str]
) -> dict[str, dict[str, Any]]:
    """Every system's worker at once, taking turns block by block (:mod:`_scale.turns`);
    should one fail, the others are stopped (their ring would wait for it)."""
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="scale-turns-") as folder:
        ring = Path(folder)
        make_ring(ring, len(names))

        def command(name: str, position: int) -> list[str]:
            worker = ["--worker", name, "--workdir", str(workdir), "--adds", str(adds), *keep]
            ring_place = ["--turns", str(ring), "--position", str(position), "--of"]
            out = ["--out", str(ring / f"{name}.json")]
            return [sys.executable, str(SCRIPT), *worker, *ring_place, str(len(names)), *out]

        procs = {
            name: subprocess.Popen(
                command(name, position),
                env=_worker_env(),
                stdout=sys.stderr,  # worker chatter never pollutes --json on stdout
            )
            for position, name in enumerate(names)
        }
        deadline = None if timeout is None else time.monotonic() + timeout
        while any(proc.poll() is None for proc in procs.values()):
            failed = any(proc.returncode not in (None, 0) for proc in procs.values())
            late = deadline is not None and time.monotonic() > deadline
            if failed or late:
                for proc in procs.values():
                    if proc.poll() is None:
                        proc.kill()
                        proc.wait()
                break
            time.sleep(0.5)
        for name, proc in procs.items():
            out = ring / f"{name}.json"
            if proc.returncode == 0 and out.exists():
                results[name] = json.loads(out.read_text(encoding="utf-8"))
            else:
                results[name] = {"error": f"worker exited with {proc.returncode}"}
    return results


def _child(args: list[str], timeout: float | None) -> dict[str, Any]:
    """Run the entry point as a worker in a fresh interpreter and return its JSON result."""
    env = _worker_env()
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as out:
        out_path = Path(out.name)
    try:
        proc = subprocess.run(
            [sys.executable, str(SCRIPT), *args, "--out", str(out_path)],
            env=env,
            timeout=timeout,
            stdout=sys.stderr,  # worker chatter never pollutes --json on stdout
        )
        if proc.returncode != 0:
            return {"error": f"worker exited with {proc.returncode}"}
        return json.loads(out_path.read_text(encoding="utf-8"))
    except subprocess.TimeoutExpired:
        return {"error": f"worker timed out after {timeout} s"}
    finally:
        out_path.unlink(missing_ok=True)


def _commit() -> str | None:
    """The checkout's commit (with ``+dirty`` when the engine has local changes)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "hybrid_memory"],
            cwd=REPO,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return None
    return (head + ("+dirty" if dirty else "")) or None


def _versions() -> dict[str, str]:
    found = {}
    for package in (
        "hybrid-memory", "chromadb", "langchain-core", "langchain-community",
        "langchain-classic", "langchain-chroma", "rank-bm25", "llama-index-core",
        "llama-index-retrievers-bm25", "llama-index-vector-stores-chroma", "bm25s",
        "onnxruntime", "tokenizers", "numpy",
    ):  # fmt: skip
        with contextlib.suppress(importlib_metadata.PackageNotFoundError):
            found[package] = importlib_metadata.version(package)
    return found


def _log(message: str) -> None:
    print(f"[scale {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(about or "").split("\n\n")[0])
    parser.add_argument(
        "--n",
        type=int,
        nargs="+",
        default=[10_000, 100_000],
        help="store sizes (default: 10000 100000)",
    )
    parser.add_argument(
        "--queries", type=int, default=200, help="distinct timed queries (default 200; at most 980)"
    )
    parser.add_argument("--adds", type=int, default=20, help="timed single adds (default 20)")
    parser.add_argument(
        "--peer-adds",
        type=int,
        default=5,
        help="timed single adds for the peers, each a full BM25 rebuild (default 5)",
    )
    parser.add_argument(
        "--peers",
        action="store_true",
        help="also measure the LangChain and LlamaIndex hybrid retrievers",
    )
    parser.add_argument(
        "--model",
        action="store_true",
        help="also measure the default embedding model and end-to-end search",
    )
    parser.add_argument(
        "--model-batch-size",
        type=int,
        default=None,
        help="batch size for --model (default: the store's setting)",
    )
    parser.add_argument(
        "--model-backend",
        choices=("onnxruntime", "sentence-transformers"),
        default="onnxruntime",
        help="what runs the default model for --model: onnxruntime (the default backend) "
        "or sentence-transformers (the backend before it; needs that extra), to compare "
        "them on the same texts",
    )
    parser.add_argument(
        "--systems",
        nargs="+",
        choices=list(LABELS),
        default=None,
        help="measure only these systems",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run every system this many times per N, alternating, and report ingest per "
        "round and the median ratio against Chroma (the tables show the first round)",
    )
    parser.add_argument(
        "--paired",
        action="store_true",
        help="run the systems' workers at once, taking turns block by block (ingest, "
        "each add, every 10 searches), so that they meet the same minutes of a machine "
        "whose speed drifts; not with the peers",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument(
        "--plot",
        type=Path,
        default=None,
        metavar="FILE.png",
        help="draw search p50/p95 and add-one latency against N (log-log) for every system "
        "measured into this PNG: from this run, or with --from from result files (needs "
        "matplotlib, the bench extra)",
    )
    parser.add_argument(
        "--from",
        dest="from_files",
        type=Path,
        nargs="+",
        default=None,
        metavar="RESULT.json",
        help="with --plot: draw from these result files (--json output) instead of running",
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        help=f"evaluation data directory (default {DEFAULT_DATA})",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds allowed per system and N (default: no limit)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="keep each system's store in this folder (<name>-<n>) instead of deleting "
        "it, to profile it afterwards",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--turns", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--position", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--of", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        if args.worker == MODEL:
            result = run_model_worker(args.workdir, args.model_batch_size, args.model_backend)
        else:
            turns = None if args.turns is None else Turns(args.turns, args.position, args.of)
            result = run_worker(args.worker, args.workdir, args.adds, turns, args.keep)
        args.out.write_text(json.dumps(result), encoding="utf-8")
        return 0

    if args.from_files is not None:
        if args.plot is None:
            parser.error("--from: draws a curve; name the picture with --plot FILE.png")
        curves = plot(load_reports(args.from_files), args.plot)
        print(describe(curves, args.plot))
        return 0
    if not (args.data / "locomo" / "corpus.jsonl").exists():
        parser.error(f"no evaluation data in {args.data} (pass --data)")
    if args.rounds < 1:
        parser.error(f"--rounds: expected an integer >= 1, got {args.rounds}")
    systems = args.systems or [OURS_DISK, OURS_MEMORY, CHROMA_DISK, CHROMA_MEMORY] + (
        list(PEER_SYSTEMS) if args.peers else []
    )
    if args.paired and any(name in PEER_SYSTEMS for name in systems):
        parser.error("--paired: the peers take other add counts; leave them out")
    for name in systems:
        if name in FOREIGN_SYSTEMS:
            from hybrid_memory_eval.foreign import not_ready_reason

            reason = not_ready_reason(name)
            if reason:
                parser.error(f"--systems {name}: {reason}")
    adds = max(args.adds, args.peer_adds)
    keep = [] if args.keep is None else ["--keep", str(args.keep.resolve())]
    report: dict[str, Any] = {
        "benchmark": "hybrid-memory scale (issue 5)",
        "command": " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "versions": _versions(),
        "commit": _commit(),
        "config": {
            "n": args.n,
            "queries": args.queries,
            "warmup_queries": WARMUP_QUERIES,
            "k": K,
            "adds": args.adds,
            "rounds": args.rounds,
            "paired": args.paired,
            "peer_adds": args.peer_adds,
            "seed": SEED,
            "embedding": HashingEmbedding().name,
            "systems": systems,
        },
        "results": [],
        "model": None,
    }
    with tempfile.TemporaryDirectory(prefix="scale-data-") as tmp:
        last_workdir = None
        for n in args.n:
            workdir = Path(tmp) / f"n{n}"
            _log(f"N={n}: generating data")
            data_info = prepare(
                args.data,
                n,
                adds,
                args.queries,
                workdir,
                peers=any(name in PEER_TEXT_SYSTEMS for name in systems),
            )
            last_workdir = workdir
            rounds: list[dict[str, dict[str, Any]]] = []
            for round_number in range(1, args.rounds + 1):
                results: dict[str, dict[str, Any]] = {}
                where = f"N={n}" + (f", round {round_number}" if args.rounds > 1 else "")
                if args.paired:
                    _log(f"{where}: {', '.join(systems)}, paired")
                    started = time.perf_counter()
                    results = _paired(systems, workdir, args.adds, args.timeout, keep)
                    _log(f"{where}: paired run done in {time.perf_counter() - started:.0f} s")
                    rounds.append(results)
                    continue
                for name in systems:
                    count = args.peer_adds if name in PEER_SYSTEMS else args.adds
                    _log(f"{where}: {LABELS[name]}")
                    started = time.perf_counter()
                    results[name] = _child(
                        ["--worker", name, "--workdir", str(workdir), "--adds", str(count), *keep],
                        args.timeout,
                    )
                    _log(
                        f"{where}: {LABELS[name]} done in {time.perf_counter() - started:.0f} s"
                        + (f" ({results[name]['error']})" if "error" in results[name] else "")
                    )
                rounds.append(results)
            results = rounds[0]
            ratios = compare(results)
            repeated = ingest_rounds(rounds) if args.rounds > 1 else None
            block = {
                "n": n,
                "data": data_info,
                "systems": results,
                "ratios": ratios,
                "targets": targets(results, ratios, repeated),
            }
            if repeated:
                block["ingest_rounds"] = repeated
                # every round's figures, not only the first's (the tables show the first)
                block["rounds"] = []
                for each in rounds:
                    pairs = compare(each)
                    block["rounds"].append(
                        {"systems": each, "ratios": pairs, "targets": targets(each, pairs)}
                    )
            report["results"].append(block)
        if args.model and last_workdir is not None:
            _log("default embedding model")
            extra = (
                ["--model-batch-size", str(args.model_batch_size)]
                if (args.model_batch_size)
                else []
            )
            extra += ["--model-backend", args.model_backend]
            report["model"] = _child(
                ["--worker", MODEL, "--workdir", str(last_workdir), *extra], args.timeout
            )
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(render(report))
    if args.plot is not None:
        _log(describe(plot([report], args.plot), args.plot))
    failed = [
        name for block in report["results"] for name, r in block["systems"].items() if "error" in r
    ]
    if report["model"] and "error" in report["model"]:
        failed.append(MODEL)
    return 1 if failed else 0
