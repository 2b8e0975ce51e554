"""A fleet that starts fast (issue 21, item 5): the keyword index of a server store kept
in a cache file, reused by a later open (which catches up only what changed) and shared
by the processes of one machine; a first-ever open warms it in the background while the
vector leg answers.

Every store here talks to a real ``chroma run`` server (the session fixture); the other
processes are real Python processes.
"""

from __future__ import annotations

import fcntl
import json
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import chromadb

from hybrid_memory import HybridMemory
from hybrid_memory._model.settings import load_settings
from hybrid_memory._store.index_location import index_path, server_identity

from ..conftest import SeededEmbedding

REPO = Path(__file__).resolve().parents[2]
EMBEDDING = "test-seeded-64"

# Another process: opens the store with its own cache, applies the changes given as
# JSON on the command line, and prints the ids it added.
OTHER = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, {repo!r})
    from hybrid_memory import HybridMemory
    from tests.conftest import SeededEmbedding

    url, collection, cache, plan = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    store = HybridMemory(url=url, collection=collection, cache_dir=cache,
                         embedding=SeededEmbedding(), embedding_name={embedding!r},
                         warm_in_background=plan.get("warm", 5000))
    added = store.add_many(plan.get("add", []))
    for memory_id, text in plan.get("update", {{}}).items():
        store.update(memory_id, text=text)
    if plan.get("delete"):
        store.delete(plan["delete"])
    if plan.get("sync"):
        store.sync()  # waits for a warming index, then catches up
    found = {{}}
    for word in plan.get("find", []):
        found[word] = [h.id for h in store.search(word, k=5) if "keyword" in h.ranks]
    store.close()
    print("RESULT " + json.dumps({{"added": added, "found": found}}), flush=True)
    """
).format(repo=str(REPO), embedding=EMBEDDING)


def other_process(url: str, collection: str, cache: Path, plan: dict[str, Any]) -> Any:
    done = subprocess.run(
        [sys.executable, "-c", OTHER, url, collection, str(cache), json.dumps(plan)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def open_store(url: str, collection: str, cache: Path, **settings: Any) -> HybridMemory:
    return HybridMemory(
        url=url,
        collection=collection,
        cache_dir=str(cache),
        embedding=SeededEmbedding(),
        embedding_name=EMBEDDING,
        **settings,
    )


def items(prefix: str, n: int) -> list[dict[str, Any]]:
    return [
        {"id": f"{prefix}{i}", "text": f"note {prefix}{i} about the garden zq{prefix}{i}"}
        for i in range(n)
    ]


def keyword_ids(store: HybridMemory, query: str, k: int = 10) -> list[str]:
    return [h.id for h in store.search(query, k=k) if "keyword" in h.ranks]


def index_file(store: HybridMemory) -> Path:
    path = store._parts.index.path
    assert path is not None, "a server store keeps its index in a file"
    return Path(path)


def rowid_of(path: Path, memory_id: str) -> int:
    with sqlite3.connect(path) as conn:
        return int(
            conn.execute("SELECT rowid FROM memories WHERE id = ?", (memory_id,)).fetchone()[0]
        )


def index_holds(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {row[0] for row in conn.execute("SELECT id FROM memories")}


def wait_for(condition: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_reopen_catches_up_only_what_another_process_changed_while_closed(
    chroma_server: str, tmp_path: Path
) -> None:
    collection = f"fleet-{uuid.uuid4().hex[:8]}"
    store = open_store(chroma_server, collection, tmp_path / "mine")
    store.add_many(items("a", 30))
    path = index_file(store)
    assert path.is_relative_to(tmp_path / "mine" / "indexes")
    untouched = rowid_of(path, "a20")
    store.close()

    other_process(
        chroma_server,
        collection,
        tmp_path / "theirs",
        {
            "add": items("b", 5),
            "update": {"a1": "rewritten zqrewritten river", "a2": "rewritten again zqagain"},
            "delete": ["a3", "a4", "a5"],
        },
    )

    store = open_store(chroma_server, collection, tmp_path / "mine")
    try:
        assert index_file(store) == path
        # The kept index was caught up, not refilled: an untouched memory keeps its row.
        assert rowid_of(path, "a20") == untouched
        assert keyword_ids(store, "zqb3") == ["b3"]
        assert keyword_ids(store, "zqrewritten") == ["a1"]
        assert keyword_ids(store, "zqa1") == []  # the old text is gone from the index
        assert keyword_ids(store, "zqagain") == ["a2"]
        # Deletes are reconciled in the background, within a moment of the open.
        wait_for(lambda: not index_holds(path) & {"a3", "a4", "a5"})
        assert index_holds(path) == {f"a{i}" for i in range(30)} - {"a3", "a4", "a5"} | {
            f"b{i}" for i in range(5)
        }
        assert store.count({"created_at": {"$gte": 0}}) == store.count() == 32
    finally:
        store.close()


def test_two_processes_share_one_cache_file(chroma_server: str, tmp_path: Path) -> None:
    collection = f"fleet-{uuid.uuid4().hex[:8]}"
    cache = tmp_path / "shared"
    seed = open_store(chroma_server, collection, tmp_path / "seed")
    seed.add_many(items("s", 40))
    seed.close()

    # Two processes open the same cold cache at once (the fill in the background: at
    # most one fills, the other waits for it), each adds its own, each finds both.
    results: list[Any] = [None, None]

    def run(slot: int, prefix: str) -> None:
        plan = {"add": items(prefix, 6), "warm": 0, "sync": True, "find": ["zqs7"]}
        results[slot] = other_process(chroma_server, collection, cache, plan)

    threads = [threading.Thread(target=run, args=(i, p)) for i, p in enumerate(("x", "y"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(r is not None for r in results)
    files = sorted((cache / "indexes").glob("*.sqlite3"))
    assert len(files) == 1
    held = index_holds(files[0])
    assert {f"s{i}" for i in range(40)} | {f"x{i}" for i in range(6)} | {
        f"y{i}" for i in range(6)
    } == held
    for r in results:
        assert r["found"]["zqs7"] == ["s7"]

    store = open_store(chroma_server, collection, cache)
    try:
        assert index_file(store) == files[0]
        assert keyword_ids(store, "zqx5") == ["x5"]
        assert keyword_ids(store, "zqy5") == ["y5"]
    finally:
        store.close()


def test_a_recreated_collection_does_not_reuse_the_stale_cache(
    chroma_server: str, tmp_path: Path
) -> None:
    collection = f"fleet-{uuid.uuid4().hex[:8]}"
    cache = tmp_path / "cache"
    store = open_store(chroma_server, collection, cache)
    store.add_many(items("old", 10))
    first = index_file(store)
    store.close()

    host, port = chroma_server.removeprefix("http://").split(":")
    chromadb.HttpClient(host=host, port=int(port)).delete_collection(collection)

    store = open_store(chroma_server, collection, cache)
    try:
        assert index_file(store) != first
        assert keyword_ids(store, "zqold3") == []
        assert store.count({"created_at": {"$gte": 0}}) == 0
        store.add_many(items("new", 3))
        assert keyword_ids(store, "zqnew1") == ["new1"]
        assert store.count({"created_at": {"$gte": 0}}) == 3
    finally:
        store.close()


def test_a_cold_open_answers_from_the_vector_leg_while_the_index_warms(
    chroma_server: str, tmp_path: Path
) -> None:
    collection = f"fleet-{uuid.uuid4().hex[:8]}"
    seed = open_store(chroma_server, collection, tmp_path / "seed")
    seed.add_many(items("w", 60))
    seed.close()

    # Where the new process's index will be; its fill lock is held here, as by another
    # process filling that file, so that the warming cannot finish before we look.
    host, port = chroma_server.removeprefix("http://").split(":")
    client = chromadb.HttpClient(host=host, port=int(port))
    collection_id = str(client.get_collection(collection).id)
    cache = tmp_path / "cold"
    settings = load_settings(url=chroma_server, cache_dir=str(cache))
    path = index_path(settings, collection, collection_id, server_identity(settings, client))
    assert path is not None
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path + ".fill", "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        store = open_store(chroma_server, collection, cache, warm_in_background=10)
        try:
            result = store.search("note w7 about the garden zqw7", k=3)
            assert result.fallback_mode
            assert result.fallback_reason is not None and "warming" in result.fallback_reason
            assert result[0].id == "w7"  # its own text: the vector leg finds it
            assert all(set(h.ranks) == {"vector"} for h in result)
            # An add without an id dedups against every stored memory: it waits for the
            # warming (outside the write lock, which the fill takes), then finds w3's text.
            released = threading.Timer(0.5, fcntl.flock, (lock, fcntl.LOCK_UN))
            released.start()
            assert store.add(items("w", 60)[3]["text"]) == "w3"
            released.join()
            assert store.count({"created_at": {"$gte": 0}}) == 60
        except BaseException:
            store.close()
            raise
    try:
        warm = store.search("zqw7", k=3)
        assert not warm.fallback_mode
        assert warm[0].id == "w7" and "keyword" in warm[0].ranks
    finally:
        store.close()


def test_the_fleet_benchmark_runs_at_a_tiny_size(chroma_server: str) -> None:
    """No timing asserted: this keeps ``benchmarks/fleet_start.py`` from rotting."""
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "fleet_start.py"),
            "--url",
            chroma_server,
            "--collection",
            f"bench-{uuid.uuid4().hex[:8]}",
            "--n",
            "60",
            "--changes",
            "3",
            "--lag",
            "2",
            "--writers",
            "1",
            "--readers",
            "1",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["ok"] and report["fill"]["count"] == 60
    for run in ("cold", "warm", "warm_after_changes"):
        assert report[run]["found_by_first_search"], report[run]
        assert {"chroma_client_s", "open_s", "first_search_s", "peak_rss_mb"} <= set(report[run])
    assert report["warm_after_changes"]["checks"] == {"deleted_absent": True, "updated_found": True}
    assert report["lag"]["adds"] > 0 and report["lag"]["missed"] == 0
