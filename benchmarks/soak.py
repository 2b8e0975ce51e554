"""Soak: many processes x threads on ONE store, adding, searching, updating and deleting,
on an embedded path and on a ``chroma run`` server (issue 21).

Usage::

    python benchmarks/soak.py                              # 3 processes x 2 threads, 30 s each
    python benchmarks/soak.py --seconds 10 --kill          # SIGKILL one process half-way
    python benchmarks/soak.py --stores embedded --json     # one store kind, one JSON document

What it does, for each store kind (``--stores``: ``embedded``, ``server`` or both):

1. Starts ``--processes`` worker processes on one store: ``HybridMemory(path=DIR)`` (the
   processes share the path through its owner, see ``hybrid_memory/_shared_path/ownership.py``), or
   ``HybridMemory(url=...)`` on a ``chroma run`` this script starts. When all are ready,
   each runs ``--threads`` threads for ``--seconds``: per step, 35 % add (one memory with
   a unique token), 40 % search (vocabulary words, one in four filtered to the thread's
   own memories), 15 % update of one of the thread's memories (new text, same token),
   10 % delete of one. A thread writes an intent line before each write and the
   acknowledgement after it returned, to a log per process (flushed each time).
2. ``--kill``: half-way, one process is killed with SIGKILL (on the embedded path, the
   owner of the path; on the server, process 0). Its acknowledged writes must survive;
   its one write in flight per thread is uncertain (left out of the text checks, and the
   counts allow for it).
3. When the load ends, every surviving process and one fresh process check the store
   as they see it, after ``sync()``: every acknowledged memory present with its last
   acknowledged text (else *lost*), found by keyword (a search for its token returns it
   with a ``keyword`` rank) and by vector (a search for its text returns it with a
   ``vector`` rank), every acknowledged delete gone, ``count()`` equal across processes
   and to the acknowledged number (within the uncertain writes).

Prints ops/s, latency percentiles per operation, memories lost, leg misses and
exceptions by type: the library's own (``HybridMemoryError``) apart from *foreign* ones
(anything else), which must be 0. Exit status 1 when an invariant failed.
The embedding is ``shared_load``'s seeded one (384 dimensions, no model).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.shared_load import (
    SEEDED_NAME,
    TAGS,
    VOCABULARY,
    SeededEmbedding,
    _Child,
    _error_name,
    _percentile,
    chroma_server,
)

OPERATIONS = ("add", "search", "update", "delete")


def open_store(kind: str, target: str) -> Any:
    from hybrid_memory import HybridMemory

    where = {"path": target} if kind == "embedded" else {"url": target}
    return HybridMemory(
        **where,  # type: ignore[arg-type]
        collection="soak",
        embedding=SeededEmbedding(),
        embedding_name=SEEDED_NAME,
        sync_interval=1.0,
    )


# --- a worker process -----------------------------------------------------------------------


class Worker:
    def __init__(self, memory: Any, process: int, log: Path) -> None:
        self.memory = memory
        self.process = process
        self._log = log.open("a", encoding="utf-8")
        self._lock = threading.Lock()
        self.latency_ms: dict[str, list[float]] = {op: [] for op in OPERATIONS}
        self.errors: Counter[str] = Counter()
        self.foreign: Counter[str] = Counter()
        self.first_foreign: str | None = None
        self.first_error: str | None = None

    def _write_log(self, record: dict[str, Any]) -> None:
        with self._lock:
            self._log.write(json.dumps(record) + "\n")
            self._log.flush()

    def run_thread(self, thread: int, deadline: float, seed: int) -> None:
        from hybrid_memory import HybridMemoryError

        rng = random.Random(f"{seed}-{self.process}-{thread}")
        owner = f"p{self.process}t{thread}"
        mine: list[tuple[str, str]] = []  # (id, token) of this thread's live memories
        serial = 0
        while time.monotonic() < deadline:
            roll = rng.random()
            op = (
                "add"
                if roll < 0.35 or not mine
                else "search"
                if roll < 0.75
                else ("update" if roll < 0.9 else "delete")
            )
            words = " ".join(rng.choices(VOCABULARY, k=rng.randint(5, 9)))
            intent: dict[str, Any] = {"op": op, "thread": thread, "intent": True}
            started = time.perf_counter()
            try:
                if op == "add":
                    token = f"zq{self.process}x{thread}x{serial}"
                    serial += 1
                    text = f"{words} {token}"
                    self._write_log({**intent, "token": token})
                    memory_id = self.memory.add(
                        text,
                        tags=rng.sample(TAGS, rng.randint(0, 2)),
                        metadata={"owner": owner, "seq": serial},
                    )
                    mine.append((memory_id, token))
                    self._write_log(
                        {"op": op, "thread": thread, "id": memory_id, "text": text, "token": token}
                    )
                elif op == "search":
                    query = " ".join(rng.choices(VOCABULARY, k=rng.randint(3, 5)))
                    filter_ = {"owner": owner} if rng.random() < 0.25 else None
                    hits = self.memory.search(query, k=10, filter=filter_)
                    if filter_ and any(h.metadata.get("owner") != owner for h in hits):
                        self.foreign["LeakedFilter"] += 1
                elif op == "update":
                    memory_id, token = rng.choice(mine)
                    text = f"{words} changed {token}"
                    self._write_log({**intent, "id": memory_id})
                    self.memory.update(memory_id, text=text)
                    self._write_log(
                        {"op": op, "thread": thread, "id": memory_id, "text": text, "token": token}
                    )
                else:
                    memory_id, token = mine.pop(rng.randrange(len(mine)))
                    self._write_log({**intent, "id": memory_id})
                    self.memory.delete(memory_id)
                    self._write_log({"op": op, "thread": thread, "id": memory_id})
            except Exception as error:
                if isinstance(error, HybridMemoryError):
                    self.errors[_error_name(error)] += 1
                    self.first_error = self.first_error or f"{_error_name(error)}: {error}"
                else:
                    self.foreign[_error_name(error)] += 1
                    self.first_foreign = self.first_foreign or traceback.format_exc()
                if op != "search":  # its outcome is unknown: left out of the checks
                    self._write_log({**intent, "failed": True})
                continue
            self.latency_ms[op].append((time.perf_counter() - started) * 1000)


def expected_state(directory: Path, killed: int | None) -> dict[str, Any]:
    """From every process's log: the memories that must exist (id -> text, token), the
    ids that must be gone, and the uncertain ones (a write in flight when its process
    was killed, or one that raised)."""
    live: dict[str, dict[str, str]] = {}
    gone: set[str] = set()
    uncertain: set[str] = set()
    uncertain_adds = 0
    for log in sorted(directory.glob("ops-*.jsonl")):
        process = int(log.stem.split("-")[1])
        pending: dict[int, dict[str, Any]] = {}  # thread -> its write in flight
        for line in log.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue  # the last line of a killed process, half written
            thread = record["thread"]
            if record.get("failed"):
                failed = pending.pop(thread, record)
                if "id" in failed:
                    uncertain.add(failed["id"])
                else:
                    uncertain_adds += 1
                continue
            if record.get("intent"):
                pending[thread] = record
                continue
            pending.pop(thread, None)
            if record["op"] in ("add", "update"):
                live[record["id"]] = {"text": record["text"], "token": record["token"]}
            else:
                live.pop(record["id"], None)
                gone.add(record["id"])
        if process == killed:
            for record in pending.values():
                if "id" in record:
                    uncertain.add(record["id"])
                else:
                    uncertain_adds += 1
    return {"live": live, "gone": gone, "uncertain": uncertain, "uncertain_adds": uncertain_adds}


def verify(memory: Any, expected: dict[str, Any]) -> dict[str, Any]:
    from hybrid_memory import HybridMemoryError, MemoryNotFoundError

    result: dict[str, Any] = {
        "lost": [],
        "wrong_text": [],
        "not_deleted": [],
        "keyword_misses": [],
        "vector_misses": [],
    }
    try:
        memory.sync(full=True)
        result["count"] = memory.count()
        result["index_count"] = memory.count({"seq": {"$gte": 0}})
        for memory_id, want in expected["live"].items():
            if memory_id in expected["uncertain"]:
                continue
            try:
                found = memory.get(memory_id)
            except MemoryNotFoundError:
                result["lost"].append(memory_id)
                continue
            if found.text != want["text"]:
                result["wrong_text"].append(memory_id)
            by_keyword = {h.id: h.ranks for h in memory.search(want["token"], k=10)}
            if "keyword" not in by_keyword.get(memory_id, {}):
                result["keyword_misses"].append(memory_id)
            by_vector = {h.id: h.ranks for h in memory.search(want["text"], k=10)}
            if "vector" not in by_vector.get(memory_id, {}):
                result["vector_misses"].append(memory_id)
                # What a miss looked like, for the report: its ranks in a deeper search
                # (None: not among 100) and the top 10's.
                deeper = {h.id: h.ranks for h in memory.search(want["text"], k=100)}
                result.setdefault("vector_miss_details", []).append(
                    {
                        "id": memory_id,
                        "ranks": deeper.get(memory_id),
                        "top": list(by_vector.values()),
                        **chroma_view(memory, memory_id, want["text"]),
                    }
                )
        for memory_id in expected["gone"] - expected["uncertain"]:
            with contextlib.suppress(MemoryNotFoundError):
                memory.get(memory_id)
                result["not_deleted"].append(memory_id)
    except Exception as error:
        kind = "errors" if isinstance(error, HybridMemoryError) else "foreign_errors"
        result[kind] = {_error_name(error): 1}
        result["traceback"] = traceback.format_exc()
    return result


def chroma_view(memory: Any, memory_id: str, text: str) -> dict[str, Any]:
    """What Chroma itself holds for a vector miss: whether its stored document and vector
    are those of the acknowledged text (else the collection is stale: a lost write), and
    where its own nearest-neighbour search, asked with that exact vector, puts the memory
    (None: not among the 100 nearest, an approximate-search miss)."""
    from hybrid_memory.testing import chroma_nearest, chroma_record

    stored = chroma_record(memory, memory_id)  # a diagnostic reads past the public API
    vector = SeededEmbedding()([text])[0]
    nearest = chroma_nearest(memory, vector, 100)
    return {
        "stored_text_matches": stored is not None and stored[0] == text,
        "stored_cosine": (
            float(sum(a * b for a, b in zip(stored[1], vector, strict=True)))
            if stored is not None
            else None
        ),
        "chroma_rank": nearest.index(memory_id) + 1 if memory_id in nearest else None,
        "collection_size": memory.count(),
    }


def worker_main(args: argparse.Namespace) -> None:
    directory = Path(args.dir)
    memory = open_store(args.kind, args.target)
    memory.search("warm up")
    from hybrid_memory.testing import owns_path

    owner = owns_path(memory)
    worker = Worker(memory, args.index, directory / f"ops-{args.index}.jsonl")
    print(f"READY {'owner' if owner else 'peer'}", flush=True)
    sys.stdin.readline()
    deadline = time.monotonic() + args.seconds
    threads = [
        threading.Thread(target=worker.run_thread, args=(t, deadline, args.seed))
        for t in range(args.threads)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print("DONE", flush=True)
    killed = sys.stdin.readline().strip()
    checked = verify(memory, expected_state(directory, int(killed) if killed else None))
    memory.close()
    report = {
        "latency_ms": worker.latency_ms,
        "errors": dict(worker.errors),
        "foreign_errors": dict(worker.foreign),
        "first_foreign": worker.first_foreign,
        "first_error": worker.first_error,
        "check": checked,
    }
    print("RESULT " + json.dumps(report), flush=True)


def fresh_main(args: argparse.Namespace) -> None:
    memory = open_store(args.kind, args.target)
    killed = int(args.killed) if args.killed else None
    checked = verify(memory, expected_state(Path(args.dir), killed))
    memory.close()
    print("RESULT " + json.dumps({"check": checked}), flush=True)


# --- the driver -----------------------------------------------------------------------------


def run_soak(kind: str, target: str, directory: Path, args: argparse.Namespace) -> dict[str, Any]:
    base = [sys.executable, __file__, "--kind", kind, "--target", target, "--dir", str(directory)]
    children = [
        _Child(
            [
                *base,
                "--worker",
                "--index",
                str(i),
                "--threads",
                str(args.threads),
                "--seconds",
                str(args.seconds),
                "--seed",
                str(args.seed),
            ],
            directory / f"worker-{i}.log",
        )
        for i in range(args.processes)
    ]
    killed: int | None = None
    try:
        roles = [child.expect("READY", 300) for child in children]
        started = time.monotonic()
        for child in children:
            child.send("GO")
        if args.kill:
            killed = roles.index("owner") if "owner" in roles else 0
            time.sleep(args.seconds / 2)
            os.kill(children[killed].process.pid, signal.SIGKILL)
        survivors = [c for i, c in enumerate(children) if i != killed]
        for child in survivors:
            child.expect("DONE", args.seconds + 600)
        elapsed = time.monotonic() - started
        reports = {}
        for i, child in enumerate(children):
            if i != killed:
                child.send("" if killed is None else str(killed))
        for i, child in enumerate(children):
            if i != killed:
                reports[f"process {i}"] = json.loads(child.expect("RESULT", 1800))
        fresh = _Child(
            [*base, "--fresh", "--killed", "" if killed is None else str(killed)],
            directory / "fresh.log",
        )
        try:
            reports["fresh process"] = json.loads(fresh.expect("RESULT", 1800))
        finally:
            fresh.stop()
    finally:
        for child in children:
            child.stop()
    return summarise(kind, reports, expected_state(directory, killed), elapsed, killed, roles)


def summarise(
    kind: str,
    reports: dict[str, Any],
    expected: dict[str, Any],
    elapsed: float,
    killed: int | None,
    roles: list[str],
) -> dict[str, Any]:
    latency: dict[str, list[float]] = {op: [] for op in OPERATIONS}
    errors: Counter[str] = Counter()
    foreign: Counter[str] = Counter()
    tracebacks = []
    for report in reports.values():
        for op, values in report.get("latency_ms", {}).items():
            latency[op] += values
        errors.update(report.get("errors", {}))
        foreign.update(report.get("foreign_errors", {}))
        errors.update(report["check"].get("errors", {}))
        foreign.update(report["check"].get("foreign_errors", {}))
        for key in ("first_foreign", "first_error"):
            if report.get(key):
                tracebacks.append(report[key])
        if report["check"].get("traceback"):
            tracebacks.append(report["check"]["traceback"])
    operations = sum(len(v) for v in latency.values())
    live = len(expected["live"])
    low = live - len(expected["uncertain"] & set(expected["live"]))
    high = live + expected["uncertain_adds"] + len(expected["uncertain"] - set(expected["live"]))
    checks = {}
    failures = []
    counts = set()
    for label, report in reports.items():
        check = report["check"]
        summary = {
            key: len(check[key])
            for key in ("lost", "wrong_text", "not_deleted", "keyword_misses", "vector_misses")
        }
        if check.get("vector_miss_details"):
            summary["vector_miss_details"] = check["vector_miss_details"][:3]
        summary["count"] = check.get("count")
        summary["index_count"] = check.get("index_count")
        checks[label] = summary
        counts.add(summary["count"])
        if any(summary[k] for k in ("lost", "wrong_text", "not_deleted")):
            failures.append(f"{label}: memories lost or wrong {summary}")
        if summary["keyword_misses"] or summary["vector_misses"]:
            failures.append(f"{label}: leg misses {summary}")
        if summary["count"] is None or not low <= summary["count"] <= high:
            failures.append(f"{label}: count {summary['count']} outside [{low}, {high}]")
        if summary["index_count"] != summary["count"]:
            failures.append(f"{label}: index count {summary['index_count']} != {summary['count']}")
    if len(counts) > 1:
        failures.append(f"the processes count differently: {sorted(map(str, counts))}")
    if foreign:
        failures.append(f"foreign errors: {dict(foreign)}")
    return {
        "store": kind,
        "seconds": round(elapsed, 1),
        "killed": None if killed is None else f"process {killed} ({roles[killed]})",
        "operations": operations,
        "ops_per_s": round(operations / elapsed, 1) if elapsed else None,
        "latency_ms": {
            op: {"n": len(v), "p50": _percentile(v, 50), "p95": _percentile(v, 95)}
            for op, v in latency.items()
        },
        "acknowledged_live": live,
        "uncertain": len(expected["uncertain"]) + expected["uncertain_adds"],
        "lost": sum(c["lost"] + c["wrong_text"] + c["not_deleted"] for c in checks.values()),
        "checks": checks,
        "library_errors": dict(errors),
        "foreign_errors": dict(foreign),
        "tracebacks": tracebacks[:3],
        "failures": failures,
    }


def print_report(report: dict[str, Any]) -> None:
    print(
        f"\n== {report['store']}: {report['operations']} operations in {report['seconds']} s, "
        f"{report['ops_per_s']} ops/s; killed: {report['killed']}"
    )
    for op, figures in report["latency_ms"].items():
        print(f"  {op:<7} n={figures['n']:<6} p50 {figures['p50']} ms   p95 {figures['p95']} ms")
    print(
        f"  acknowledged live memories {report['acknowledged_live']}, uncertain "
        f"{report['uncertain']}, lost {report['lost']}"
    )
    for label, check in report["checks"].items():
        print(f"  {label:<14} {check}")
    print(f"  library errors {report['library_errors']}; foreign errors {report['foreign_errors']}")
    for failure in report["failures"]:
        print(f"  FAILED: {failure}")
    for trace in report["tracebacks"]:
        print(trace)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=30.0, help="load per store kind")
    parser.add_argument("--stores", default="embedded,server", help="embedded, server or both")
    parser.add_argument("--kill", action="store_true", help="SIGKILL one process half-way")
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--fresh", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--kind", help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    parser.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--killed", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker_main(args)
        return 0
    if args.fresh:
        fresh_main(args)
        return 0
    reports = []
    for kind in [k.strip() for k in args.stores.split(",") if k.strip()]:
        with tempfile.TemporaryDirectory(prefix=f"soak-{kind}-") as temporary:
            directory = Path(temporary)
            if kind == "embedded":
                reports.append(run_soak(kind, str(directory / "store"), directory, args))
            elif kind == "server":
                with chroma_server(directory) as url:
                    reports.append(run_soak(kind, url, directory, args))
            else:
                parser.error(f"--stores: expected embedded or server, got {kind!r}")
    if args.json:
        print(json.dumps(reports, indent=1))
    else:
        for report in reports:
            print_report(report)
    return 1 if any(report["failures"] for report in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
