"""The periodic check for other processes' writes: in the background while the store is
used, in the caller after the store sat idle, never two at a time.

Another agent is a second store on the same Chroma path with its own keyword index, as
a second process would be. Time passing is simulated by moving the store's record of
its last check back, so nothing here depends on how fast the machine is; waiting for a
background check is a bounded poll. What the index holds is read through the public API
(conftest.indexed); the check's clock, its in-flight flag, the check itself and the
count of this process's writes, which these tests are about and no public API shows, are
reached through one helper, SyncInternals.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import chromadb
import pytest

from hybrid_memory import HybridMemory, StoreError

from ..conftest import HashEmbedding, index_ids, indexed

INTERVAL = 60.0  # long: within a test, only the simulated clock makes a check due


def open_store(path: Path, index: str | None = None, **kw: Any) -> HybridMemory:
    kw.setdefault("embedding", HashEmbedding())
    return HybridMemory(
        path,
        embedding_name="test-hash-64",
        index_path=str(path / index) if index else None,
        **kw,
    )


class SyncInternals:
    """The one place this module reaches inside a store (rename here when the store's
    internals move): the periodic check's clock (the record of when the last check
    started), whether a check is in flight, the background check itself, and the count
    of this process's writes (two per write: odd while one is under way)."""

    def __init__(self, store: HybridMemory) -> None:
        self.store = store
        self.sync = store._parts.sync

    def make_due(self, intervals: float = 1.5) -> float:
        """Move the last check ``intervals`` back: from 1 a check is due (and runs in the
        background), from 2 overdue (the caller checks before it answers)."""
        self.sync.last_check = time.monotonic() - intervals * INTERVAL
        return float(self.sync.last_check)

    @property
    def last(self) -> float:
        return float(self.sync.last_check)

    @property
    def check_seconds(self) -> float:
        """How long the last check took, which stretches the interval (20 times it)."""
        return float(self.sync.check_seconds)

    @check_seconds.setter
    def check_seconds(self, seconds: float) -> None:
        self.sync.check_seconds = seconds

    @property
    def running(self) -> bool:
        """A check is in flight."""
        return bool(self.sync._checking.locked())

    @property
    def writes(self) -> int:
        return int(self.sync._writes)

    def half_write(self) -> None:
        """One half of a write's count: as when this process starts writing the
        collection, then the index, or has finished."""
        self.sync._writes += 1

    def wrap_sync(self, wrap: Callable[[Callable[..., None]], Callable[..., None]]) -> None:
        """Run every sync of the index, explicit or periodic, as ``wrap(sync)``."""
        self.sync.sync = wrap(self.sync.sync)  # type: ignore[method-assign]

    def wrap_check(self, wrap: Callable[[Callable[..., None]], Callable[..., None]]) -> None:
        """Run the background check as ``wrap(check)``."""
        self.sync._check_in_background = wrap(self.sync._check_in_background)  # type: ignore[method-assign]


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
    """The names of the threads that bring the index up to date, one per sync."""
    threads: list[str] = []

    def recording(sync: Callable[..., None]) -> Callable[..., None]:
        def run(**kw: Any) -> None:
            threads.append(threading.current_thread().name)
            sync(**kw)

        return run

    SyncInternals(store).wrap_sync(recording)
    return threads


def count_checks(internals: SyncInternals) -> list[str]:
    """A list that gets one entry per background check from now on."""
    checks: list[str] = []

    def counting(check: Callable[..., None]) -> Callable[..., None]:
        def run(*args: Any) -> None:
            checks.append("check")
            check(*args)

        return run

    internals.wrap_check(counting)
    return checks


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
    SyncInternals(reader).make_due(1.5)  # due, not overdue
    reader.search("anything at all")
    wait_for(lambda: "gate" in index_ids(reader))
    assert found(reader, "gate opens") == ["gate"]
    assert reader.tags() == ["gate"]
    assert len(threads) == 1 and threads[0] != "MainThread"


def test_a_check_that_takes_long_comes_less_often(
    stores: tuple[HybridMemory, HybridMemory],
) -> None:
    """On a large collection the check itself takes long (Chroma counts and filters the
    whole collection: ~0.4 s at a million memories), so its interval stretches to 20
    times its last duration: it never takes more than a twentieth of the time."""
    reader, other = stores
    internals = SyncInternals(reader)
    other.add("the gate opens at nine", id="gate")
    internals.check_seconds = INTERVAL / 10  # due every 20 x 6 s = 2 intervals
    internals.make_due(1.5)  # due by the interval alone
    reader.search("anything at all")
    assert not internals.running
    assert "gate" not in index_ids(reader)
    internals.make_due(2.5)  # due by the check's cost too, not yet overdue
    reader.search("anything at all")
    wait_for(lambda: "gate" in index_ids(reader))
    # The check measured itself: a small store checks in far less than 6 s.
    assert 0.0 < internals.check_seconds < INTERVAL / 10


