"""Checked histories (issue 45): processes x threads add, update, delete and search one
store while processes are killed, the owner is stopped and the server restarts; every
operation's call and return is recorded with what it saw, and the whole history is checked.

Usage::

    python benchmarks/history_check.py                      # both store kinds, 60 s each
    python benchmarks/history_check.py --seconds 20 --stores embedded --processes 3

What it does, for each store kind (``embedded``: ``HybridMemory(path=DIR)``, shared through
the path's owner; ``server``: ``HybridMemory(url=...)`` on a ``chroma run`` it starts):

1. Starts ``--processes`` workers with ``--threads`` threads each. Every thread works in
   one of two namespaces of the store (``alpha``, ``beta``), chosen per operation: 35 % add
   (a memory whose text carries its namespace, a unique token and a version), 15 % update
   of one of its own memories (version + 1), 10 % delete of one, 20 % search for the token
   of one of its own memories, 20 % search for the token of another process's memory (read
   from that process's history file). Each write is recorded when called and when it
   returned (or failed); each search when it returned, with the ids, namespaces and
   versions it saw. Times are the machine's wall clock (all processes share it).
2. Faults, spread over the run: ``kill -9`` of one process (on the embedded path, the
   owner) which is started again; SIGSTOP of the owner of the embedded path for a few
   seconds, then SIGCONT (the others' calls fail with the deadline error, never hang);
   a restart of the Chroma server (server store).
3. A fresh process reads the final state (every memory of each namespace, each found by
   its token on the keyword leg and by its text on the vector leg).

The checks, over the whole history (:func:`check`):

* **lost**: a memory whose add was acknowledged, with no delete called, is in the final
  state with the version of its last acknowledged write or of a later write whose outcome
  is unknown (it failed or its process was killed: it may or may not have been applied);
* **resurrected**: a memory whose delete was acknowledged is not in the final state, and
  no search called after the delete returned (by the deleting process) or after the
  delete returned plus the visibility bound (by any process) sees it;
* **own writes**: a search by the process that wrote a memory, called after the write
  returned, sees it with that version or a later one (unless a delete of it was called);
* **others' writes**: a search by another process called later than the write's return
  plus the visibility bound sees it likewise: two sync intervals in force at the search
  (``--sync-interval``, or 20 times the store's last check when longer: the documented
  back-off of the periodic check) plus ``--slack``;
* **namespaces**: a search never sees a memory of the other namespace, nor one nobody
  wrote;
* **legs**: in the final state every memory is found by its token (keyword leg) and by
  its text (vector leg).

Prints the operations checked, the errors by type (a call that failed is not an anomaly:
the library's error within the deadline is the documented outcome) and the anomalies by
kind, with up to five examples each; exit status 1 when any anomaly was found.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

NAMESPACES = ("alpha", "beta")
EMBEDDING_NAME = "seeded-64"
# A thread pauses this long after a call failed (the server restarting, the owner
# stopped), rather than failing call after call.
FAILURE_PAUSE = 0.2
TEXT = re.compile(r"^(?P<ns>\w+) note (?P<token>zq\w+) v(?P<version>\d+) ")


def memory_text(namespace: str, token: str, version: int) -> str:
    return f"{namespace} note {token} v{version} written under faults"


def parse_text(text: str) -> tuple[str, str, int] | None:
    found = TEXT.match(text)
    if found is None:
        return None
    return found["ns"], found["token"], int(found["version"])


# --- a worker process ---------------------------------------------------------------------


class History:
    """One process's history file: a JSON line per record, flushed at once."""

    def __init__(self, path: Path) -> None:
        self._out = path.open("a")
        self._lock = threading.Lock()

    def record(self, **entry: Any) -> None:
        line = json.dumps(entry)
        with self._lock:
            self._out.write(line + "\n")
            self._out.flush()


def foreign_tokens(directory: Path, me: int) -> list[tuple[str, str]]:
    """(namespace, token) of memories other processes acknowledged, from their files."""
    found = []
    for path in directory.glob("history-*.jsonl"):
        if path.name.startswith(f"history-{me}-"):
            continue
        with contextlib.suppress(OSError):
            for line in path.read_text().splitlines()[-400:]:
                with contextlib.suppress(ValueError):
                    entry = json.loads(line)
                    if entry.get("kind") == "ok" and entry.get("op") == "add":
                        found.append((entry["ns"], entry["token"]))
    return found


