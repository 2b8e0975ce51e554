"""The periodic check for other processes' writes: in the background while the store is
used, in the caller after the store sat idle, never two at a time.

Another agent is a second store on the same Chroma path with its own keyword index, as
a second process would be. Time passing is simulated by moving the store's record of
its last check back, so nothing here depends on how fast the machine is; waiting for a
background check is a bounded poll.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hybrid_memory import HybridMemory, StoreError

from ..conftest import HashEmbedding

INTERVAL = 60.0  # long: within a test, only the simulated clock makes a check due


def open_store(path: Path, index: str | None = None, **kw: Any) -> HybridMemory:
    return HybridMemory(
        path,
        embedding=HashEmbedding(),
        embedding_name="test-hash-64",
        index_path=str(path / index) if index else None,
        **kw,
    )


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[HybridMemory, HybridMemory]]:
    with (
        open_store(tmp_path, sync_interval=INTERVAL) as reader,
        open_store(tmp_path, "other-agent.sqlite3") as other,
    ):
        yield reader, other


def wait_for(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "not within the timeout"
        time.sleep(0.02)


def record_sync_threads(store: HybridMemory) -> list[str]:
    threads: list[str] = []
    sync = store.sync

    def recording(**kw: Any) -> None:
        threads.append(threading.current_thread().name)
        sync(**kw)

    store.sync = recording  # type: ignore[method-assign]
    return threads


def found(store: HybridMemory, query: str) -> list[str]:
    return [h.id for h in store.search(query, alpha=0.0)]


def test_within_the_interval_no_check(stores: tuple[HybridMemory, HybridMemory]) -> None:
    reader, other = stores
    threads = record_sync_threads(reader)
    other.add("the gate opens at nine", id="gate")
    assert found(reader, "gate opens") == []
    assert threads == []
    reader.sync()  # explicit: at once, in the caller
    assert found(reader, "gate opens") == ["gate"]
    assert threads == ["MainThread"]


def test_a_due_check_runs_in_the_background(stores: tuple[HybridMemory, HybridMemory]) -> None:
    reader, other = stores
    threads = record_sync_threads(reader)
    other.add("the gate opens at nine", id="gate", tags=["gate"])
    reader._sync_state.last = time.monotonic() - 1.5 * INTERVAL  # due, not overdue
    reader.search("anything at all")
    wait_for(lambda: "gate" in reader._index.ids())
    assert found(reader, "gate opens") == ["gate"]
    assert reader.tags() == ["gate"]
    assert len(threads) == 1 and threads[0] != "MainThread"


def test_after_an_idle_spell_the_caller_checks_first(
    stores: tuple[HybridMemory, HybridMemory],
) -> None:
    reader, other = stores
    threads = record_sync_threads(reader)
    other.add("the gate opens at nine", id="gate")
    reader._sync_state.last = time.monotonic() - 2 * INTERVAL
    assert found(reader, "gate opens") == ["gate"]  # no waiting: this call caught up
    assert threads == ["MainThread"]
    other.delete("gate")
    reader._sync_state.last = time.monotonic() - 3 * INTERVAL
    assert reader.count({"user": {"$ne": "nobody"}}) == 0


def test_interval_zero_checks_in_every_call(tmp_path: Path) -> None:
    with (
        open_store(tmp_path, sync_interval=0) as reader,
        open_store(tmp_path, "other-agent.sqlite3") as other,
    ):
        threads = record_sync_threads(reader)
        for i in range(3):
            other.add(f"note {i} about the gate", id=f"n{i}")
            assert found(reader, f"note {i}")[0] == f"n{i}"
        assert threads == ["MainThread"] * 3


def test_never_two_checks_at_once(stores: tuple[HybridMemory, HybridMemory]) -> None:
    reader, other = stores
    running, most, started = 0, 0, 0
    lock = threading.Lock()
    check = reader._background_sync

    def slow_check(*args: float) -> None:
        nonlocal running, most, started
        with lock:
            running += 1
            started += 1
            most = max(most, running)
        time.sleep(0.05)  # widen the window another check could start in
        with lock:
            running -= 1
        check(*args)

    reader._background_sync = slow_check  # type: ignore[method-assign]
    errors: list[BaseException] = []

    def agent(n: int) -> None:
        try:
            for i in range(15):
                reader._sync_state.last = time.monotonic() - 1.5 * INTERVAL
                if i % 5 == 0:
                    reader.add(f"agent {n} note {i}")
                reader.search(f"agent {n} note")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=agent, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    other.add("written by the other agent", id="other")
    reader.sync()
    for t in threads:
        t.join()
    assert errors == []
    assert started >= 1 and most == 1
    wait_for(lambda: not reader._sync_state.running.locked())
    reader.sync()
    assert reader.count() == reader._index.count() == 6 * 3 + 1


def test_close_waits_for_a_check_in_flight(tmp_path: Path) -> None:
    store = open_store(tmp_path, sync_interval=INTERVAL)
    store.add("something to index")
    check = store._background_sync
    done = threading.Event()

    def slow_check(*args: float) -> None:
        time.sleep(0.2)
        check(*args)
        done.set()

    store._background_sync = slow_check  # type: ignore[method-assign]
    store._sync_state.last = time.monotonic() - 1.5 * INTERVAL
    store.search("something")
    store.close()
    assert done.is_set()
    with open_store(tmp_path) as again:
        assert found(again, "something") != []


def test_a_check_that_finds_nothing_never_holds_up_a_write(
    stores: tuple[HybridMemory, HybridMemory],
) -> None:
    reader, other = stores
    with reader._write_lock:  # as a long add would
        reader._sync_state.last = time.monotonic() - 1.5 * INTERVAL
        reader.search("anything at all")
        wait_for(lambda: not reader._sync_state.running.locked())  # done without the lock
        other.add("the gate opens at nine", id="gate")
        reader._sync_state.last = time.monotonic() - 1.5 * INTERVAL
        reader.search("anything at all")
        time.sleep(0.2)
        assert reader._sync_state.running.locked()  # found work: waits for the lock
        assert "gate" not in reader._index.ids()
    wait_for(lambda: "gate" in reader._index.ids())


def test_a_failed_check_is_tried_again_then_raised_by_a_caller(tmp_path: Path) -> None:
    with open_store(tmp_path, sync_interval=INTERVAL) as store:
        store.add("something to index", metadata={"user": "ann"})
        store._client.delete_collection(store._collection_name)  # Chroma now fails
        due = store._sync_state.last = time.monotonic() - 1.5 * INTERVAL
        assert store.count({"user": "ann"}) == 1  # answered from the index
        wait_for(lambda: not store._sync_state.running.locked())
        assert store._sync_state.last == due  # given back: the next call tries again
        store._sync_state.last = time.monotonic() - 2 * INTERVAL
        with pytest.raises(StoreError, match="Chroma"):
            store.count({"user": "ann"})


def test_a_check_overlapping_an_own_write_asks_again(
    stores: tuple[HybridMemory, HybridMemory],
) -> None:
    reader, other = stores
    threads = record_sync_threads(reader)
    other.add("the gate opens at nine", id="gate")
    state = reader._sync_state
    state.writes += 1  # as while this process writes the collection, then the index
    due = state.last = time.monotonic() - 1.5 * INTERVAL
    reader.search("anything at all")
    wait_for(lambda: not state.running.locked())
    assert state.last == due and threads == []  # no conclusion either way
    state.writes += 1  # that write is done
    reader.search("anything at all")  # still due: asks again
    wait_for(lambda: "gate" in reader._index.ids())
    assert len(threads) == 1
    assert state.writes % 2 == 0
    reader.add("a write of its own")
    assert state.writes % 2 == 0
