"""Many processes on one embedded store path (issue 21, items 1, 2 and 4).

Real processes (``tests/integration/_agent.py``, one store each, driven over stdin) on
one path: what one writes, the others find on every leg within ``sync_interval``; the
owner of the path killed with SIGKILL while others write loses nothing acknowledged;
``close()`` gives every file back and a reopen sees other processes' writes; searches
survive ids deleted under them. Every wait is bounded; nothing asserts a timing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hybrid_memory import HybridMemory, HybridMemoryError

from ..conftest import SeededEmbedding

AGENT = Path(__file__).with_name("_agent.py")
REPO = Path(__file__).resolve().parents[2]
# The agents' sync_interval is 0.5 s; a change must show within a few of them (the
# machine running the suite may be loaded: the bound is generous, the wait ends early).
VISIBLE_WITHIN = 30.0


class Agent:
    """A store in a process of its own, answering JSON commands."""

    def __init__(self, path: Path) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            "ANONYMIZED_TELEMETRY": "False",
        }
        self.process = subprocess.Popen(
            [sys.executable, str(AGENT), str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self._read(120) == {"ready": True}

    def _read(self, timeout: float) -> Any:
        assert self.process.stdout is not None
        stdout = self.process.stdout
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        if not box or not box[0]:
            raise AssertionError(f"agent {self.process.pid} did not answer within {timeout} s")
        return json.loads(box[0])

    def __call__(self, op: str, timeout: float = 120, **args: Any) -> Any:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.process.stdin.flush()
        reply = self._read(timeout)
        assert "error" not in reply, reply["error"]
        return reply["ok"]

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self("close", timeout=60)
                self.process.wait(timeout=30)
            except (AssertionError, OSError, subprocess.TimeoutExpired):
                self.kill()

    def kill(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[Any]:
    started: list[Agent] = []

    def start(n: int = 1) -> list[Agent]:
        new = [Agent(tmp_path / "memory") for _ in range(n)]
        started.extend(new)
        return new

    yield start
    for agent in started:
        agent.close()


def eventually(check: Any, *args: Any, timeout: float = VISIBLE_WITHIN) -> Any:
    """``check()`` until it returns something true (bounded): other processes' writes
    show within sync_interval, which a loaded machine stretches."""
    deadline = time.monotonic() + timeout
    while True:
        got = check(*args)
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.25)


def texts(prefix: str, n: int) -> list[tuple[str, str]]:
    """(text, unique token) pairs."""
    return [(f"{prefix} memory number {i} tok{prefix}{i}", f"tok{prefix}{i}") for i in range(n)]


def both_legs(agent: Agent, text: str, token: str) -> bool:
    found = agent("find", text=text, token=token)
    return found["vector"] is not None and found["keyword"] is not None


# --- (b) one process writes, another sees it on every leg -----------------------------------


def test_adds_updates_and_deletes_of_another_process_show_on_every_leg(agents: Any) -> None:
    a, b = agents(2)
    assert a("role")["owner"] != b("role")["owner"]  # one owner, one client
    for writer, reader in ((b, a), (a, b)):  # the client writing, then the owner
        pairs = texts(f"p{writer.process.pid}", 30)
        ids = writer("add_many", texts=[t for t, _ in pairs])
        new_text = f"rewritten entirely zebraword{writer.process.pid}"
        writer("update", id=ids[0], text=new_text)
        writer("delete", ids=[ids[1]])
        # Within sync_interval, without an explicit sync: every add on both legs...
        for text, token in pairs[2:]:
            assert eventually(both_legs, reader, text, token), text
        # ...the update's new text on the vector leg and the keyword leg...
        assert eventually(both_legs, reader, new_text, f"zebraword{writer.process.pid}")
        # ...and neither the deleted memory nor the old text of the updated one.
        gone = reader("find", text=pairs[1][0], token=pairs[1][1])
        old = reader("find", text=pairs[0][0], token=pairs[0][1])
        assert gone == old == {"vector": None, "keyword": None}
    assert a("count") == b("count") == 2 * 29


# --- (d) three processes at once --------------------------------------------------------------


def test_three_processes_write_at_once_and_each_finds_all(agents: Any, tmp_path: Path) -> None:
    trio = agents(3)
    assert sorted(agent("role")["owner"] for agent in trio) == [False, False, True]
    written: list[tuple[str, str]] = []
    for agent in trio:
        agent("write_for", seconds=4.0, prefix=f"w{agent.process.pid}")
    for agent in trio:
        done = agent("wait_writes")
        assert done["errors"] == {}, done["first"]
        assert done["acked"] > 0
    for log in sorted(tmp_path.glob("acked-*.jsonl")):
        for line in log.read_text().splitlines():
            record = json.loads(line)
            written.append((record["text"], record["token"]))
    for agent in trio:
        assert eventually(lambda a: a("count") == len(written), agent)
        for text, token in written:
            assert both_legs(agent, text, token), (
                agent.process.pid,
                text,
                agent("find", text=text, token=token),
            )


# --- (c) the owner killed while others write --------------------------------------------------


@pytest.mark.slow
def test_owner_killed_while_others_write_loses_nothing_acknowledged(
    agents: Any, tmp_path: Path
) -> None:
    trio = agents(3)
    owner = next(agent for agent in trio if agent("role")["owner"])
    survivors = [agent for agent in trio if agent is not owner]
    for agent in trio:
        agent("write_for", seconds=6.0, prefix=f"w{agent.process.pid}")
    time.sleep(2.5)
    owner.kill()  # SIGKILL: no cleanup, the lock freed by the kernel
    for agent in survivors:
        done = agent("wait_writes", timeout=300)
        assert done["errors"] == {}, done["first"]
    # One of the survivors took the path over.
    assert sorted(agent("role")["owner"] for agent in survivors) == [False, True]
    acked: list[dict[str, str]] = []
    for log in sorted(tmp_path.glob("acked-*.jsonl")):
        acked += [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    assert len(acked) > 0
    (fresh,) = agents(1)
    counts = set()
    for agent in [*survivors, fresh]:
        agent("sync")
        counts.add(agent("count"))
        for record in acked:
            assert both_legs(agent, record["text"], record["token"]), (
                record,
                agent("find", text=record["text"], token=record["token"]),
            )
    # Every process counts the same; beyond the acknowledged memories there is at most
    # the one add the killed process had in flight (written, never acknowledged).
    (count,) = counts
    assert len(acked) <= count <= len(acked) + 1


# --- close() releases every file; a reopen sees other processes' writes -----------------------


def _open_files(path: Path) -> list[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(path)):
            found.append(target)
    return found


def open_store(path: Path) -> HybridMemory:
    return HybridMemory(
        path=str(path), embedding=SeededEmbedding(), embedding_name="seeded-64", sync_interval=0.5
    )


def test_close_releases_every_file_and_a_reopen_sees_other_processes(
    agents: Any, tmp_path: Path
) -> None:
    path = tmp_path / "memory"
    store = open_store(path)
    first = store.add("written by this process before the others came tokfirst")
    other = open_store(path)  # a second store of this process on the same path
    assert store.search("tokfirst")[0].id == first
    store.close()
    assert _open_files(path), "the other store of this process still holds the path"
    other.close()
    assert _open_files(path) == []
    (b,) = agents(1)
    assert b("role")["owner"]  # this process gave the path up
    pairs = texts("fromb", 12)
    b("add_many", texts=[t for t, _ in pairs])
    reopened = open_store(path)
    try:
        for text, token in pairs:
            hits = {h.text: h.ranks for h in reopened.search(text, k=5)}
            assert "vector" in hits.get(text, {}), text
            assert reopened.search(token)[0].text == text
        assert reopened.count() == 13
    finally:
        reopened.close()
    assert _open_files(path) == []


# --- searches survive concurrent deletes (one process) ---------------------------------------


def test_filtered_searches_survive_a_thread_deleting_what_they_match(
    tmp_path: Path, filter_paths: Any
) -> None:
    # Both restricted paths: compare-all for few ids, Chroma's restricted search for many.
    filter_paths(narrow_filter=5000, exact_search=50)
    store = open_store(tmp_path / "memory")
    try:
        ids = store.add_many(
            [{"text": f"shared words memory {i}", "metadata": {"group": "g"}} for i in range(600)]
        )
        errors: list[BaseException] = []
        deleting = True

        def delete() -> None:
            nonlocal deleting
            try:
                for start in range(0, 580, 4):
                    store.delete(ids[start : start + 4])
            except BaseException as error:
                errors.append(error)
            finally:
                deleting = False

        def search() -> None:
            try:
                while deleting:
                    for hit in store.search("shared words memory", k=10, filter={"group": "g"}):
                        assert hit.metadata == {"group": "g"}
            except BaseException as error:
                errors.append(error)

        threads = [threading.Thread(target=delete)] + [
            threading.Thread(target=search) for _ in range(2)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        assert errors == []
        assert store.count() == 20
        left = {h.id for h in store.search("shared words memory", k=30, filter={"group": "g"})}
        assert left == set(ids[580:])
    finally:
        store.close()


def test_four_threads_mixing_writes_and_searches_see_no_error(
    tmp_path: Path, filter_paths: Any
) -> None:
    filter_paths(narrow_filter=5000, exact_search=20)
    store = open_store(tmp_path / "memory")
    try:
        store.add_many(
            [{"text": f"seed memory {i} words", "metadata": {"kind": "seed"}} for i in range(300)]
        )
        errors: list[BaseException] = []
        deadline = time.monotonic() + 8.0

        def work(thread: int) -> None:
            mine: list[str] = []
            step = 0
            try:
                while time.monotonic() < deadline:
                    step += 1
                    action = step % 4
                    if action == 0 or not mine:
                        text = f"thread {thread} memory {step} words"
                        mine.append(store.add(text, metadata={"kind": "seed"}))
                    elif action == 1:
                        store.search("memory words", k=10, filter={"kind": "seed"})
                    elif action == 2:
                        store.update(mine[-1], text=f"thread {thread} changed {step} words")
                    else:
                        store.delete([mine.pop(0)])
                        store.search("seed memory", k=10, filter={"kind": "seed"})
            except BaseException as error:
                errors.append(error)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        assert errors == [], [repr(e) for e in errors]
        assert not any(isinstance(e, HybridMemoryError) for e in errors)
    finally:
        store.close()


# --- what the design cannot support is refused up front --------------------------------------


def test_a_path_owned_from_another_machine_is_refused(tmp_path: Path) -> None:
    """A store directory on a shared file system, owned by a process of another machine
    (loopback cannot reach it): StoreError naming the machine and the way out, nothing
    opened. Staged here: the owner's lock held, its address file naming another host."""
    import fcntl

    from hybrid_memory import StoreError

    path = tmp_path / "memory"
    path.mkdir()
    holder = os.open(path / "hybrid-memory-owner.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        record = {"pid": os.getpid(), "machine": "another-host", "host": "127.0.0.1", "port": 9}
        (path / "hybrid-memory-owner.json").write_text(json.dumps({**record, "key": "00"}))
        with pytest.raises(StoreError, match=r"another machine.*'another-host'.*Chroma server"):
            open_store(path)
        assert not (path / "chroma.sqlite3").exists()
    finally:
        os.close(holder)