def test_no_check_while_nobody_wrote(stores: tuple[HybridMemory, HybridMemory]) -> None:
    """Once a check found the index in step, the next ones ask Chroma nothing until
    somebody writes to the path (its SQLite file's data_version tells, in microseconds),
    due or overdue; the first write by another process is caught up as before."""
    reader, other = stores
    internals = SyncInternals(reader)
    reader.sync()  # in step now
    threads = record_sync_threads(reader)
    checks = count_checks(internals)
    for intervals in (1.5, 2.5):  # due, then overdue
        internals.make_due(intervals)
        reader.search("anything at all")
        assert time.monotonic() - internals.last < INTERVAL  # counted as checked
    assert not internals.running
    assert checks == [] and threads == []
    other.add("the gate opens at nine", id="gate")
    internals.make_due(1.5)
    reader.search("anything at all")
    wait_for(lambda: "gate" in index_ids(reader))
    assert checks == ["check"]


def test_after_an_idle_spell_the_caller_checks_first(
    stores: tuple[HybridMemory, HybridMemory],
) -> None:
    reader, other = stores
    internals = SyncInternals(reader)
    threads = record_sync_threads(reader)
    other.add("the gate opens at nine", id="gate")
    internals.make_due(2)
    assert found(reader, "gate opens") == ["gate"]  # no waiting: this call caught up
    assert threads == ["MainThread"]
    other.delete("gate")
    internals.make_due(3)
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
    internals = SyncInternals(reader)
    running, most, started = 0, 0, 0
    lock = threading.Lock()

    def slowly(check: Callable[..., None]) -> Callable[..., None]:
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

        return slow_check

    internals.wrap_check(slowly)
    errors: list[BaseException] = []

    def agent(n: int) -> None:
        try:
            for i in range(15):
                internals.make_due(1.5)
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
    wait_for(lambda: not internals.running)
    reader.sync()
    assert reader.count() == len(indexed(reader)) == 6 * 3 + 1


def test_close_waits_for_a_check_in_flight(tmp_path: Path) -> None:
    store = open_store(tmp_path, sync_interval=INTERVAL)
    store.add("something to index")
    internals = SyncInternals(store)
    done = threading.Event()

    def slowly(check: Callable[..., None]) -> Callable[..., None]:
        def slow_check(*args: float) -> None:
            time.sleep(0.2)
            check(*args)
            done.set()

        return slow_check

    internals.wrap_check(slowly)
    internals.make_due(1.5)
    store.search("something")
    store.close()
    assert done.is_set()
    with open_store(tmp_path) as again:
        assert found(again, "something") != []


class HeldEmbedding(HashEmbedding):
    """The cheap embedding, held while it embeds a text containing ``hold`` until
    ``release`` is set: an add of that text holds the store's write lock meanwhile, as a
    long add does."""

    def __init__(self, hold: str) -> None:
        super().__init__()
        self.hold = hold
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, texts: list[str]) -> list[list[float]]:
        if any(self.hold in text for text in texts):
            self.entered.set()
            assert self.release.wait(30), "never released"
        return super().__call__(texts)


def test_a_check_that_finds_nothing_never_holds_up_a_write(tmp_path: Path) -> None:
    embedding = HeldEmbedding("a long add")
    with (
        open_store(tmp_path, sync_interval=INTERVAL, embedding=embedding) as reader,
        open_store(tmp_path, "other-agent.sqlite3") as other,
    ):
        internals = SyncInternals(reader)
        writer = threading.Thread(target=reader.add, args=("a long add",))
        writer.start()
        try:
            assert embedding.entered.wait(20)  # the add is under way, holding the lock
            internals.make_due(1.5)
            reader.search("anything at all")
            wait_for(lambda: not internals.running)  # done without the lock
            other.add("the gate opens at nine", id="gate")
            internals.make_due(1.5)
            reader.search("anything at all")
            time.sleep(0.2)
            assert internals.running  # found work: waits for the lock
            assert "gate" not in index_ids(reader)
        finally:
            embedding.release.set()
            writer.join()
        wait_for(lambda: "gate" in index_ids(reader))
        assert found(reader, "long add") != []


