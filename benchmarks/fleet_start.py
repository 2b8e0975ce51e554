"""A fleet that starts fast: a new process's open and first search on a server store of N
memories, cold (no keyword-index cache on the machine) and warm (issue 21, item 5).

Usage::

    nice python benchmarks/fleet_start.py --n 50000 --data /tmp/fleet   # fills once, then times
    python benchmarks/fleet_start.py --n 2000 --json                    # one JSON document
    python benchmarks/fleet_start.py --url http://127.0.0.1:8000 --n 50000

What it does:

1. Starts ``chroma run`` with its data in ``--data`` (kept: a second run reuses the filled
   collection; default a temporary directory), unless ``--url`` names a running server.
2. Fills the collection ``--collection`` up to ``--n`` memories with ``add_many`` (batches
   of ``--batch``), embedded by the benchmarks' cheap seeded embedding (what is timed is
   the store and the server, not a model); the fill's time is reported.
3. Starts fresh processes one after the other, each opening ``HybridMemory(url=...)``
   with the keyword-index cache in a directory of its own run (``cache_dir``) and timing,
   after its imports and a bare Chroma client's setup (timed apart: Chroma's own lazy
   imports, paid by any Chroma user): the open, the first search (a keyword that one
   memory holds, plus common words), whether that search answered in ``fallback_mode``
   (the keyword index still warming) and when the keyword leg first answered. The runs:

   - ``cold``: an empty cache directory, as the first process on a new machine;
   - ``warm``: the same directory again, as every later process;
   - ``warm_after_changes``: the same directory after another process added, updated and
     deleted ``--changes`` memories each while it was closed (it catches up those only).

Peak resident memory of each process is reported (``ru_maxrss``). Nothing is asserted on
timing; exit status 1 when a search missed the memory it must find.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.shared_load import SEEDED_NAME, VOCABULARY, SeededEmbedding, chroma_server

TAGS = ("ops", "ui", "billing", "travel", "health", "family", "food", "work")


def memory_item(i: int) -> dict[str, Any]:
    """The ``i``-th memory of the benchmark store: common words and one unique token."""
    words = " ".join(VOCABULARY[(i * 7 + j * 13) % len(VOCABULARY)] for j in range(8))
    return {
        "id": f"m{i}",
        "text": f"{words} zq{i}",
        "tags": [TAGS[i % len(TAGS)]],
        "metadata": {"owner": f"u{i % 50}", "seq": i},
    }


def open_store(url: str, collection: str, cache_dir: str | None = None) -> Any:
    from hybrid_memory import HybridMemory

    extra = {} if cache_dir is None else {"cache_dir": cache_dir}
    return HybridMemory(
        url=url,
        collection=collection,
        embedding=SeededEmbedding(),
        embedding_name=SEEDED_NAME,
        **extra,
    )


def fill(url: str, collection: str, n: int, batch: int, cache_dir: str) -> dict[str, Any]:
    """Add the memories ``m0``..``m<n-1>`` the collection lacks; how long it took."""
    from urllib.parse import urlparse

    import chromadb

    memory = open_store(url, collection, cache_dir)
    parsed = urlparse(url)
    raw = chromadb.HttpClient(host=parsed.hostname, port=parsed.port).get_collection(collection)
    try:
        have = memory.count()
        started = time.perf_counter()
        for start in range(0, n, batch):
            ids = [f"m{i}" for i in range(start, min(n, start + batch))]
            present = set(raw.get(ids=ids, include=[])["ids"])
            missing = [int(i[1:]) for i in ids if i not in present]
            if missing:
                memory.add_many([memory_item(i) for i in missing], upsert=True)
                print(f"  filled {start + len(ids)}/{n}", file=sys.stderr, flush=True)
        return {"had": have, "count": memory.count(), "seconds": time.perf_counter() - started}
    finally:
        memory.close()


def change(url: str, collection: str, n: int, changes: int, cache_dir: str) -> dict[str, Any]:
    """Another process adds, updates and deletes ``changes`` memories each; which."""
    memory = open_store(url, collection, cache_dir)
    try:
        stamp = int(time.time())
        added = memory.add_many(
            [{"text": f"fresh memory zqnew{stamp}x{j} garden"} for j in range(changes)]
        )
        updated = [f"m{i}" for i in range(1, 1 + changes)]
        for memory_id in updated:
            memory.update(memory_id, text=f"rewritten zqupd{stamp}{memory_id} river")
        deleted = [f"m{n - 1 - j}" for j in range(changes)]
        memory.delete(deleted)
        return {"added": added, "updated": updated, "deleted": deleted, "stamp": stamp}
    finally:
        memory.close()


def child(args: argparse.Namespace) -> None:
    """One new process: open, first search, until the keyword leg answers."""
    started = time.perf_counter()
    from urllib.parse import urlparse

    import chromadb

    import hybrid_memory  # noqa: F401 - the imports are timed apart from the open

    # A bare Chroma client first: its setup (the client's own lazy imports, a second or
    # more here) is what any Chroma user pays, timed apart from the store's open.
    client_started = time.perf_counter()
    parsed = urlparse(args.url)
    chromadb.HttpClient(host=parsed.hostname, port=parsed.port).heartbeat()
    imported = time.perf_counter()
    memory = open_store(args.url, args.collection, args.cache_dir)
    opened = time.perf_counter()
    target = args.target
    result = memory.search(f"{target} garden river", k=5)
    first = time.perf_counter()
    found_first = any(h.id == args.target_id for h in result)
    keyword_ready = None if result.fallback_mode else first
    while keyword_ready is None and time.perf_counter() - first < 600:
        time.sleep(0.05)
        probe = memory.search(f"{target} garden river", k=5)
        if not probe.fallback_mode:
            keyword_ready = time.perf_counter()
    again = memory.search(f"{target} garden river", k=5)
    ranks = next((h.ranks for h in again if h.id == args.target_id), {})
    checks = {}
    if args.expect_deleted:
        checks["deleted_absent"] = all(
            h.id not in args.expect_deleted.split(",") for h in memory.search("zq", k=50)
        )
    if args.expect_updated:
        word, memory_id = args.expect_updated.split(":")
        hits = memory.search(word, k=5)
        checks["updated_found"] = any(h.id == memory_id and "keyword" in h.ranks for h in hits)
    memory.close()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        "RESULT "
        + json.dumps(
            {
                "import_s": round(client_started - started, 3),
                "chroma_client_s": round(imported - client_started, 3),
                "open_s": round(opened - imported, 3),
                "first_search_s": round(first - opened, 3),
                "open_to_first_result_s": round(first - imported, 3),
                "first_fallback_mode": result.fallback_mode,
                "first_fallback_reason": result.fallback_reason,
                "found_by_first_search": found_first,
                "keyword_ready_after_open_s": round(keyword_ready - imported, 3)
                if keyword_ready
                else None,
                "later_search_ranks": dict(ranks),
                "checks": checks,
                "peak_rss_mb": round(rss_mb, 1),
            }
        ),
        flush=True,
    )


def lag_writer(args: argparse.Namespace) -> None:
    """Adds one memory every ``1 / --rate`` s for ``--lag`` s; prints each id and when
    its add returned."""
    memory = open_store(args.url, args.collection, args.cache_dir)
    print("READY", flush=True)
    sys.stdin.readline()  # all start together
    deadline = time.monotonic() + args.lag
    serial = 0
    while time.monotonic() < deadline:
        started = time.monotonic()
        memory_id = memory.add(
            f"lag probe {args.run} {args.writer} {serial} garden",
            metadata={"lag_run": args.run},
        )
        print(f"ACK {memory_id} {time.time():.4f}", flush=True)
        serial += 1
        time.sleep(max(0.0, 1 / args.rate - (time.monotonic() - started)))
    memory.close()
    print("DONE", flush=True)


def lag_reader(args: argparse.Namespace) -> None:
    """Watches its keyword index (``list_memories`` with a filter answers from it) for
    the lag run's memories, with the default ``sync_interval``; prints when each first
    showed, then its peak resident memory."""
    memory = open_store(args.url, args.collection, args.cache_dir)
    memory.search("garden", k=3)
    print("READY", flush=True)
    sys.stdin.readline()
    seen: set[str] = set()
    deadline = time.monotonic() + args.lag + 15
    while time.monotonic() < deadline:
        now = time.time()
        for m in memory.list_memories({"lag_run": args.run}):
            if m.id not in seen:
                seen.add(m.id)
                print(f"SEEN {m.id} {now:.4f}", flush=True)
        memory.search("lag probe garden", k=5)  # a reader also searches
        time.sleep(0.02)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    memory.close()
    print(f"RSS {rss_mb:.1f}", flush=True)


def copy_cache(source: str, target: str) -> None:
    """A consistent copy of every keyword-index cache file under ``source``."""
    import sqlite3

    Path(target, "indexes").mkdir(parents=True, exist_ok=True)
    for file in Path(source, "indexes").glob("*.sqlite3"):
        with (
            sqlite3.connect(file) as src,
            sqlite3.connect(Path(target, "indexes", file.name)) as dst,
        ):
            src.backup(dst)


def measure_lag(url: str, collection: str, caches: str, args: argparse.Namespace) -> dict:
    """Writers add at a steady rate while readers (each its own process, sharing one
    cache file) watch for the new memories: the lag from an add's return to the
    memory's showing in another process's keyword index."""
    run = f"lag{int(time.time())}"
    common = [sys.executable, __file__, "--url", url, "--collection", collection]
    common += ["--lag", str(args.lag), "--rate", str(args.rate), "--run", run]
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    children = []
    for w in range(args.writers):
        # Each writer stands for another machine: a cache of its own, copied from the
        # readers' warm one (a prebuilt cache), so that what is timed is the sync.
        copy_cache(caches, f"{caches}/w{w}")
        command = [*common, "--lag-role", "writer", "--writer", str(w)]
        children.append(("writer", [*command, "--cache-dir", f"{caches}/w{w}"]))
    for _ in range(args.readers):
        children.append(("reader", [*common, "--lag-role", "reader", "--cache-dir", caches]))
    procs = [
        (
            role,
            subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
            ),
        )
        for role, cmd in children
    ]
    for _, proc in procs:
        assert proc.stdout is not None
        while not proc.stdout.readline().startswith("READY"):
            pass
    for _, proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    acks: dict[str, float] = {}
    seen: list[dict[str, float]] = []
    rss: list[float] = []
    for role, proc in procs:
        out, _ = proc.communicate(timeout=args.lag + 120)
        mine: dict[str, float] = {}
        for line in out.splitlines():
            parts = line.split()
            if parts and parts[0] == "ACK":
                acks[parts[1]] = float(parts[2])
            elif parts and parts[0] == "SEEN":
                mine[parts[1]] = float(parts[2])
            elif parts and parts[0] == "RSS":
                rss.append(float(parts[1]))
        if role == "reader":
            seen.append(mine)
    lags = sorted(
        max(0.0, reader[i] - t) for reader in seen for i, t in acks.items() if i in reader
    )
    missed = sum(1 for reader in seen for i in acks if i not in reader)

    def pct(q: float) -> float | None:
        return round(lags[min(len(lags) - 1, int(q * len(lags)))], 3) if lags else None

    cleanup = open_store(url, collection, f"{caches}/w0")
    cleanup.delete(filter={"lag_run": run})
    cleanup.close()
    return {
        "writers": args.writers,
        "rate_per_writer": args.rate,
        "readers": args.readers,
        "seconds": args.lag,
        "adds": len(acks),
        "lag_p50_s": pct(0.5),
        "lag_p95_s": pct(0.95),
        "lag_max_s": lags[-1] if lags else None,
        "missed": missed,
        "reader_peak_rss_mb": rss,
    }


def run_child(url: str, collection: str, cache_dir: str, target: int, **expect: str) -> Any:
    command = [
        sys.executable,
        __file__,
        "--child",
        "--url",
        url,
        "--collection",
        collection,
        "--cache-dir",
        cache_dir,
        "--target",
        f"zq{target}",
        "--target-id",
        f"m{target}",
    ]
    for key, value in expect.items():
        command += [f"--{key.replace('_', '-')}", value]
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1200)
    if done.returncode != 0:
        raise RuntimeError(f"child failed:\n{done.stderr[-3000:]}")
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


@contextlib.contextmanager
def server(args: argparse.Namespace) -> Iterator[str]:
    if args.url:
        yield args.url
        return
    if args.data:
        directory = Path(args.data)
        directory.mkdir(parents=True, exist_ok=True)
        with chroma_server(directory) as url:
            yield url
        return
    with tempfile.TemporaryDirectory(prefix="fleet-start-") as tmp, chroma_server(Path(tmp)) as url:
        yield url


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=50_000)
    parser.add_argument("--url")
    parser.add_argument("--data", help="the server's data directory, kept between runs")
    parser.add_argument("--collection", default="fleet_start")
    parser.add_argument("--batch", type=int, default=5000)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--lag", type=float, default=0, help="also measure sync lag under writes, this long (s)"
    )
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--readers", type=int, default=2)
    parser.add_argument("--rate", type=float, default=10.0, help="adds per second per writer")
    parser.add_argument("--lag-role", choices=["writer", "reader"], help=argparse.SUPPRESS)
    parser.add_argument("--run", help=argparse.SUPPRESS)
    parser.add_argument("--writer", help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cache-dir", help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    parser.add_argument("--target-id", help=argparse.SUPPRESS)
    parser.add_argument("--expect-deleted", help=argparse.SUPPRESS)
    parser.add_argument("--expect-updated", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return 0
    if args.lag_role:
        (lag_writer if args.lag_role == "writer" else lag_reader)(args)
        return 0
    report: dict[str, Any] = {"n": args.n}
    with server(args) as url, tempfile.TemporaryDirectory(prefix="fleet-caches-") as caches:
        report["fill"] = fill(url, args.collection, args.n, args.batch, f"{caches}/filler")
        fleet_cache = f"{caches}/fleet"
        target = args.n // 2
        report["cold"] = run_child(url, args.collection, fleet_cache, target)
        report["warm"] = run_child(url, args.collection, fleet_cache, target)
        if args.lag:
            report["lag"] = measure_lag(url, args.collection, fleet_cache, args)
        changed = change(url, args.collection, args.n, args.changes, f"{caches}/other")
        report["changes"] = {k: len(v) for k, v in changed.items() if isinstance(v, list)}
        try:
            report["warm_after_changes"] = run_child(
                url,
                args.collection,
                fleet_cache,
                target,
                expect_deleted=",".join(changed["deleted"]),
                expect_updated=f"zqupd{changed['stamp']}m1:m1",
            )
        finally:
            # Put the store back as it was, for the next run on the same data.
            restore = open_store(url, args.collection, f"{caches}/other")
            restore.delete(changed["added"])
            changed_back = [*range(1, 1 + args.changes), *(int(i[1:]) for i in changed["deleted"])]
            restore.add_many([memory_item(i) for i in changed_back], upsert=True)
            restore.close()
    ok = all(
        report[run]["found_by_first_search"] or report[run]["first_fallback_mode"]
        for run in ("cold", "warm", "warm_after_changes")
    ) and all(report["warm_after_changes"]["checks"].values())
    report["ok"] = ok
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"store of {args.n} memories; fill took {report['fill']['seconds']:.1f} s")
        for run in ("cold", "warm", "warm_after_changes"):
            r = report[run]
            print(
                f"{run:>20}: Chroma client {r['chroma_client_s']:.2f} s, "
                f"open {r['open_s']:.2f} s, first search {r['first_search_s']:.2f} s "
                f"(fallback_mode={r['first_fallback_mode']}), keyword leg ready "
                f"{r['keyword_ready_after_open_s']} s after imports, peak RSS {r['peak_rss_mb']} MB"
            )
        print(f"checks after changes: {report['warm_after_changes']['checks']}; ok={ok}")
        if "lag" in report:
            print(f"sync lag under writes: {json.dumps(report['lag'])}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
