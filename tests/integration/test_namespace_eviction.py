"""Many tenants on one store (issue 44): a store keeps at most ``open_namespaces``
namespaces open, closes the least recently used and opens it again on use, with exactly
its memories on every leg; and a descriptor limit hit anyway is named. On real Chroma
(a path and a ``chroma run`` server) and the real SQLite index; the low limits run in
child processes (``RLIMIT_NOFILE`` set before anything is imported)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from hybrid_memory import HybridMemory

from ..conftest import HashEmbedding

REPO = Path(__file__).resolve().parents[2]


def open_store(**kwargs: Any) -> HybridMemory:
    return HybridMemory(embedding=HashEmbedding(), embedding_name="test-hash-64", **kwargs)


def fill(view: HybridMemory, tenant: int) -> None:
    """Two memories; the id ``same`` is in every tenant's namespace."""
    view.add_many(
        [
            {"text": f"tenant {tenant} likes w{tenant}x", "id": "same", "tags": [f"t{tenant}"]},
            {"text": f"tenant {tenant} owns a w{tenant}x boat", "id": f"own-{tenant}"},
        ]
    )


def check_alone(view: HybridMemory, tenant: int) -> None:
    """Exactly this tenant's memories, on every leg: ids, tags, counts, keyword and vector
    hits."""
    assert view.count() == 2
    assert view.get("same").text == f"tenant {tenant} likes w{tenant}x"
    assert view.existing(["same", f"own-{tenant}", f"own-{tenant + 1}"]) == {
        "same",
        f"own-{tenant}",
    }
    assert view.tags() == [f"t{tenant}"]
    hits = view.search(f"w{tenant}x boat", k=5)
    assert {h.id for h in hits} == {"same", f"own-{tenant}"}
    assert hits[0].ranks.get("keyword") == 1
    assert all(h.text.startswith(f"tenant {tenant} ") for h in hits)
    assert view.stats().in_step


def stores(tmp_path: Path, chroma_server: str | None) -> dict[str, Any]:
    if chroma_server is None:
        return {"path": tmp_path / "m"}
    return {"url": chroma_server, "collection": f"ev-{uuid.uuid4().hex[:8]}"}


