"""Namespaces as shares of one collection (issue 44, "ten thousand tenants"): their
records in the one collection all namespaces of a store share, apart by key and Chroma
id; and stores made by earlier versions, whose namespaces were collections of their
own, moved into it when opened. Real embedded Chroma and a real ``chroma run`` server."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path
from typing import Any

import chromadb
import pytest

from hybrid_memory import HybridMemory, MemoryNotFoundError

from ..conftest import HashEmbedding

DATA = Path(__file__).parent / "data"
LEGACY = DATA / "main-cf73b9c-namespaces.tgz"  # made by main: see its .md beside it


def open_store(**kwargs: Any) -> HybridMemory:
    return HybridMemory(embedding=HashEmbedding(), embedding_name="test-hash-64", **kwargs)


def legacy_store(tmp_path: Path) -> Path:
    with tarfile.open(LEGACY) as archive:
        archive.extractall(tmp_path, filter="data")
    return tmp_path / "store"


def collections(path: Path) -> dict[str, Any]:
    """The collections on an embedded path, read in a child process (a second client
    on the path in this process would be another Chroma system on it)."""
    script = (
        "import chromadb, json, sys\n"
        "c = chromadb.PersistentClient(sys.argv[1])\n"
        "out = {}\n"
        "for col in c.list_collections():\n"
        "    got = col.get(include=['metadatas'])\n"
        "    out[col.name] = [[i, m] for i, m in zip(got['ids'], got['metadatas'])]\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True
    )
    return dict(json.loads(done.stdout))


def test_a_store_made_by_main_is_moved_into_one_collection(tmp_path: Path) -> None:
    path = legacy_store(tmp_path)
    before = collections(path)
    legacy = sorted(name for name in before if ".ns." in name)
    assert len(legacy) == 5  # alice, bob, empty, A:sub and A:sub/deep
    alice_old = next(v for n, v in before.items() if ".ns.alice." in n)
    created = {i: m["hm:created_at"] for i, m in alice_old}
    with open_store(path=path) as store:
        # Listed before any is opened (still collections of their own), and after.
        assert store.namespaces() == ["A:sub", "alice", "bob", "empty"]
        alice, bob = store.namespace("alice"), store.namespace("bob")
        assert store.get("k").text == "the store's own memory about tea"
        assert alice.get("k").text == "alice likes green tea"
        assert alice.get("k").tags == ("tea", "alice") and alice.get("k").metadata == {"n": 1}
        assert {i: alice.get(i).created_at.timestamp() for i in created} == pytest.approx(created)
        assert bob.get("k").text == "bob prefers coffee"
        assert (store.count(), alice.count(), bob.count()) == (1, 2, 1)
        hits = alice.search("green tea", k=5)
        assert [h.id for h in hits][:1] == ["k"] and hits[0].ranks.get("keyword") == 1
        assert [h.id for h in alice.search("fridays", k=5, tags=["ops"])][:1] == ["d"]
        assert alice.stats().in_step and alice.stats().tags == 3
        deep = store.namespace("A:sub").namespace("deep")
        assert deep.get("k").text == "a nested memory"
        assert store.namespace("A:sub").namespaces() == ["deep"]
        assert store.namespace("A:sub").count() == 0
        with pytest.raises(MemoryNotFoundError):
            store.namespace("empty").get("k")
        assert store.namespaces() == ["A:sub", "alice", "bob", "empty"]
    after = collections(path)
    assert sorted(after) == [
        "hybrid_memory",
        "hybrid_memory.namespace-names",
        "hybrid_memory.namespaces",
    ]
    shared = after["hybrid_memory.namespaces"]
    # Three memories with id "k" in three namespaces: three records, apart.
    assert sum(1 for i, _ in shared if i.endswith(":k")) == 3
    records = [m for _, m in shared if "hm:ns" in m]
    assert len(records) == 4 and all(m["hm:ns"] for m in records)
    # The move of each namespace holding memories named it in the same writes; the two
    # without (empty, A:sub) are named in the registry when closed.
    named = sorted(m["hm:namespace"] for _, m in shared if "hm:ns" not in m)
    assert named == ["alice", "bob", "deep"]
    registry = sorted(m["hm:namespace"] for _, m in after["hybrid_memory.namespace-names"])
    assert {"A:sub", "empty"} <= set(registry)
    # Opened again (as another process would): the same memories, nothing moved twice.
    with open_store(path=path) as again:
        assert again.namespaces() == ["A:sub", "alice", "bob", "empty"]
        assert again.namespace("alice").get("d").text == "alice deploys on fridays"
        assert again.namespace("alice").count() == 2


def test_equal_ids_in_namespaces_are_records_of_one_collection(tmp_path: Path) -> None:
    path = tmp_path / "m"
    with open_store(path=path) as store:
        for name in ("a", "b", "a:b"):
            store.namespace(name).add(f"memory of {name}", id="x", tags=[name])
        store.add("the store's", id="x")
        assert [store.namespace(n).get("x").text for n in ("a", "b", "a:b")] == [
            "memory of a",
            "memory of b",
            "memory of a:b",
        ]
        store.namespace("a").delete("x")
        assert store.namespace("b").get("x").text == "memory of b"
        assert store.get("x").text == "the store's"
        assert store.namespace("a").count() == 0 and store.namespace("b").count() == 1
    found = collections(path)
    # Each namespace named by its first write, in the shared collection: no registry.
    assert sorted(found) == ["hybrid_memory", "hybrid_memory.namespaces"]
    shared = found["hybrid_memory.namespaces"]
    assert sum(1 for _, m in shared if "hm:ns" in m) == 2  # b's and a:b's
    assert sorted(m["hm:namespace"] for _, m in shared if "hm:ns" not in m) == ["a", "a:b", "b"]
    assert len(found["hybrid_memory"]) == 1  # the store's own, never a namespace's


def test_a_vector_search_finds_only_its_namespace(tmp_path: Path) -> None:
    with open_store(path=tmp_path / "m") as store:
        a, b = store.namespace("a"), store.namespace("b")
        a_ids = set(a.add_many([f"alpha note {i}" for i in range(30)]))
        b_ids = set(b.add_many([f"alpha note {i}" for i in range(30)]))
        assert not a_ids & b_ids
        for view, own in ((a, a_ids), (b, b_ids)):
            hits = view.search("alpha note 3", k=10)
            assert len(hits) == 10 and {h.id for h in hits} <= own
            assert sum(1 for h in hits if "vector" in h.ranks) == 10


def test_a_namespace_written_by_another_process_on_the_same_path(tmp_path: Path) -> None:
    """Many processes on one path: the other process reaches Chroma through this one
    (the path's owner), and its namespace writes land in the shared collection, where
    this process's view of the namespace sees them."""
    path = tmp_path / "m"
    with open_store(path=path) as mine:
        view = mine.namespace("team")
        view.add("written here", id="here")
        script = (
            "import sys; sys.path.insert(0, sys.argv[2])\n"
            "from tests.conftest import HashEmbedding\n"
            "from hybrid_memory import HybridMemory\n"
            "with HybridMemory(path=sys.argv[1],"
            " embedding=HashEmbedding(), embedding_name='test-hash-64') as m:\n"
            "    t = m.namespace('team')\n"
            "    assert t.get('here').text == 'written here'\n"
            "    t.add('written by the other process about zebras', id='there')\n"
            "    t.delete('here')\n"
            "    m.namespace('other').add('not the team', id='there')\n"
            "    assert m.namespaces() == ['other', 'team'], m.namespaces()\n"
        )
        root = str(Path(__file__).resolve().parents[2])
        subprocess.run([sys.executable, "-c", script, str(path), root], check=True)
        assert view.existing(["here", "there"]) == {"there"}  # read from the collection
        view.sync()  # the keyword index caught up (the periodic check would, within its interval)
        assert view.get("there").text == "written by the other process about zebras"
        with pytest.raises(MemoryNotFoundError):
            view.get("here")
        assert view.count() == 1 and mine.namespace("other").count() == 1
        assert [h.id for h in view.search("zebras", k=3)] == ["there"]
        assert mine.namespaces() == ["other", "team"] and mine.count() == 0


@pytest.mark.server
def test_a_namespace_written_by_another_process_on_a_server(chroma_server: str) -> None:
    """Another process's writes to a namespace are seen by this process's view of it
    (the shared collection's records of that namespace, caught up from its watermark)."""
    collection = f"part-{uuid.uuid4().hex[:8]}"
    with open_store(url=chroma_server, collection=collection) as mine:
        view = mine.namespace("team")
        view.add("written here", id="here")
        script = (
            "import sys; sys.path.insert(0, sys.argv[3])\n"
            "from tests.conftest import HashEmbedding\n"
            "from hybrid_memory import HybridMemory\n"
            "with HybridMemory(url=sys.argv[1], collection=sys.argv[2],"
            " embedding=HashEmbedding(), embedding_name='test-hash-64') as m:\n"
            "    t = m.namespace('team')\n"
            "    t.add('written by the other process about zebras', id='there')\n"
            "    t.delete('here')\n"
            "    m.namespace('other').add('not the team', id='there')\n"
        )
        root = str(Path(__file__).resolve().parents[2])
        subprocess.run([sys.executable, "-c", script, chroma_server, collection, root], check=True)
        view.sync()
        assert view.get("there").text == "written by the other process about zebras"
        with pytest.raises(MemoryNotFoundError):
            view.get("here")
        assert view.count() == 1
        assert [h.id for h in view.search("zebras", k=3)] == ["there"]
        assert mine.namespaces() == ["other", "team"]
    client = chromadb.HttpClient(host="127.0.0.1", port=int(chroma_server.rsplit(":", 1)[1]))
    names = {c.name for c in client.list_collections() if c.name.startswith(collection)}
    # Both namespaces were named by their first write, in the shared collection.
    assert names == {collection, f"{collection}.namespaces"}