def worker_main(args: argparse.Namespace) -> None:
    from benchmarks.seeded_embedding import SeededEmbedding
    from hybrid_memory import HybridMemory

    directory = Path(args.directory)
    me = args.process
    place = {"path": args.where} if args.kind == "embedded" else {"url": args.where}
    if args.kind == "server":
        place["cache_dir"] = str(directory / f"cache-{me}")
    store = HybridMemory(
        **place,
        collection="history",
        embedding=SeededEmbedding(),
        embedding_name=EMBEDDING_NAME,
        sync_interval=args.sync_interval,
        request_timeout=args.request_timeout,
    )
    views = {name: store.namespace(name) for name in NAMESPACES}
    history = History(directory / f"history-{me}-{os.getpid()}.jsonl")
    print("READY", flush=True)
    sys.stdin.readline()  # all processes start together
    deadline = time.monotonic() + args.seconds
    threads = [
        threading.Thread(target=run_thread, args=(views, history, me, t, deadline, args))
        for t in range(args.threads)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    store.close()
    print("DONE", flush=True)


def run_thread(
    views: dict[str, Any],
    history: History,
    me: int,
    thread: int,
    deadline: float,
    args: argparse.Namespace,
) -> None:
    rng = random.Random(f"{args.seed}-{me}-{os.getpid()}-{thread}")
    mine: dict[str, tuple[str, str, int]] = {}  # id -> (namespace, token, version)
    serial = 0
    foreign: list[tuple[str, str]] = []
    foreign_read = 0.0
    while time.monotonic() < deadline:
        roll = rng.random()
        common = {"p": me, "pid": os.getpid(), "t": thread}
        if roll < 0.35 or not mine:
            ns = rng.choice(NAMESPACES)
            token = f"zqp{me}q{os.getpid()}t{thread}n{serial}"
            serial += 1
            text = memory_text(ns, token, 0)
            call = partial(views[ns].add, text)
            write(history, common, "add", ns, token, 0, None, call, mine)
        elif roll < 0.50:
            memory_id = rng.choice(list(mine))
            ns, token, version = mine[memory_id]
            text = memory_text(ns, token, version + 1)
            write(
                history,
                common,
                "update",
                ns,
                token,
                version + 1,
                memory_id,
                partial(views[ns].update, memory_id, text=text),
                mine,
            )
        elif roll < 0.60:
            memory_id = rng.choice(list(mine))
            ns, token, version = mine[memory_id]
            write(
                history,
                common,
                "delete",
                ns,
                token,
                version,
                memory_id,
                partial(views[ns].delete, [memory_id]),
                mine,
            )
        else:
            if roll < 0.80:
                ns, token, _ = mine[rng.choice(list(mine))]
            else:
                if time.monotonic() - foreign_read > 2.0:
                    foreign, foreign_read = (
                        foreign_tokens(Path(args.directory), me),
                        time.monotonic(),
                    )
                if not foreign:
                    continue
                ns, token = rng.choice(foreign)
            search(history, common, views, ns, token, args.sync_interval)


def write(
    history: History,
    common: dict[str, Any],
    op: str,
    ns: str,
    token: str,
    version: int,
    memory_id: str | None,
    call: Any,
    mine: dict[str, tuple[str, str, int]],
) -> None:
    called = time.time()
    fields = dict(op=op, ns=ns, token=token, v=version, at=called, **common)
    history.record(kind="call", id=memory_id, **fields)
    try:
        got = call()
    except Exception as error:
        history.record(
            kind="fail",
            id=memory_id,
            done=time.time(),
            error=type(error).__name__,
            message=str(error)[:300],
            **fields,
        )
        if op == "delete" and memory_id is not None:
            mine.pop(memory_id, None)  # its fate is unknown: left alone from now on
        time.sleep(FAILURE_PAUSE)
        return
    done = time.time()
    if op == "add":
        memory_id = got
    history.record(kind="ok", id=memory_id, done=done, **fields)
    assert memory_id is not None
    if op == "delete":
        mine.pop(memory_id, None)
    else:
        mine[memory_id] = (ns, token, version)


def search(
    history: History,
    common: dict[str, Any],
    views: dict[str, Any],
    ns: str,
    token: str,
    interval: float,
) -> None:
    """One search, recorded with the sync interval in force: ``sync_interval``, or 20
    times as long as the store's last check took when that is longer (the documented
    back-off of the periodic check, which a loaded machine or a busy server lengthens)."""
    from hybrid_memory.testing import last_check_seconds

    checked = last_check_seconds(views[ns])  # the store's own figure
    called = time.time()
    try:
        hits = views[ns].search(token, k=5)
    except Exception as error:
        history.record(
            kind="fail",
            op="search",
            ns=ns,
            token=token,
            at=called,
            done=time.time(),
            error=type(error).__name__,
            message=str(error)[:300],
            **common,
        )
        time.sleep(FAILURE_PAUSE)
        return
    seen = [[h.id, h.text] for h in hits]
    lag = max(interval, 20 * checked)
    history.record(
        kind="ok",
        op="search",
        ns=ns,
        token=token,
        at=called,
        done=time.time(),
        seen=seen,
        lag=lag,
        **common,
    )


# --- the checker ----------------------------------------------------------------------------


@dataclass
class Memory:
    """What the history says of one memory (by id)."""

    ns: str
    token: str
    writer: int  # the process number that added it (its threads alone write it)
    writes: list[dict[str, Any]] = field(default_factory=list)  # ok / fail / unfinished


def check(
    records: list[dict[str, Any]],
    final: dict[str, dict[str, Any]],
    slack: float,
) -> dict[str, Any]:
    """Check a history: ``records`` (every process's), ``final`` (namespace -> {id: text}
    plus the legs' findings under ``"_legs"``), ``slack`` (seconds added to the bound
    after which another process's write must show: two sync intervals in force at the
    search, see :func:`search`). Returns the figures and the anomalies."""
    anomalies: dict[str, list[str]] = defaultdict(list)

    def within(search: dict[str, Any]) -> float:
        return 2 * search.get("lag", 0.0) + slack

    calls = {(r["pid"], r["t"], r["at"], r["op"]): r for r in records if r["kind"] == "call"}
    finished = {(r["pid"], r["t"], r["at"], r["op"]) for r in records if r["kind"] != "call"}
    memories: dict[str, Memory] = {}
    by_token: dict[str, str] = {}
    writes = [r for r in records if r["op"] != "search" and r["kind"] != "call"]
    unfinished = [r | {"kind": "unknown"} for k, r in calls.items() if k not in finished]
    for r in sorted(writes + unfinished, key=lambda r: r["at"]):
        if r["op"] == "add" and r["kind"] == "ok":
            memories[r["id"]] = Memory(r["ns"], r["token"], r["p"])
            by_token[r["token"]] = r["id"]
    for r in writes + unfinished:
        memory_id = r.get("id") or by_token.get(r["token"])
        if memory_id in memories:
            memories[memory_id].writes.append(r)
    tokens_written = {r["token"]: r for r in records if r["op"] == "add"}

    # Final state: nothing acknowledged lost, nothing deleted back.
    for memory_id, m in memories.items():
        ws = sorted(m.writes, key=lambda r: r["at"])
        deletes = [w for w in ws if w["op"] == "delete"]
        present = final[m.ns].get(memory_id)
        if any(w["kind"] == "ok" for w in deletes):
            if present is not None:
                anomalies["resurrected"].append(f"{memory_id} ({m.token}) deleted, still stored")
            continue
        if deletes:  # a delete whose outcome is unknown: either state is right
            continue
        acked = [w for w in ws if w["kind"] == "ok"]
        last = max(acked, key=lambda w: w["done"])
        allowed = {last["v"]} | {w["v"] for w in ws if w["kind"] != "ok" and w["at"] >= last["at"]}
        if present is None:
            anomalies["lost"].append(f"{memory_id} ({m.token}) acknowledged, not stored")
            continue
        parsed = parse_text(present)
        if parsed is None or parsed[2] not in allowed:
            anomalies["lost"].append(
                f"{memory_id} ({m.token}) stored as {present!r}, expected v{sorted(allowed)}"
            )
    for ns in NAMESPACES:
        for memory_id, text in final[ns].items():
            m = memories.get(memory_id)
            if m is None:
                parsed = parse_text(text)
                token = parsed[1] if parsed else None
                if token not in tokens_written:
                    anomalies["phantom"].append(f"{memory_id} {text!r} stored, never written")
            elif m.ns != ns:
                anomalies["namespace"].append(f"{memory_id} of {m.ns} stored in {ns}")
    for problem in final.get("_legs", {}).get("misses", []):
        anomalies["legs"].append(problem)

    # Every search: namespaces, deleted memories, own writes at once, others' within bound.
    searches = [r for r in records if r["op"] == "search" and r["kind"] == "ok"]
    for s in searches:
        seen_ids = {memory_id: text for memory_id, text in s["seen"]}
        for memory_id, text in seen_ids.items():
            parsed = parse_text(text)
            if parsed is None or parsed[1] not in tokens_written:
                anomalies["phantom"].append(f"search {s['token']} saw {text!r}, never written")
                continue
            if parsed[0] != s["ns"]:
                anomalies["namespace"].append(
                    f"a search of {s['ns']} saw {memory_id} of {parsed[0]}"
                )
            m = memories.get(memory_id)
            if m is None:
                continue
            for w in m.writes:
                if w["op"] == "delete" and w["kind"] == "ok":
                    bound = w["done"] if s["pid"] == w["pid"] else w["done"] + within(s)
                    if s["at"] > bound:
                        anomalies["resurrected"].append(
                            f"search by p{s['p']} at +{s['at'] - w['done']:.2f} s after the "
                            f"delete of {memory_id} saw it"
                        )
        memory_id = by_token.get(s["token"])
        m = memories.get(memory_id) if memory_id else None
        if m is None or m.ns != s["ns"]:
            continue
        # The latest write of this memory that returned before the search was called,
        # within the bound for another process's, at once for the writer's own.
        own = s["pid"] in {w["pid"] for w in m.writes if w["op"] == "add"}
        bound = 0.0 if own else within(s)
        if any(w["op"] == "delete" and w["at"] < s["done"] for w in m.writes):
            continue  # a delete was under way: absent or present are both right
        before = [w for w in m.writes if w["kind"] == "ok" and w["done"] + bound < s["at"]]
        if not before:
            continue
        latest = max(before, key=lambda w: w["done"])
        expected = latest["v"]
        got = seen_ids.get(memory_id)
        version = parse_text(got)[2] if got and parse_text(got) else None
        if version is None:
            kind = "own write unseen" if own else "others' write unseen"
            anomalies[kind].append(
                f"search by p{s['p']} for {s['token']} at +{s['at'] - latest['done']:.2f} s "
                f"after v{expected} returned (bound {bound:.1f} s): not seen"
            )
        elif version < expected:
            kind = "own write stale" if own else "others' write stale"
            anomalies[kind].append(
                f"search by p{s['p']} for {s['token']} saw v{version} at "
                f"+{s['at'] - latest['done']:.2f} s after v{expected} returned "
                f"(bound {bound:.1f} s)"
            )
    errors = Counter(f"{r['error']}: {r['message'][:60]}" for r in records if r["kind"] == "fail")
    ops = Counter(r["op"] for r in records if r["kind"] in ("ok", "fail"))
    return {
        "operations": sum(ops.values()) + len(unfinished),
        "by_op": dict(ops),
        "unfinished": len(unfinished),
        "errors": dict(errors.most_common(4)),
        "failed": sum(errors.values()),
        "memories": len(memories),
        "anomalies": {k: len(v) for k, v in anomalies.items()},
        "examples": {k: v[:5] for k, v in anomalies.items()},
    }


# --- running a store kind ---------------------------------------------------------------------


class Server:
    """``chroma run`` on 127.0.0.1, stopped and started again on the same port and data."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        import chromadb

        chroma = shutil.which("chroma") or str(Path(sys.executable).parent / "chroma")
        with (self.directory / "server.log").open("ab") as log:
            command = [chroma, "run", "--path", str(self.directory / "db"), "--host"]
            command += ["127.0.0.1", "--port", str(self.port)]
            self.process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
            )
        deadline = time.monotonic() + 60
        while True:
            try:
                chromadb.HttpClient(host="127.0.0.1", port=self.port).heartbeat()
                return
            except Exception:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"chroma run did not start on {self.url}") from None
                time.sleep(0.2)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


@contextlib.contextmanager
def started_server(directory: Path) -> Iterator[Server]:
    server = Server(directory)
    server.start()
    try:
        yield server
    finally:
        server.stop()


class Worker:
    """A worker process, started and waited for."""

    def __init__(self, number: int, kind: str, where: str, args: argparse.Namespace) -> None:
        self.number = number
        command = [sys.executable, str(Path(__file__).resolve()), "--worker"]
        command += ["--kind", kind, "--where", where, "--process", str(number)]
        command += ["--directory", args.directory, "--seconds", str(args.seconds)]
        command += ["--threads", str(args.threads), "--seed", str(args.seed)]
        command += ["--sync-interval", str(args.sync_interval)]
        command += ["--request-timeout", str(args.request_timeout)]
        self.log = (Path(args.directory) / f"worker-{number}-{time.time_ns()}.log").open("wb")
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
        )

    def wait_ready(self, timeout: float = 180) -> None:
        assert self.process.stdout is not None
        line = _read_line(self.process.stdout, timeout)
        if line.strip() != b"READY":
            raise RuntimeError(f"worker {self.number} did not start: {line!r}")

    def go(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(b"go\n")
        self.process.stdin.flush()

    def finish(self, timeout: float) -> int | None:
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return None
        finally:
            self.log.close()


def _read_line(stream: Any, timeout: float) -> bytes:
    box: list[bytes] = []
    reader = threading.Thread(target=lambda: box.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return box[0] if box else b""


def owner_pid(path: str) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        return int(json.loads((Path(path) / "hybrid-memory-owner.json").read_text())["pid"])
    return None


def run_kind(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    directory = Path(tempfile.mkdtemp(prefix=f"history-{kind}-", dir=args.scratch))
    args.directory = str(directory)
    faults: list[str] = []
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(started_server(directory)) if kind == "server" else None
        where = server.url if server else str(directory / "store")
        workers = [Worker(n, kind, where, args) for n in range(args.processes)]
        for worker in workers:
            worker.wait_ready()
        for worker in workers:
            worker.go()
        started = time.monotonic()

        def at(fraction: float) -> None:
            time.sleep(max(0.0, started + fraction * args.seconds - time.monotonic()))

        # kill -9 of one process (the owner of an embedded path), started again.
        at(0.25)
        pid = owner_pid(where) if kind == "embedded" else None
        victim = next((w for w in workers if w.process.pid == pid), workers[-1])
        os.kill(victim.process.pid, signal.SIGKILL)
        victim.finish(30)
        faults.append(f"kill -9 of process {victim.number} (pid {victim.process.pid})")
        rest = argparse.Namespace(**vars(args))
        rest.seconds = max(5.0, started + args.seconds - time.monotonic())
        again = Worker(victim.number, kind, where, rest)
        again.wait_ready()
        again.go()
        workers.append(again)
        # SIGSTOP of the owner (embedded) for longer than the deadline; a server restart.
        at(0.55)
        if kind == "embedded":
            pid = owner_pid(where)
            if pid is not None and pid != os.getpid():
                os.kill(pid, signal.SIGSTOP)
                time.sleep(args.request_timeout * 2 + 1)
                os.kill(pid, signal.SIGCONT)
                faults.append(
                    f"SIGSTOP of the owner (pid {pid}) for {args.request_timeout * 2 + 1:g} s"
                )
        else:
            assert server is not None
            server.stop()
            time.sleep(1.0)
            server.start()
            faults.append("chroma server restarted")
        hung = [
            w.number
            for w in workers
            if w.process.poll() is None and w.finish(args.seconds + 300) is None
        ]
        exits = Counter(str(w.process.returncode) for w in workers if w is not victim)
        records = read_history(directory)
        final = read_final(kind, where, directory, args)
    report = check(records, final, slack=args.slack)
    report |= {"store": kind, "faults": faults, "hung": hung, "exits": dict(exits)}
    if not args.keep:
        shutil.rmtree(directory, ignore_errors=True)
    return report


def read_history(directory: Path) -> list[dict[str, Any]]:
    records = []
    for path in sorted(directory.glob("history-*.jsonl")):
        for line in path.read_text().splitlines():
            with contextlib.suppress(ValueError):  # a line cut by kill -9
                records.append(json.loads(line))
    return records


def read_final(
    kind: str, where: str, directory: Path, args: argparse.Namespace
) -> dict[str, dict[str, Any]]:
    """Every memory of each namespace as a fresh process sees it, and the legs' misses."""
    from benchmarks.seeded_embedding import SeededEmbedding
    from hybrid_memory import HybridMemory

    place = {"path": where} if kind == "embedded" else {"url": where}
    if kind == "server":
        place["cache_dir"] = str(directory / "cache-final")
    store = HybridMemory(
        **place, collection="history", embedding=SeededEmbedding(), embedding_name=EMBEDDING_NAME
    )
    final: dict[str, dict[str, Any]] = {}
    misses = []
    try:
        for ns in NAMESPACES:
            view = store.namespace(ns)
            view.sync(full=True)
            final[ns] = {m.id: m.text for m in view.list_memories()}
            for memory_id, text in final[ns].items():
                parsed = parse_text(text)
                token = parsed[1] if parsed else text
                if not any(h.id == memory_id and "keyword" in h.ranks for h in view.search(token)):
                    misses.append(f"{memory_id} ({token}) not found by keyword")
                hits = view.search(text, k=10)
                if not any(h.id == memory_id and "vector" in h.ranks for h in hits):
                    misses.append(f"{memory_id} ({token}) not found by vector")
    finally:
        store.close()
    final["_legs"] = {"misses": misses}
    return final


def print_report(report: dict[str, Any]) -> None:
    anomalies = sum(report["anomalies"].values())
    print(
        f"{report['store']}: {report['operations']} operations checked "
        f"({', '.join(f'{k} {v}' for k, v in sorted(report['by_op'].items()))}; "
        f"{report['unfinished']} cut by kill -9), {report['memories']} memories, "
        f"{anomalies} anomalies"
    )
    print(f"  faults: {'; '.join(report['faults'])}")
    print(f"  calls that failed (the library's error, not anomalies): {report['failed']}")
    for error, n in report["errors"].items():
        print(f"    {n} x {error}")
    print(f"  worker exits: {report['exits']}; hung: {report['hung'] or 'none'}")
    for kind, n in sorted(report["anomalies"].items()):
        print(f"  anomaly {kind}: {n}")
        for example in report["examples"][kind]:
            print(f"    {example}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", choices=["both", "embedded", "server"], default="both")
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=45)
    parser.add_argument("--sync-interval", type=float, default=0.5)
    parser.add_argument(
        "--slack", type=float, default=5.0, help="seconds added to the visibility bound"
    )
    parser.add_argument("--request-timeout", type=float, default=2.0)
    parser.add_argument("--scratch", default=None, help="directory for the stores")
    parser.add_argument("--keep", action="store_true", help="keep the stores and histories")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    # A worker process (started by this script).
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--kind", help=argparse.SUPPRESS)
    parser.add_argument("--where", help=argparse.SUPPRESS)
    parser.add_argument("--process", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--directory", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker_main(args)
        return 0
    kinds = ["embedded", "server"] if args.stores == "both" else [args.stores]
    reports = [run_kind(kind, args) for kind in kinds]
    if args.json:
        print(json.dumps(reports, indent=2))
    else:
        for report in reports:
            print_report(report)
        total = sum(r["operations"] for r in reports)
        found = sum(sum(r["anomalies"].values()) for r in reports)
        print(f"{total} operations checked, {found} anomalies")
    bad = any(sum(r["anomalies"].values()) or r["hung"] for r in reports)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
