"""Many agents, one memory: load on a shared Chroma server (issue 16, item 2).

Usage::

    python benchmarks/shared_load.py                      # 4 processes x 2 threads, 60 s
    python benchmarks/shared_load.py --seconds 10 --json  # one JSON document on stdout
    python benchmarks/shared_load.py --model default      # the default embedding model
    python benchmarks/shared_load.py --url http://127.0.0.1:8000   # a running server

What it does:

1. Starts ``chroma run`` on 127.0.0.1 (a free port, a temporary data directory), unless
   ``--url`` names a running server.
2. Starts ``--processes`` worker processes. Each opens its own ``HybridMemory(url=...,
   collection=...)`` on one shared collection, shared by its ``--threads`` threads, as an
   agent process would. When every worker is ready (imports done, the model loaded),
   all start at once and run for ``--seconds``: each thread picks one add for two
   searches (seeded: ``--seed``, the process and the thread). An add is ``add`` of one
   memory, one time in ten ``add_many`` of three. A search is three to five words of the
   vocabulary that every memory is written in, or the unique token of a memory this
   process added before (which must come back: read your own writes), or a search
   restricted by a metadata filter to this thread's memories. Every acknowledged memory
   (id, text, unique token) is appended to a file per process; every exception is
   counted by type, the library's own (``HybridMemoryError``) apart from any other.
3. When all workers have stopped writing, each of them checks the store as it now sees
   it (after ``sync()``, the public way to catch up at once; otherwise the background
   check does it within ``sync_interval``), and so does one fresh process opened after
   the load. Each checks that every acknowledged memory is present (``get_many``, same
   text), that ``count()`` (the collection) and a filtered count (the derived keyword
   index) equal the number acknowledged, and that each checked memory is found by keyword
   (a search for its unique token returns it with a ``keyword`` rank) and by vector
   (a search for its own text returns it with a ``vector`` rank). The fresh process
   checks every memory; each worker checks ``--sample`` of them (all: ``--sample 0``).

Prints operations, throughput, search and add latency percentiles, memories lost (must
be 0) and exceptions by type. The cheap embedding (default, ``--model seeded``) gives
each distinct text a seeded random unit vector of 384 dimensions (MiniLM's size), so what
is measured is the store and the server, not a model; ``--model default`` embeds with
all-MiniLM-L6-v2, which on a small machine dominates the cost. Exit status 1 when a
memory was lost, a check failed or a process saw an exception that is not the library's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.seeded_embedding import SeededEmbedding

# What every memory is written in: shared words, so searches match across processes.
_WORDS = """
deploy key rotates server backup night coffee morning alice prefers dark mode meeting budget
journey paris flight hotel invoice customer ticket urgent friday database migration release
notes garden dinner birthday gift allergy peanuts doctor appointment train station password
reset laptop screen monitor printer kitchen recipe tomato basil weekend hiking mountain river
camera photo album music guitar lesson
"""
VOCABULARY = tuple(_WORDS.split())
# No tag is a word of the vocabulary: a search by a memory's own text would match
# tags in it and rank the memories so tagged above the memory itself (the tag leg).
TAGS = ("ops", "ui", "billing", "travel", "health", "family", "food", "work")
DIMENSION = 384
SEEDED_NAME = f"seeded-random-{DIMENSION}"


def open_store(url: str, collection: str, model: str) -> Any:
    from hybrid_memory import HybridMemory

    if model == "default":
        return HybridMemory(url=url, collection=collection)
    return HybridMemory(
        url=url,
        collection=collection,
        embedding=SeededEmbedding(DIMENSION),
        embedding_name=SEEDED_NAME,
    )


def _error_name(error: BaseException) -> str:
    kind = type(error)
    return (
        kind.__qualname__
        if kind.__module__ == "builtins"
        else f"{kind.__module__}.{kind.__qualname__}"
    )


class Worker:
    """One agent process: a store shared by its threads, adding and searching."""

    def __init__(self, memory: Any, process: int, seed: int, acked_file: Path) -> None:
        self.memory = memory
        self.process = process
        self.seed = seed
        self._acked = acked_file.open("a", encoding="utf-8")
        self._lock = threading.Lock()
        self.mine: list[dict[str, str]] = []  # acknowledged memories of this process
        self.add_ms: list[float] = []
        self.add_many_ms: list[float] = []
        self.search_ms: list[float] = []
        self.adds = 0  # add / add_many calls acknowledged
        self.searches = 0
        self.own_write_misses: list[str] = []
        self.errors: Counter[str] = Counter()
        self.foreign_errors: Counter[str] = Counter()
        self.first_foreign: str | None = None

    def _record_error(self, error: Exception) -> None:
        from hybrid_memory import HybridMemoryError

        name = _error_name(error)
        with self._lock:
            if isinstance(error, HybridMemoryError):
                self.errors[name] += 1
            else:
                self.foreign_errors[name] += 1
                if self.first_foreign is None:
                    self.first_foreign = traceback.format_exc()

    def _acknowledge(
        self, items: Sequence[tuple[str, str, str]], elapsed: float, many: bool
    ) -> None:
        with self._lock:
            for memory_id, text, token in items:
                record = {"id": memory_id, "text": text, "token": token}
                self.mine.append(record)
                self._acked.write(json.dumps(record) + "\n")
            self._acked.flush()
            self.adds += 1
            (self.add_many_ms if many else self.add_ms).append(elapsed * 1000)

    def run_thread(self, thread: int, deadline: float) -> None:
        rng = random.Random(f"{self.seed}-{self.process}-{thread}")
        owner = f"p{self.process}t{thread}"
        serial = 0
        while time.monotonic() < deadline:
            try:
                if rng.random() < 1 / 3:
                    count = 3 if rng.random() < 0.1 else 1
                    items: list[dict[str, Any]] = []
                    tokens: list[str] = []
                    for _ in range(count):
                        tokens.append(f"zq{self.process}x{thread}x{serial}")
                        words = " ".join(rng.choices(VOCABULARY, k=rng.randint(5, 9)))
                        items.append(
                            {
                                "text": f"{words} {tokens[-1]}",
                                "tags": rng.sample(TAGS, rng.randint(0, 2)),
                                "metadata": {"owner": owner, "seq": serial},
                            }
                        )
                        serial += 1
                    started = time.perf_counter()
                    if count == 1:
                        ids = [self.memory.add(**items[0])]
                    else:
                        ids = self.memory.add_many(items)
                    elapsed = time.perf_counter() - started
                    acknowledged = [
                        (memory_id, item["text"], token)
                        for memory_id, item, token in zip(ids, items, tokens, strict=True)
                    ]
                    self._acknowledge(acknowledged, elapsed, count > 1)
                else:
                    self._search(rng, owner)
            except Exception as error:  # every exception is counted, by type
                self._record_error(error)

    def _search(self, rng: random.Random, owner: str) -> None:
        kind = rng.random()
        expect: str | None = None
        filter_: dict[str, Any] | None = None
        with self._lock:
            own = rng.choice(self.mine) if self.mine else None
        if kind < 0.25 and own is not None:
            query, expect = own["token"], own["id"]
        else:
            query = " ".join(rng.choices(VOCABULARY, k=rng.randint(3, 5)))
            if kind > 0.85:
                filter_ = {"owner": owner}
        started = time.perf_counter()
        hits = self.memory.search(query, k=10, filter=filter_)
        elapsed = time.perf_counter() - started
        with self._lock:
            self.searches += 1
            self.search_ms.append(elapsed * 1000)
            if expect is not None and expect not in [h.id for h in hits]:
                self.own_write_misses.append(expect)
            if filter_ is not None and any(h.metadata.get("owner") != owner for h in hits):
                self.foreign_errors["LeakedFilter"] += 1

    def close(self) -> None:
        self._acked.close()


def read_acked(directory: Path) -> list[dict[str, str]]:
    records = []
    for path in sorted(directory.glob("acked-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                records.append(json.loads(line))
    return records


def verify(memory: Any, acked: list[dict[str, str]], sample: int, seed: int) -> dict[str, Any]:
    """Check the store as this process sees it against every acknowledged memory."""
    from hybrid_memory import HybridMemoryError, MemoryNotFoundError

    result: dict[str, Any] = {
        "expected": len(acked),
        "missing": [],
        "wrong_text": [],
        "keyword_misses": [],
        "vector_misses": [],
        "errors": {},
    }
    errors: Counter[str] = Counter()
    foreign: Counter[str] = Counter()
    try:
        memory.sync()
        result["count"] = memory.count()
        result["index_count"] = memory.count({"seq": {"$gte": 0}})
        present: dict[str, Any] = {}
        for start in range(0, len(acked), 500):
            batch = [r["id"] for r in acked[start : start + 500]]
            try:
                present.update((m.id, m) for m in memory.get_many(batch))
            except MemoryNotFoundError:
                for memory_id in batch:
                    with contextlib.suppress(MemoryNotFoundError):
                        present[memory_id] = memory.get(memory_id)
        for record in acked:
            found = present.get(record["id"])
            if found is None:
                result["missing"].append(record["id"])
            elif found.text != record["text"]:
                result["wrong_text"].append(record["id"])
        checked = (
            acked
            if sample <= 0 or sample >= len(acked)
            else random.Random(seed).sample(acked, sample)
        )
        for record in checked:
            by_keyword = {h.id: h for h in memory.search(record["token"], k=10)}
            if "keyword" not in getattr(by_keyword.get(record["id"]), "ranks", {}):
                result["keyword_misses"].append(record["id"])
            by_vector = {h.id: h for h in memory.search(record["text"], k=10)}
            if "vector" not in getattr(by_vector.get(record["id"]), "ranks", {}):
                result["vector_misses"].append(record["id"])
        result["checked"] = len(checked)
    except Exception as error:
        (errors if isinstance(error, HybridMemoryError) else foreign)[_error_name(error)] += 1
        result["traceback"] = traceback.format_exc()
    result["errors"] = dict(errors)
    result["foreign_errors"] = dict(foreign)
    return result


# --- the processes -------------------------------------------------------------------------


def worker_main(args: argparse.Namespace) -> None:
    """A worker process: READY, wait for GO, load, DONE, wait for VERIFY, RESULT."""
    directory = Path(args.dir)
    memory = open_store(args.url, args.collection, args.model)
    memory.search("warm up the embedding and the connection")
    worker = Worker(memory, args.index, args.seed, directory / f"acked-{args.index}.jsonl")
    print("READY", flush=True)
    sys.stdin.readline()
    started_at = time.time()
    deadline = time.monotonic() + args.seconds
    threads = [
        threading.Thread(target=worker.run_thread, args=(t, deadline)) for t in range(args.threads)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ended_at = time.time()
    worker.close()
    print("DONE", flush=True)
    sys.stdin.readline()
    acked = read_acked(directory)
    checked = verify(memory, acked, args.sample, args.seed + args.index)
    memory.close()
    report = {
        "process": args.index,
        "started_at": started_at,
        "ended_at": ended_at,
        "adds": worker.adds,
        "memories": len(worker.mine),
        "searches": worker.searches,
        "add_ms": worker.add_ms,
        "add_many_ms": worker.add_many_ms,
        "search_ms": worker.search_ms,
        "own_write_misses": worker.own_write_misses,
        "errors": dict(worker.errors),
        "foreign_errors": dict(worker.foreign_errors),
        "first_foreign": worker.first_foreign,
        "verify": checked,
    }
    print("RESULT " + json.dumps(report), flush=True)


def verify_main(args: argparse.Namespace) -> None:
    memory = open_store(args.url, args.collection, args.model)
    checked = verify(memory, read_acked(Path(args.dir)), args.sample, args.seed)
    memory.close()
    print("RESULT " + json.dumps(checked), flush=True)


class _Child:
    """A child process whose stdout lines are read by a thread (so waits can time out)."""

    def __init__(self, command: list[str], log: Path) -> None:
        self._log = log.open("wb")
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.log = log

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def expect(self, word: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                line = None
                if time.monotonic() < deadline:
                    continue
            if line is None:
                tail = self.log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"a child process ended or hung before {word}:\n{tail}")
            if line.startswith(word):
                return line[len(word) :].strip()

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self._log.close()


@contextlib.contextmanager
def chroma_server(directory: Path) -> Iterator[str]:
    """``chroma run`` on 127.0.0.1 at a free port, its data in ``directory``."""
    import chromadb

    chroma = shutil.which("chroma") or str(Path(sys.executable).parent / "chroma")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    log = (directory / "server.log").open("wb")
    process = subprocess.Popen(
        [
            chroma,
            "run",
            "--path",
            str(directory / "db"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                chromadb.HttpClient(host="127.0.0.1", port=port).heartbeat()
                break
            except Exception:
                if process.poll() is not None or time.monotonic() > deadline:
                    tail = (directory / "server.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(
                        f"chroma run did not start on port {port}:\n{tail}"
                    ) from None
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _percentile(values: Sequence[float], q: int) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return round(values[0], 2)
    return round(statistics.quantiles(values, n=100, method="inclusive")[q - 1], 2)


def run_load(url: str, directory: Path, args: argparse.Namespace) -> dict[str, Any]:
    collection = args.collection or f"load-{uuid.uuid4().hex[:10]}"
    me = str(Path(__file__).resolve())
    common = [
        "--url",
        url,
        "--collection",
        collection,
        "--dir",
        str(directory),
        "--model",
        args.model,
        "--seed",
        str(args.seed),
    ]
    workers = [
        _Child(
            [
                sys.executable,
                me,
                "_worker",
                *common,
                "--index",
                str(i),
                "--threads",
                str(args.threads),
                "--seconds",
                str(args.seconds),
                "--sample",
                str(args.sample),
            ],
            directory / f"worker-{i}.log",
        )
        for i in range(args.processes)
    ]
    try:
        for child in workers:
            child.expect("READY", timeout=300)
        for child in workers:
            child.send("GO")
        for child in workers:
            child.expect("DONE", timeout=args.seconds + 300)
        for child in workers:
            child.send("VERIFY")
        reports = [json.loads(child.expect("RESULT", timeout=1800)) for child in workers]
        fresh = _Child(
            [sys.executable, me, "_verify", *common, "--sample", str(args.fresh_sample)],
            directory / "verify.log",
        )
        try:
            fresh_report = json.loads(fresh.expect("RESULT", timeout=1800))
        finally:
            fresh.stop()
    finally:
        for child in workers:
            child.stop()
    return summarise(reports, fresh_report, args, collection)


def summarise(
    reports: list[dict[str, Any]], fresh: dict[str, Any], args: argparse.Namespace, collection: str
) -> dict[str, Any]:
    wall = max(r["ended_at"] for r in reports) - min(r["started_at"] for r in reports)
    adds = sum(r["adds"] for r in reports)
    searches = sum(r["searches"] for r in reports)
    memories = sum(r["memories"] for r in reports)
    search_ms = [v for r in reports for v in r["search_ms"]]
    add_ms = [v for r in reports for v in r["add_ms"]]
    add_many_ms = [v for r in reports for v in r["add_many_ms"]]
    errors: Counter[str] = Counter()
    foreign: Counter[str] = Counter()
    for r in reports:
        errors.update(r["errors"])
        errors.update(r["verify"]["errors"])
        foreign.update(r["foreign_errors"])
        foreign.update(r["verify"]["foreign_errors"])
    errors.update(fresh["errors"])
    foreign.update(fresh["foreign_errors"])
    checks = [(f"process {r['process']}", r["verify"]) for r in reports] + [
        ("fresh process", fresh)
    ]
    per_process = {}
    for label, check in checks:
        per_process[label] = {
            "count": check.get("count"),
            "index_count": check.get("index_count"),
            "missing": len(check["missing"]),
            "wrong_text": len(check["wrong_text"]),
            "checked": check.get("checked", 0),
            "keyword_misses": len(check["keyword_misses"]),
            "vector_misses": len(check["vector_misses"]),
        }
    lost = max(v["missing"] for v in per_process.values())
    failures = []
    for label, v in per_process.items():
        if v["count"] != memories or v["index_count"] != memories:
            failures.append(
                f"{label}: count {v['count']}, index count {v['index_count']}, "
                f"acknowledged {memories}"
            )
        for key in ("missing", "wrong_text", "keyword_misses", "vector_misses"):
            if v[key]:
                failures.append(f"{label}: {v[key]} {key.replace('_', ' ')}")
    own_misses = sum(len(r["own_write_misses"]) for r in reports)
    if own_misses:
        failures.append(f"{own_misses} searches missed a memory the same process had added")
    if foreign:
        failures.append(f"exceptions that are not the library's: {dict(foreign)}")
    tracebacks = [r["first_foreign"] for r in reports if r["first_foreign"]]
    tracebacks += [c["traceback"] for _, c in checks if c.get("traceback")]
    return {
        "collection": collection,
        "model": "all-MiniLM-L6-v2 (default)" if args.model == "default" else SEEDED_NAME,
        "processes": args.processes,
        "threads": args.threads,
        "seconds": round(wall, 2),
        "seed": args.seed,
        "operations": {"adds": adds, "searches": searches, "memories": memories},
        "throughput": {
            "ops_per_s": round((adds + searches) / wall, 1),
            "adds_per_s": round(adds / wall, 1),
            "memories_per_s": round(memories / wall, 1),
            "searches_per_s": round(searches / wall, 1),
        },
        "search_ms": {
            "p50": _percentile(search_ms, 50),
            "p95": _percentile(search_ms, 95),
            "p99": _percentile(search_ms, 99),
        },
        "add_ms": {"p50": _percentile(add_ms, 50), "p95": _percentile(add_ms, 95)},
        "add_many_ms": {"calls": len(add_many_ms), "p50": _percentile(add_many_ms, 50)},
        "memories_lost": lost,
        "own_write_misses": own_misses,
        "checks": per_process,
        "exceptions": {"library": dict(errors), "other": dict(foreign)},
        "failures": failures,
        "tracebacks": tracebacks[:3],
    }


def print_report(report: dict[str, Any]) -> None:
    ops, tp = report["operations"], report["throughput"]
    print(
        f"shared Chroma server: {report['processes']} processes x {report['threads']} threads, "
        f"{report['seconds']} s, embedding {report['model']}, seed {report['seed']}"
    )
    print(
        f"operations: {ops['adds']} adds ({ops['memories']} memories), {ops['searches']} searches"
    )
    print(
        f"throughput: {tp['ops_per_s']} ops/s ({tp['adds_per_s']} adds/s, "
        f"{tp['memories_per_s']} memories/s, {tp['searches_per_s']} searches/s)"
    )
    s, a = report["search_ms"], report["add_ms"]
    print(f"search latency: p50 {s['p50']} ms, p95 {s['p95']} ms, p99 {s['p99']} ms")
    print(
        f"add latency: p50 {a['p50']} ms, p95 {a['p95']} ms; add_many of 3: "
        f"{report['add_many_ms']['calls']} calls, p50 {report['add_many_ms']['p50']} ms"
    )
    print("checks (count = collection, index count = derived keyword index):")
    for label, v in report["checks"].items():
        print(
            f"  {label}: count {v['count']}, index count {v['index_count']}, missing "
            f"{v['missing']}, wrong text {v['wrong_text']}, checked {v['checked']} by keyword "
            f"({v['keyword_misses']} misses) and vector ({v['vector_misses']} misses)"
        )
    print(
        f"memories lost: {report['memories_lost']}; own-write misses: {report['own_write_misses']}"
    )
    print(
        f"exceptions: library {report['exceptions']['library'] or 'none'}, "
        f"other {report['exceptions']['other'] or 'none'}"
    )
    for failure in report["failures"]:
        print(f"FAILED: {failure}")
    for trace in report["tracebacks"]:
        print(trace)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "role",
        nargs="?",
        default="run",
        choices=["run", "_worker", "_verify"],
        help=argparse.SUPPRESS,
    )
    parser.add_argument("--url", help="a running Chroma server (default: start one)")
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2, help="threads per process")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the load runs")
    parser.add_argument("--model", choices=["seeded", "default"], default="seeded")
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument(
        "--sample",
        type=int,
        default=200,
        help="memories each worker checks by keyword and vector (0: all)",
    )
    parser.add_argument(
        "--fresh-sample",
        type=int,
        default=0,
        help="memories the fresh process checks by keyword and vector (0: all)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--collection", help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    parser.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role == "_worker":
        worker_main(args)
        return 0
    if args.role == "_verify":
        verify_main(args)
        return 0
    with tempfile.TemporaryDirectory(prefix="hm-load-") as temp:
        directory = Path(temp)
        if args.url:
            report = run_load(args.url, directory, args)
        else:
            with chroma_server(directory) as url:
                report = run_load(url, directory, args)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