def test_a_failed_check_is_tried_again_then_raised_by_a_caller(tmp_path: Path) -> None:
    with open_store(tmp_path, sync_interval=INTERVAL) as store:
        internals = SyncInternals(store)
        store.add("something to index", metadata={"user": "ann"})
        # Chroma now fails: another client on the path deleted the collection.
        chromadb.PersistentClient(path=str(tmp_path)).delete_collection("hybrid_memory")
        due = internals.make_due(1.5)
        assert store.count({"user": "ann"}) == 1  # answered from the index
        wait_for(lambda: not internals.running)
        assert internals.last == due  # given back: the next call tries again
        internals.make_due(2)
        with pytest.raises(StoreError, match="Chroma"):
            store.count({"user": "ann"})


def test_a_check_overlapping_an_own_write_asks_again(
    stores: tuple[HybridMemory, HybridMemory],
) -> None:
    reader, other = stores
    internals = SyncInternals(reader)
    threads = record_sync_threads(reader)
    other.add("the gate opens at nine", id="gate")
    internals.half_write()  # as while this process writes the collection, then the index
    due = internals.make_due(1.5)
    reader.search("anything at all")
    wait_for(lambda: not internals.running)
    assert internals.last == due and threads == []  # no conclusion either way
    internals.half_write()  # that write is done
    reader.search("anything at all")  # still due: asks again
    wait_for(lambda: "gate" in index_ids(reader))
    assert len(threads) == 1
    assert internals.writes % 2 == 0
    reader.add("a write of its own")
    assert internals.writes % 2 == 0


def test_a_store_writing_alone_stays_in_step_without_checks(tmp_path: Path) -> None:
    """The store owns its path and nobody else writes: its own writes (add, update,
    delete) keep the index in step, so a due check asks Chroma nothing."""
    with open_store(tmp_path, sync_interval=INTERVAL) as store:
        internals = SyncInternals(store)
        # The first write also records the vectors' dimension on the collection, not
        # as part of a write's two halves: the check after it runs.
        store.add("a first note", id="first")
        store.sync()  # in step now
        checks = count_checks(internals)
        store.add("the gate opens at nine", id="gate")
        store.add_many([{"text": "the bridge closes at ten", "id": "bridge"}])
        store.update("gate", text="the gate opens at eight")
        store.add("a note to drop", id="drop")
        store.delete("drop")
        for intervals in (1.5, 2.5):  # due, then overdue
            internals.make_due(intervals)
            assert found(store, "gate eight") == ["gate"]
            assert time.monotonic() - internals.last < INTERVAL  # counted as checked
        assert checks == [] and not internals.running
        assert index_ids(store) == {"first", "gate", "bridge"}


def test_a_write_by_another_store_during_an_own_write_still_makes_the_check_run(
    stores: tuple[HybridMemory, HybridMemory],
) -> None:
    """Another store of this process (its own index, as another agent's) writes while
    this one is writing: the path's commits are not all this store's, so its write does
    not vouch for the index, and the next due check runs and finds the other's memory."""
    reader, other = stores
    internals = SyncInternals(reader)
    reader.add("a first note", id="first")  # records the dimension (see above)
    reader.sync()
    checks = count_checks(internals)
    collection = reader._parts.collection
    write = collection.write

    def write_then_another(*args: Any, **kwargs: Any) -> Any:
        result = write(*args, **kwargs)
        other.add("the tower bell rings at noon", id="bell")
        return result

    collection.write = write_then_another  # type: ignore[method-assign]
    reader.add("the gate opens at nine", id="gate")
    collection.write = write  # type: ignore[method-assign]
    internals.make_due(1.5)
    reader.search("anything at all")
    wait_for(lambda: "bell" in index_ids(reader))
    assert checks == ["check"]
    assert index_ids(reader) >= {"gate", "bell"}


def test_the_owner_counts_the_writes_it_runs_for_other_processes(tmp_path: Path) -> None:
    """A real second process on the path: its writes go through this process, the owner,
    which counts them, so this store's own writes cannot vouch for the index while the
    other's run; its next due check runs and finds them."""
    from ..conftest import SeededEmbedding
    from .test_multiprocess import Agent

    path = tmp_path / "memory"
    with HybridMemory(
        path, embedding=SeededEmbedding(), embedding_name="seeded-64", sync_interval=INTERVAL
    ) as owner:
        owner.add("a first note", id="first")
        collection = owner._parts.collection
        others = collection.writes.begun_by_others()
        assert others is not None  # this process owns the path
        agent = Agent(path)
        try:
            assert agent("role") == {"owner": False}
            agent("add_many", texts=["the gate opens at nine", "the bridge closes at ten"])
            assert (collection.writes.begun_by_others() or 0) > others
            internals = SyncInternals(owner)
            checks = count_checks(internals)
            owner.add("the tower bell rings at noon", id="bell")
            internals.make_due(1.5)
            owner.search("anything at all")
            wait_for(lambda: checks == ["check"] and not internals.running)
            assert owner.count() == 4
        finally:
            agent.close()