@pytest.mark.parametrize("where", ["path", pytest.param("server", marks=pytest.mark.server)])
def test_closed_namespaces_reopen_with_exactly_their_memories(
    where: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    server = request.getfixturevalue("chroma_server") if where == "server" else None
    with open_store(open_namespaces=3, **stores(tmp_path, server)) as memory:
        views = [memory.namespace(f"tenant-{i}") for i in range(8)]
        for i, view in enumerate(views):
            fill(view, i)
        assert memory._parts.open_count() <= 3  # the others were closed
        for i, view in enumerate(views):  # each reopened on use, alone
            check_alone(view, i)
        assert memory._parts.open_count() <= 3
        assert memory.count() == 0  # the store itself holds none of them
        assert memory.namespaces() == sorted(f"tenant-{i}" for i in range(8))


def test_a_view_kept_across_eviction_is_the_same_namespace(tmp_path: Path) -> None:
    with open_store(path=tmp_path / "m", open_namespaces=2) as memory:
        first = memory.namespace("first")
        first.add("kept while closed", id="k")
        old = first._parts
        for i in range(5):
            memory.namespace(f"other-{i}").add(f"other {i}", id="k")
        assert old.closed  # closed as the least recently used
        assert first.get("k").text == "kept while closed"  # opened again, same memories
        assert first._parts is not old and not first._parts.closed
        first.update("k", text="changed after reopening")
        assert [h.id for h in first.search("changed after reopening")] == ["k"]


def test_calls_in_more_namespaces_at_once_than_are_kept_open(tmp_path: Path) -> None:
    """Six threads, each in its own namespace, with two kept open: a namespace a call is
    using is never closed under it (the store goes above the limit meanwhile)."""
    with open_store(path=tmp_path / "m", open_namespaces=2) as memory:
        views = [memory.namespace(f"tenant-{i}") for i in range(6)]
        for i, view in enumerate(views):
            fill(view, i)
        start = threading.Barrier(len(views))

        def work(i: int) -> None:
            start.wait()
            for round_ in range(3):
                views[i].add(f"tenant {i} round {round_}", id=f"r{round_}")
                check_alone_but(views[i], i, extra=round_ + 1)

        with ThreadPoolExecutor(len(views)) as pool:
            list(pool.map(work, range(len(views))))
        for i, view in enumerate(views):
            assert view.count() == 5 and view.get("same").text.startswith(f"tenant {i} ")
        assert memory._parts.open_count() <= 2


def check_alone_but(view: HybridMemory, tenant: int, extra: int) -> None:
    assert view.count() == 2 + extra
    hits = view.search(f"w{tenant}x boat", k=3)
    assert hits and all(h.text.startswith(f"tenant {tenant} ") for h in hits)


def test_nested_namespaces_survive_their_parent_closing(tmp_path: Path) -> None:
    with open_store(path=tmp_path / "m", open_namespaces=1) as memory:
        alice = memory.namespace("team").namespace("alice")
        alice.add("nested memory", id="x", tags=["n"])
        memory.namespace("other").add("pushes team out", id="x")
        assert alice.get("x").text == "nested memory"
        assert alice.tags() == ["n"]
        assert memory.namespace("other").get("x").text == "pushes team out"


def test_another_process_writes_to_a_closed_namespace_are_seen_after_reopen(
    tmp_path: Path, chroma_server: str
) -> None:
    where = stores(tmp_path, chroma_server)
    with open_store(open_namespaces=1, sync_interval=0, **where) as memory:
        target = memory.namespace("target")
        fill(target, 1)
        memory.namespace("pusher").add("closes target", id="p")
        assert memory._parts.open_count() == 1
        with open_store(**where) as other:  # another agent on the same server
            other.namespace("target").add("written while closed here", id="late", tags=["late"])
            other.namespace("target").delete(["own-1"])
        assert target.existing(["late", "own-1", "same"]) == {"late", "same"}
        assert target.count() == 2
        assert target.tags() == ["late", "t1"]
        assert [h.id for h in target.search("written while closed here", k=1)] == ["late"]


def run_child(code: str, limit: int, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter whose soft ``RLIMIT_NOFILE`` is ``limit``."""
    prelude = f"""
        import resource, sys
        resource.setrlimit(
            resource.RLIMIT_NOFILE, ({limit}, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
        )
        sys.path.insert(0, {str(REPO)!r})
        from tests.conftest import HashEmbedding
        from hybrid_memory import HybridMemory
        path = {str(tmp_path / "m")!r}
    """
    script = textwrap.dedent(prelude) + textwrap.dedent(code)
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600, cwd=REPO
    )


def test_many_namespaces_under_a_low_descriptor_limit_on_a_server(
    tmp_path: Path, chroma_server: str
) -> None:
    """400 namespaces under ``ulimit -n 128`` from one process (before: the store failed
    at namespace 37 under 256): the store's own descriptors stay bounded."""
    collection = f"many-{uuid.uuid4().hex[:8]}"
    done = run_child(
        f"""
        import os
        memory = HybridMemory(url={chroma_server!r}, collection={collection!r},
                              embedding=HashEmbedding(), embedding_name="test-hash-64")
        for i in range(400):
            memory.namespace(f"t{{i}}").add_many([f"tenant {{i}} note {{j}}" for j in range(3)])
        assert memory.namespace("t7").count() == 3
        assert memory.namespace("t7").search("tenant 7 note 1")[0].text.startswith("tenant 7 ")
        print("fds", len(os.listdir("/proc/self/fd")), "open", memory._parts.open_count())
        memory.close()
        """,
        128,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    fds, open_now = int(done.stdout.split()[1]), int(done.stdout.split()[3])
    assert fds < 128 and open_now <= 10  # a quarter of 128, three descriptors each


def test_a_descriptor_limit_hit_is_named(tmp_path: Path) -> None:
    """Under a limit too low for what the caller keeps open, the error says so (EMFILE and
    ``ulimit -n``), not that the file's permissions are wrong."""
    done = run_child(
        """
        import os
        memory = HybridMemory(path=path, embedding=HashEmbedding(), embedding_name="test-hash-64",
                              open_namespaces=1000)
        try:
            for i in range(400):
                memory.namespace(f"t{i}").add(f"tenant {i}")
        except Exception as exc:
            print(type(exc).__name__, "|", exc)
        """,
        96,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "too many open files" in done.stdout, done.stdout + done.stderr[-2000:]
    assert "ulimit -n` (now 96)" in done.stdout
    assert "may read and write" not in done.stdout