def test_a_reconcile_keeps_memories_written_while_it_compared_ids(tmp_path: Path) -> None:
    """A reconcile reads the collection's ids, then the index's. Another store on the same
    index file (another agent) that writes a memory in between puts it in both, after
    the first read: the index holds an id the read of the collection lacked. It must not
    be taken for a stale one. (It was deleted from the shared index, and the count,
    which is the collection's, stayed right, so no check put it back: in every process
    on the path the memory had left the keyword leg, and its own text no longer found it
    in the fused top 10.)"""
    with open_store(tmp_path) as reader, open_store(tmp_path) as other:
        reader.add("a first note", id="first")
        collection = reader._parts.collection
        all_ids = collection.all_ids

        def read_then_another_writes() -> set[str]:
            ids = all_ids()
            other.add("the tower bell rings at noon", id="bell")
            return ids

        collection.all_ids = read_then_another_writes  # type: ignore[method-assign]
        reader.sync(full=True)
        collection.all_ids = all_ids  # type: ignore[method-assign]
        assert index_ids(reader) == index_ids(other) == {"first", "bell"}
        assert found(reader, "tower bell")[0] == "bell"


def test_a_reconcile_still_drops_what_the_collection_lost(tmp_path: Path) -> None:
    """The other half: an id the index holds and the collection does not (deleted by a
    process killed between the collection and the index) goes at a reconcile, whenever
    it was written."""
    with open_store(tmp_path) as store:
        store.add("a first note", id="first")
        store.add("the tower bell rings at noon", id="bell")
        store._parts.collection.call("delete", ids=["bell"])  # the collection's half only
        store.sync(full=True)
        assert index_ids(store) == {"first"}


def test_a_copy_from_the_collection_never_brings_back_an_older_text(tmp_path: Path) -> None:
    """A sync copies the collection's records into the index. Another store on the same
    index file updates a memory right after the copy read its page: the index must end
    with the new text. (The copy used to read outside the index's write transaction, so
    the update could finish in between and the copy then wrote the old text over it:
    the keyword leg searched, and reads returned, a text the memory no longer had.)"""
    with open_store(tmp_path) as reader, open_store(tmp_path) as other:
        reader.add("a first note", id="first")
        reader.add("the tower bell rings at noon", id="bell")
        collection = reader._parts.collection
        rows = collection.rows
        updaters: list[threading.Thread] = []

        def read_then_another_updates(where: Any = None, **kwargs: Any) -> Iterator[list[Any]]:
            for page in rows(where, **kwargs):
                if not updaters:
                    updater = threading.Thread(
                        target=other.update, args=("bell",), kwargs={"text": "the bell is silent"}
                    )
                    updaters.append(updater)
                    updater.start()
                    # Over at once, unless the copy holds the index's write lock (as it
                    # should): then the update's index half waits for the copy's commit.
                    updater.join(timeout=2.0)
                yield page

        collection.rows = read_then_another_updates  # type: ignore[method-assign]
        reader.sync(full=True)
        collection.rows = rows  # type: ignore[method-assign]
        updaters[0].join(timeout=60)
        assert not updaters[0].is_alive()
        texts = {m.id: m.text for m in indexed(reader)}
        assert texts == {"first": "a first note", "bell": "the bell is silent"}
        assert found(reader, "silent") == ["bell"]


def test_a_collection_larger_than_a_page_reconciles_every_id(tmp_path: Path) -> None:
    """The ids are read in one call (a page at a time, each page cost Chroma a scan to
    its offset: ~15 minutes at a million memories); every one must come back, also
    beyond what one page held (5,000)."""
    from hybrid_memory._store.collection import PAGE

    with open_store(tmp_path) as store:
        store.add_many([{"text": f"memory number {i}"} for i in range(PAGE + 700)])
        ids = set(index_ids(store))
        assert len(ids) == PAGE + 700
        assert store._parts.collection.all_ids() == ids
